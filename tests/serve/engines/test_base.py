"""What every dialect shares: the engine error (what a client is told, its status, whether
the engine refused a capability), the answer readers' helpers, and the protection of an
engine that has none."""

from __future__ import annotations

import asyncio

import pytest

from autoparser.serve.engines.base import (
    PROMPT_FORMS,
    BackendError,
    Dialect,
    Finished,
    Generation,
    Unprotected,
    as_int,
    described,
    read_json,
    token_ids,
)
from autoparser.serve.openai_format import Usage


def test_the_error_says_little_to_clients_and_its_status() -> None:
    error = BackendError("the engine is unreachable", "http://h:1/x: refused", "unreachable")
    assert str(error) == "the engine is unreachable" and error.detail.endswith("refused")
    assert error.status == 502 and not error.refused
    assert BackendError("slow", kind="timeout").status == 504
    assert BackendError("no", kind="http", http_status=404).refused
    assert not BackendError("fire", kind="http", http_status=500).refused
    assert BackendError("not its shape").refused  # "invalid": an answer of another shape


def test_described_never_shows_a_repr() -> None:
    assert described(ValueError("bad")) == "ValueError: bad"
    assert described(TimeoutError()) == "TimeoutError"


def test_readers_helpers() -> None:
    assert read_json('{"a": 1}', "w") == {"a": 1}
    with pytest.raises(BackendError, match="not JSON"):
        read_json("<html>", "w")
    assert (as_int(3), as_int(True), as_int("3"), as_int(None)) == (3, 0, 0, 0)
    assert token_ids({"tokens": [1, 2]}, "w") == [1, 2]
    for bad in ({"tokens": [1, True]}, {"tokens": "12"}, [1, 2], {}):
        with pytest.raises(BackendError, match="no token list"):
            token_ids(bad, "w")


def test_finished_reason() -> None:
    assert Finished(True, Usage()).reason == "length"
    assert Finished(False, Usage()).reason == "stop"


def test_an_engine_without_protection_sends_the_text() -> None:
    """Checked when there is no caller text, unchecked when there is (or it was not asked)."""
    prepare = Unprotected().prepare
    spans = asyncio.run(prepare(Generation("p <|x|>", caller_spans=((2, 7),))))
    assert (spans.prompt, spans.form) == ("p <|x|>", "unchecked")
    assert asyncio.run(prepare(Generation("p", caller_spans=()))).form == "text"
    assert asyncio.run(prepare(Generation("p"))).form == "unchecked"
    assert {"text", "unchecked"} <= set(PROMPT_FORMS)


def test_a_dialect_must_say_how_it_speaks() -> None:
    class Half(Dialect):
        kind = "half"

    async def detect() -> object:
        return await Half.detect(None)  # type: ignore[arg-type]

    with pytest.raises(NotImplementedError):
        asyncio.run(detect())
    with pytest.raises(NotImplementedError):
        Half(None).payload(Generation("p"), "p", stream=False)  # type: ignore[arg-type]
