"""autoparser as vLLM's tool-call and reasoning parser, both named ``autoparser``.

``vllm serve MODEL --enable-auto-tool-choice --tool-call-parser autoparser
--reasoning-parser autoparser`` finds them through the ``vllm.general_plugins`` entry point
(:func:`register`), or with ``--tool-parser-plugin autoparser.integrations.vllm`` /
``--reasoning-parser-plugin autoparser.integrations.vllm``. Registration is lazy: the
parsers (and the vLLM version check, see ``_compat``) load when vLLM asks for them, so an
installed autoparser never stops a vLLM server that does not use it.
"""

from __future__ import annotations

import logging
import sys

NAME = "autoparser"
PARSERS_MODULE = "autoparser.integrations.vllm.parsers"

_log = logging.getLogger(__name__)


def register() -> None:
    """Register the two parsers with vLLM's managers (the entry point; idempotent)."""
    try:
        from vllm.reasoning import ReasoningParserManager
        from vllm.tool_parsers import ToolParserManager
    except ImportError as exc:
        _log.warning("autoparser: vLLM's parser managers cannot be imported (%s)", exc)
        return
    ToolParserManager.register_lazy_module(NAME, PARSERS_MODULE, "AutoparserToolParser")
    ReasoningParserManager.register_lazy_module(NAME, PARSERS_MODULE, "AutoparserReasoningParser")


# Loaded as --tool-parser-plugin / --reasoning-parser-plugin: vLLM is already imported.
if "vllm" in sys.modules:
    register()
