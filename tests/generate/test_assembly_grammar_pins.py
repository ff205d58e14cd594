"""Grammars built for many tools are byte-identical to the pinned ones (tests/data/
grammar_pins.json, written by tests/helpers/grammar_pins.py; re-pinned on purpose when a
grammar changes, after tests/corpus/test_engines_grammar.py shows the engines take it, as
when each tagged argument became a rule of its own, and when Python-literal objects and
arrays were left to templates that print them so): every own template and every eighth
corpus template with 24 tools, and the typical formats (Hermes JSON, Qwen3-Coder tagged
arguments, GLM) with 300 tools, for tool_choice auto and required. Writing tools from their
families' templates changes no byte (a grammar is written the same whatever earlier
requests built: tests/generate/test_sections_calls.py)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers.grammar_pins import PINS, cases, digest

from autoparser.errors import AnalysisWarning

PINNED = json.loads(PINS.read_text())
CASES = cases()


def test_every_case_is_pinned() -> None:
    assert {key for key, _, _ in CASES} <= set(PINNED)


@pytest.mark.parametrize(("key", "path", "n"), CASES, ids=[k for k, _, _ in CASES])
def test_grammar_unchanged(key: str, path: Path, n: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        assert digest(path, n) == PINNED[key]


def test_builds_leave_the_collector_as_they_found_it() -> None:
    """Builds leave the cyclic collector as they found it, also when several threads build at
    once: the library never switches it (a process-wide switch is the application's)."""
    import gc
    import threading

    from helpers.many_tools import many_tools
    from helpers.paths import own_path

    from autoparser import ChatTemplate

    template = ChatTemplate.from_file(own_path("chatml_hermes"))
    messages = [{"role": "user", "content": "hi"}]
    assert gc.isenabled()
    template.apply(messages, tools=many_tools(5, "on"))
    assert gc.isenabled()
    threads = [
        threading.Thread(target=template.apply, args=(messages, many_tools(20, f"t{i}")))
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()
    gc.disable()
    try:
        template.apply(messages, tools=many_tools(5, "off"))
        assert not gc.isenabled()
    finally:
        gc.enable()
