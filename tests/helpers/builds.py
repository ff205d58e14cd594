"""Which tools' call parsers a request builds: a hook on the one builder of a call."""

from __future__ import annotations

from typing import Any

import pytest

from autoparser.generate import sections


def counted_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tools whose call parsers get built from now on, in order (the
    group call that reads any tool's name is ``""``; a family's representative's is a
    placeholder)."""
    names: list[str] = []
    real = sections.single_call

    def counting(ctx: Any, tool: Any, strict: bool) -> Any:
        names.append(tool.name)
        return real(ctx, tool, strict)

    monkeypatch.setattr(sections, "single_call", counting)
    return names
