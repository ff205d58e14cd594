"""autoparser: derive prompts, streaming parsers and grammars from any LLM chat template.

The public names are imported on first use (PEP 562), so that ``import autoparser.errors``
or ``autoparser --version`` does not load jinja2 and the whole library.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: ``import autoparser`` stays light (see above)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from autoparser.analysis.model import TemplateAnalysis
    from autoparser.analysis.saved import default_analysis_cache
    from autoparser.cache import CACHES, Caches, CacheStats, Store
    from autoparser.cancel import CancelToken
    from autoparser.chat import ChatTemplate
    from autoparser.errors import (
        AnalysisWarning,
        AutoparserError,
        Cancelled,
        ExportError,
        GrammarError,
        IntegrationError,
        RequestError,
        SchemaError,
        TemplateError,
        TemplateLimitError,
        WorkLimitError,
    )
    from autoparser.generate import GrammarTrigger
    from autoparser.jsontypes import (
        FunctionDict,
        JsonMapping,
        JsonObject,
        JsonSchema,
        JsonValue,
        MessageDict,
        ToolCallDict,
        ToolDict,
    )
    from autoparser.message import FINDING_KINDS, TOLERANCES, ChatMessage, Finding, ToolCall
    from autoparser.params import ChatParams
    from autoparser.schema.lark_grammar import LarkGrammarError, lark_to_regex
    from autoparser.schema.loosen import Loosened, loosen_schema
    from autoparser.session import ReasoningSplit, Reply, RequestOptions, Session, merge_deltas
    from autoparser.stream import TOOL_CALL_DELTAS, StreamDelta, StreamParser, ToolCallDelta
    from autoparser.template import TemplateCaps
    from autoparser.template.loading import (
        DEFAULT_VARIANT,
        TemplateSource,
        decode_text,
        load_path,
        load_pretrained,
        load_text,
    )
    from autoparser.template.provenance import caller_pieces
    from autoparser.training import RenderedPrompt, assistant_tokens_mask, tokenize_for_training

# Public name -> the module that defines it.
_WHERE = {
    "AnalysisWarning": "autoparser.errors",
    "AutoparserError": "autoparser.errors",
    "Cancelled": "autoparser.errors",
    "CancelToken": "autoparser.cancel",
    "ChatMessage": "autoparser.message",
    "Finding": "autoparser.message",
    "FINDING_KINDS": "autoparser.message",
    "TOLERANCES": "autoparser.message",
    "ChatParams": "autoparser.params",
    "Loosened": "autoparser.schema.loosen",
    "loosen_schema": "autoparser.schema.loosen",
    "LarkGrammarError": "autoparser.schema.lark_grammar",
    "lark_to_regex": "autoparser.schema.lark_grammar",
    "ChatTemplate": "autoparser.chat",
    "ExportError": "autoparser.errors",
    "GrammarError": "autoparser.errors",
    "GrammarTrigger": "autoparser.generate",
    "IntegrationError": "autoparser.errors",
    "RequestError": "autoparser.errors",
    "SchemaError": "autoparser.errors",
    "ReasoningSplit": "autoparser.session",
    "Reply": "autoparser.session",
    "RequestOptions": "autoparser.session",
    "Session": "autoparser.session",
    "merge_deltas": "autoparser.session",
    "StreamParser": "autoparser.stream",
    "TOOL_CALL_DELTAS": "autoparser.stream",
    "StreamDelta": "autoparser.stream",
    "ToolCallDelta": "autoparser.stream",
    "CACHES": "autoparser.cache",
    "Caches": "autoparser.cache",
    "CacheStats": "autoparser.cache",
    "Store": "autoparser.cache",
    "TemplateAnalysis": "autoparser.analysis.model",
    "default_analysis_cache": "autoparser.analysis.saved",
    "TemplateCaps": "autoparser.template",
    "TemplateError": "autoparser.errors",
    "TemplateLimitError": "autoparser.errors",
    "WorkLimitError": "autoparser.errors",
    "DEFAULT_VARIANT": "autoparser.template.loading",
    "TemplateSource": "autoparser.template.loading",
    "decode_text": "autoparser.template.loading",
    "load_path": "autoparser.template.loading",
    "caller_pieces": "autoparser.template.provenance",
    "load_pretrained": "autoparser.template.loading",
    "load_text": "autoparser.template.loading",
    "ToolCall": "autoparser.message",
    "FunctionDict": "autoparser.jsontypes",
    "JsonMapping": "autoparser.jsontypes",
    "JsonObject": "autoparser.jsontypes",
    "JsonSchema": "autoparser.jsontypes",
    "JsonValue": "autoparser.jsontypes",
    "MessageDict": "autoparser.jsontypes",
    "ToolCallDict": "autoparser.jsontypes",
    "ToolDict": "autoparser.jsontypes",
    "RenderedPrompt": "autoparser.training",
    "assistant_tokens_mask": "autoparser.training",
    "tokenize_for_training": "autoparser.training",
}


def _module(where: str) -> ModuleType:
    """The module named ``where``, imported on first use. One literal import per module,
    so that tests/project/test_architecture.py reads each (it refuses imports by computed name)."""
    if where == "autoparser.errors":
        from autoparser import errors

        return errors
    if where == "autoparser.jsontypes":
        from autoparser import jsontypes

        return jsontypes
    if where == "autoparser.message":
        from autoparser import message

        return message
    if where == "autoparser.params":
        from autoparser import params

        return params
    if where == "autoparser.chat":
        from autoparser import chat

        return chat
    if where == "autoparser.session":
        from autoparser import session

        return session
    if where == "autoparser.generate":
        from autoparser import generate

        return generate
    if where == "autoparser.stream":
        from autoparser import stream

        return stream
    if where == "autoparser.analysis.model":
        from autoparser.analysis import model

        return model
    if where == "autoparser.analysis.saved":
        from autoparser.analysis import saved

        return saved
    if where == "autoparser.template":
        from autoparser import template

        return template
    if where == "autoparser.cache":
        from autoparser import cache

        return cache
    if where == "autoparser.cancel":
        from autoparser import cancel

        return cancel
    if where == "autoparser.training":
        from autoparser import training

        return training
    if where == "autoparser.schema.loosen":
        from autoparser.schema import loosen

        return loosen
    if where == "autoparser.schema.lark_grammar":
        from autoparser.schema import lark_grammar

        return lark_grammar
    if where == "autoparser.template.provenance":
        from autoparser.template import provenance

        return provenance
    from autoparser.template import loading

    return loading


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'autoparser' has no attribute {name!r}")
    value = getattr(_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "CACHES",
    "DEFAULT_VARIANT",
    "FINDING_KINDS",
    "TOLERANCES",
    "TOOL_CALL_DELTAS",
    "AnalysisWarning",
    "AutoparserError",
    "CacheStats",
    "Caches",
    "CancelToken",
    "Cancelled",
    "ChatMessage",
    "ChatParams",
    "ChatTemplate",
    "ExportError",
    "Finding",
    "FunctionDict",
    "GrammarError",
    "GrammarTrigger",
    "IntegrationError",
    "JsonMapping",
    "JsonObject",
    "JsonSchema",
    "JsonValue",
    "LarkGrammarError",
    "Loosened",
    "MessageDict",
    "ReasoningSplit",
    "RenderedPrompt",
    "Reply",
    "RequestError",
    "RequestOptions",
    "SchemaError",
    "Session",
    "Store",
    "StreamDelta",
    "StreamParser",
    "TemplateAnalysis",
    "TemplateCaps",
    "TemplateError",
    "TemplateLimitError",
    "TemplateSource",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDict",
    "ToolDict",
    "WorkLimitError",
    "assistant_tokens_mask",
    "caller_pieces",
    "decode_text",
    "default_analysis_cache",
    "lark_to_regex",
    "load_path",
    "load_pretrained",
    "load_text",
    "loosen_schema",
    "merge_deltas",
    "tokenize_for_training",
]

__version__ = "0.1.0"
