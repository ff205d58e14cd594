"""autoparser as SGLang's function-call and reasoning parser, both named ``autoparser``:
``--tool-call-parser autoparser --reasoning-parser autoparser``, registered by the
``sglang.srt.plugins`` entry point (:func:`register`, run before SGLang reads its arguments).
"""

from __future__ import annotations

import logging

NAME = "autoparser"
# The SGLang releases the plug-in's tests ran against (tests/integrations/sglang/).
TESTED_MIN, TESTED_BELOW = (0, 5), (0, 6)
TESTED_RANGE = ">=0.5,<0.6"
ANY_VERSION_ENV = "AUTOPARSER_SGLANG_ANY_VERSION"

_log = logging.getLogger(__name__)


def register() -> None:
    """Add the two parsers to SGLang's parser tables (the entry point; idempotent)."""
    try:
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        from autoparser.integrations.sglang.detectors import (
            AutoparserDetector,
            AutoparserReasoningDetector,
        )
    except ImportError as exc:
        _log.warning("autoparser: SGLang's parser tables cannot be imported (%s)", exc)
        return
    FunctionCallParser.ToolCallParserEnum[NAME] = AutoparserDetector
    ReasoningParser.DetectorMap[NAME] = AutoparserReasoningDetector
