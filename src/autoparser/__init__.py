"""autoparser: derive prompts, streaming parsers and grammars from any LLM chat template.

The public names are imported on first use (PEP 562), so that ``import autoparser.errors``
or ``autoparser --version`` does not load jinja2 and the whole library.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: ``import autoparser`` stays light (see above)
if TYPE_CHECKING:
    from typing import Any

    from autoparser.analysis.model import TemplateAnalysis
    from autoparser.chat import ChatTemplate
    from autoparser.errors import (
        AnalysisWarning,
        AutoparserError,
        ExportError,
        GrammarError,
        RequestError,
        SchemaError,
        TemplateError,
    )
    from autoparser.generate import ChatParams, GrammarTrigger
    from autoparser.message import ChatMessage, ToolCall
    from autoparser.stream import StreamParser
    from autoparser.template import TemplateCaps

# Public name -> the module that defines it.
_WHERE = {
    "AnalysisWarning": "autoparser.errors",
    "AutoparserError": "autoparser.errors",
    "ChatMessage": "autoparser.message",
    "ChatParams": "autoparser.generate",
    "ChatTemplate": "autoparser.chat",
    "ExportError": "autoparser.errors",
    "GrammarError": "autoparser.errors",
    "GrammarTrigger": "autoparser.generate",
    "RequestError": "autoparser.errors",
    "SchemaError": "autoparser.errors",
    "StreamParser": "autoparser.stream",
    "TemplateAnalysis": "autoparser.analysis.model",
    "TemplateCaps": "autoparser.template",
    "TemplateError": "autoparser.errors",
    "ToolCall": "autoparser.message",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'autoparser' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "AnalysisWarning",
    "AutoparserError",
    "ChatMessage",
    "ChatParams",
    "ChatTemplate",
    "ExportError",
    "GrammarError",
    "GrammarTrigger",
    "RequestError",
    "SchemaError",
    "StreamParser",
    "TemplateAnalysis",
    "TemplateCaps",
    "TemplateError",
    "ToolCall",
]

__version__ = "0.1.0"
