"""Analysis + request -> the generated format's parser definition, grammar and triggers.

The builders ``formats`` and ``params`` build with. ``ChatTemplate.apply`` validates the
request, renders the prompt and calls ``autoparser.params.params_for_request``;
``autoparser.params.build_params(analysis, prompt=...)`` does the same from an analysis and
raw request options.
"""

from autoparser.definition import ParserDefinition
from autoparser.generate.assembly import build_standard
from autoparser.generate.context import BuildContext
from autoparser.generate.request import Request, ToolSpec, normalize_request
from autoparser.peg import GrammarTrigger

__all__ = [
    "BuildContext",
    "GrammarTrigger",
    "ParserDefinition",
    "Request",
    "ToolSpec",
    "build_standard",
    "normalize_request",
]
