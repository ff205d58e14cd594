"""autoparser as vLLM's tool-call and reasoning parser, both named ``autoparser``, found
through the ``vllm.general_plugins`` entry point (:func:`register`) or ``--tool-parser-plugin
autoparser.integrations.vllm``. Registration is lazy: the parsers (and the version check)
load when vLLM asks for them, so autoparser never stops a vLLM server that does not use it.
"""

from __future__ import annotations

import logging
import sys

NAME = "autoparser"
PARSERS_MODULE = "autoparser.integrations.vllm.parsers"
# The vLLM releases the plug-in's tests ran against (tests/integrations/vllm/test_parsers.py).
TESTED_MIN, TESTED_BELOW = (0, 33), (0, 34)
TESTED_RANGE = ">=0.33,<0.34"
ANY_VERSION_ENV = "AUTOPARSER_VLLM_ANY_VERSION"

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
