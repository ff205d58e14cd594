"""autoparser: derive prompts, streaming parsers and grammars from any LLM chat template."""

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
from autoparser.training import RenderedPrompt, assistant_tokens_mask, tokenize_for_training

__all__ = [
    "AnalysisWarning",
    "AutoparserError",
    "ChatMessage",
    "ChatParams",
    "ChatTemplate",
    "ExportError",
    "GrammarError",
    "GrammarTrigger",
    "RenderedPrompt",
    "RequestError",
    "SchemaError",
    "StreamParser",
    "TemplateAnalysis",
    "TemplateCaps",
    "TemplateError",
    "ToolCall",
    "assistant_tokens_mask",
    "tokenize_for_training",
]

__version__ = "0.1.0"
