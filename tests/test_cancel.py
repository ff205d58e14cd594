"""Cooperative cancellation (issue 22 §2): work run under a ``CancelToken`` stops at the
builders' next checkpoint once the token is set; work under no token is never stopped."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
from helpers.many_tools import many_tools
from helpers.paths import own_path

from autoparser import Cancelled, CancelToken, ChatTemplate, WorkLimitError
from autoparser.cancel import checkpoint, current
from autoparser.generate import families
from autoparser.schema import schema_to_gbnf

HI = [{"role": "user", "content": "What is the weather in Paris?"}]
# Tool names never built before in this process: the per-tool and per-request caches must
# not answer for a build these tests need to watch.
_FRESH = itertools.count()


def _new_tools(n: int) -> list[dict[str, Any]]:
    return many_tools(n, f"cancel{next(_FRESH)}")


@pytest.fixture(scope="module")
def hermes() -> ChatTemplate:
    template = ChatTemplate.from_file(own_path("chatml_hermes"))
    template.analyze()
    return template


def test_checkpoint_outside_any_token_does_nothing() -> None:
    assert current() is None
    checkpoint()


def test_a_set_token_raises_at_the_next_checkpoint_and_is_reset_after_its_block() -> None:
    token = CancelToken()
    with token.active():
        assert current() is token
        checkpoint()
        token.cancel("the client left")
        with pytest.raises(Cancelled, match="the client left"):
            checkpoint()
    assert current() is None
    assert token.cancelled and token.checks == 2
    token.cancel("a second reason")
    assert token.reason == "the client left"  # the first reason stays


def test_the_token_is_local_to_its_thread() -> None:
    token = CancelToken()
    token.cancel()
    seen: list[CancelToken | None] = []
    with token.active():
        worker = threading.Thread(target=lambda: seen.append(current()))
        worker.start()
        worker.join()
    assert seen == [None]


def test_schema_conversion_stops_when_cancelled() -> None:
    token = CancelToken()
    token.cancel()
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(Cancelled):
        token.run(lambda: schema_to_gbnf(schema))
    assert schema_to_gbnf(schema).startswith("root ::= ")  # no token: runs


def test_building_for_many_tools_stops_midway(
    hermes: ChatTemplate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token is set while the grammar's call of the fifth tool is made (as a server's
    event loop sets it when the client leaves): no further tool is reached, and apply
    raises."""
    built: list[str] = []
    real = families.call_member

    def counting(ctx: Any, context: Any, tool: Any, build: Any) -> Any:
        built.append(tool.name)
        token = current()
        if len(built) == 5 and token is not None:
            token.cancel("the client left")
        return real(ctx, context, tool, build)

    monkeypatch.setattr(families, "call_member", counting)
    token = CancelToken()
    tools = _new_tools(200)
    with pytest.raises(Cancelled):
        token.run(lambda: hermes.apply(HI, tools=tools))
    assert len(built) == 5
    # The same request under no token is built whole, and no half-built request was kept.
    built.clear()
    params = hermes.apply(HI, tools=tools)
    assert params.grammar is not None and len(built) == 200


def test_a_cancelled_analysis_raises_instead_of_failing_its_checks() -> None:
    """The self-check builds parsers: cancelled, it must stop, not record failed checks."""
    # A text no test analysed before (analyses are cached by text).
    source = own_path("chatml_hermes").read_text() + f"{{# cancel {next(_FRESH)} #}}"
    token = CancelToken()
    token.cancel("the caller gave up")
    with pytest.raises(Cancelled):
        token.run(ChatTemplate(source).analyze)
    analysis = ChatTemplate(source).analyze()  # under no token: the whole of it, verified
    assert analysis.verification is not None and analysis.verification.verified


def test_a_cpu_budget_stops_busy_work_on_its_cpu_time() -> None:
    token = CancelToken(cpu_seconds=0.05)
    with token.active(), pytest.raises(WorkLimitError, match=r"0\.05 s of CPU time") as info:
        for _ in range(10**9):  # bounded, far beyond the budget
            sum(range(1000))
            checkpoint()
    assert info.value.cpu_seconds == 0.05
    assert isinstance(info.value, Cancelled)
    assert token.cancelled  # and the token says why
    assert "CPU time" in token.reason


def test_a_cpu_budget_does_not_count_time_the_work_spends_off_the_cpu() -> None:
    """Wall time far past the budget, CPU time far below it: the work is never stopped (a
    loaded machine delays work the same way, by keeping its thread off the CPU)."""
    token = CancelToken(cpu_seconds=0.5)
    started = time.monotonic()
    with token.active():
        for _ in range(400):
            time.sleep(0.005)  # off the CPU, as behind other processes on a busy machine
            checkpoint()
    assert time.monotonic() - started > 0.5 * 2  # wall time ran well past the budget
    assert token.checks == 400 and not token.cancelled


def test_a_cpu_budget_counts_on_the_thread_that_runs_the_work() -> None:
    token = CancelToken(cpu_seconds=0.05)
    errors: list[BaseException] = []

    def busy() -> None:
        for _ in range(10**9):  # bounded, far beyond the budget
            sum(range(1000))
            checkpoint()

    def work() -> None:
        try:
            token.run(busy)
        except WorkLimitError as exc:
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(120)
    assert len(errors) == 1


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_cpu_budget_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="cpu_seconds"):
        CancelToken(cpu_seconds=bad)
