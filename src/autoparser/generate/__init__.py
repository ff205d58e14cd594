"""Analysis + request -> ChatParams: prompt, PEG parser, GBNF grammar, triggers.

``generate(template, messages, ...)`` is what ``ChatTemplate.apply`` calls;
``build_params(analysis, prompt=...)`` does the same from an analysis alone.
"""

from autoparser.definition import ParserDefinition
from autoparser.generate.assembly import build_standard
from autoparser.generate.context import BuildContext
from autoparser.generate.params import ChatParams, build_params, generate
from autoparser.generate.request import Request, ToolSpec, normalize_request
from autoparser.peg import GrammarTrigger

__all__ = [
    "BuildContext",
    "ChatParams",
    "GrammarTrigger",
    "ParserDefinition",
    "Request",
    "ToolSpec",
    "build_params",
    "build_standard",
    "generate",
    "normalize_request",
]
