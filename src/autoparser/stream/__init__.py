"""Streaming: parse trees of a growing output -> OpenAI messages and appending deltas.

``repair`` holds the pure JSON / Python-literal text helpers (it repairs no call: a call
that is not one is content), ``arguments`` one streamer per argument encoding, ``mapper``
the walk from parse tree to deltas, ``parser`` the ``StreamParser`` that drives them. See
docs/streaming.md.
"""

from autoparser.stream.delta import StreamDelta, ToolCallDelta
from autoparser.stream.mapper import TOOL_CALL_DELTAS, CallIdPolicy, CallIds
from autoparser.stream.parser import StreamParser, parse_text
from autoparser.stream.repair import json_closer

__all__ = [
    "TOOL_CALL_DELTAS",
    "CallIdPolicy",
    "CallIds",
    "StreamDelta",
    "StreamParser",
    "ToolCallDelta",
    "json_closer",
    "parse_text",
]
