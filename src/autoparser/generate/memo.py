"""The key of what a request builds from the analysis alone: parser definition and grammar.

A server applies one template with the same tools on every request; only the messages,
and so the prompt, change. The parser definition, the grammar and its triggers depend
only on the analysis, the validated request and two facts read off the prompt (does it
open reasoning, does it open a call), so they are built once per distinct key and then
shared: parsers are immutable, and every stream keeps its own state and call ids. The
stores live in ``autoparser.cache`` (``request_contexts``, ``request_builds``).
"""

from __future__ import annotations

import dataclasses
import json

from autoparser.generate.request import Request, ToolSpec


def request_key(request: Request) -> str | None:
    """The request as canonical JSON text, or None when it holds values JSON cannot spell
    (then nothing is memoised: a key must not equate two different requests).

    Every field of the request is in the key, read from the dataclass itself, so a field
    added to ``Request`` later can never be left out of it.
    """
    # Tools as their fields, shallow (``dataclasses.asdict`` would deep-copy every schema
    # first, the slowest part of a repeated request with a thousand tools): JSON text is the
    # same either way.
    tool_fields = [f.name for f in dataclasses.fields(ToolSpec)]
    fields = {
        f.name: [{k: getattr(t, k) for k in tool_fields} for t in request.tools]
        if f.name == "tools"
        else getattr(request, f.name)
        for f in dataclasses.fields(request)
    }
    try:
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
