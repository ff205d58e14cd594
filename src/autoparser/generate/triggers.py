"""Lazy-grammar triggers as ChatParams reports them (and hand-written formats declare them).

Kinds, as engines apply them: ``word`` (the grammar applies from where the word appears),
``token`` (the same for a special token), ``pattern`` (a regex searched in the output; the
grammar applies from its first capture group, else from the match), ``pattern_full`` (a
regex the whole output so far must match; the grammar applies from its first capture
group, else from the start).
"""

from __future__ import annotations

import dataclasses

TRIGGER_KINDS = ("word", "pattern", "pattern_full", "token")


@dataclasses.dataclass(frozen=True)
class GrammarTrigger:
    """When a lazy grammar switches on: a word, a regex (prefix / full match) or a token."""

    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind not in TRIGGER_KINDS:
            raise ValueError(f"GrammarTrigger.kind must be one of {TRIGGER_KINDS}: {self.kind!r}")

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value}
