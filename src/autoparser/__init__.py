"""autoparser: derive prompts, streaming parsers and grammars from any LLM chat template."""

from autoparser.analysis.model import TemplateAnalysis
from autoparser.cache import CACHES, Caches, CacheStats, Store
from autoparser.chat import ChatTemplate
from autoparser.errors import (
    AnalysisWarning,
    AutoparserError,
    ExportError,
    GrammarError,
    IntegrationError,
    RequestError,
    SchemaError,
    TemplateError,
)
from autoparser.generate import GrammarTrigger
from autoparser.message import ChatMessage, ToolCall
from autoparser.params import ChatParams
from autoparser.stream import TOOL_CALL_DELTAS, StreamDelta, StreamParser, ToolCallDelta
from autoparser.template import TemplateCaps

__all__ = [
    "CACHES",
    "TOOL_CALL_DELTAS",
    "AnalysisWarning",
    "AutoparserError",
    "CacheStats",
    "Caches",
    "ChatMessage",
    "ChatParams",
    "ChatTemplate",
    "ExportError",
    "GrammarError",
    "GrammarTrigger",
    "IntegrationError",
    "RequestError",
    "SchemaError",
    "Store",
    "StreamDelta",
    "StreamParser",
    "TemplateAnalysis",
    "TemplateCaps",
    "TemplateError",
    "ToolCall",
    "ToolCallDelta",
]

__version__ = "0.1.0"
