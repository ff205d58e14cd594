"""What a tool-call format produces: the parsers, grammar facts and value converters.

Generated formats (``autoparser.generate``) and hand-written ones (``autoparser.formats``)
both return a ``ParserDefinition``; the grammar emitter and the stream parser consume it.
It lives below both so that neither has to import the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from autoparser.peg import GrammarTrigger, Parser

ValueConverter = Callable[[str], str | None]


@dataclasses.dataclass(frozen=True)
class ParserDefinition:
    """The parsers a format produces: lenient for parsing, strict for the grammar.

    ``expects_call_ids`` makes the stream wait for the model's call id before announcing a
    call; ``trigger_markers`` are lazy-grammar trigger words used when the grammar itself
    yields none. A hand-written format may also declare ``grammar_triggers`` (used instead
    of those the lazy grammar derives, when the format knows better where a call starts),
    ``preserved_tokens`` / ``additional_stops`` (added to the analysis' own), and
    ``value_converters``: for a value tag of its own whose text is neither JSON nor a
    Python literal, the function turning that text into JSON text (the stream delivers
    such a value whole once complete). ``call_openers``: the markers that open a call or
    a section of calls (default: ``trigger_markers``); output that ends with nothing but
    such markers after its last complete part stopped on an opener, which is dropped.
    ``not_stops``: markers the analysis took for an end of turn that the format knows
    close only a part of the turn (harmony's ``<|end|>`` closes a channel): never sent as
    stop strings, or an engine would cut the answer that follows off.
    ``required_arguments``: each tool's required argument names, where the format reads
    arguments one by one (tagged, pythonic): a call read without one is kept with a
    ``missing_required`` finding (JSON objects are not checked: that would cost every
    call a decode on the hot path).
    """

    parser: Parser
    grammar_parser: Parser | None = None
    grammar_lazy: bool = False
    expects_call_ids: bool = False
    trigger_markers: tuple[str, ...] = ()
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    value_converters: Mapping[str, ValueConverter] = dataclasses.field(default_factory=dict)
    call_openers: tuple[str, ...] = ()
    not_stops: tuple[str, ...] = ()
    required_arguments: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
