"""Analysis + request -> ChatParams: prompt, PEG parser, GBNF grammar, triggers.

``ChatTemplate.apply`` validates the request, renders the prompt and calls
``params_for_request``; ``build_params(analysis, prompt=...)`` does the same from an
analysis and raw request options.
"""

from autoparser.definition import ParserDefinition
from autoparser.generate.assembly import build_standard
from autoparser.generate.context import BuildContext
from autoparser.generate.params import ChatParams, build_params, params_for_request
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
    "normalize_request",
    "params_for_request",
]
