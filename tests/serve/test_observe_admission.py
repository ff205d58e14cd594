"""Admission: ``--max-concurrent`` turns, a bounded queue in arrival order, 503 only past it.

A front end may not refuse what its engine would serve: llama.cpp queues what its slots
cannot run at once, and so does serve, up to ``--max-queued`` requests for at most
``--queue-timeout`` seconds each. No duration is asserted: the waits are set so that the
outcome (served in order, refused past the queue or the wait) is what is checked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

import aiohttp
from helpers.generate_cases import CASE_BY_NAME
from helpers.serve_standin import LoopThread, StandIn

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig, follow_slots
from autoparser.serve.limits import Limits
from autoparser.serve.observe import Admission, Metrics

HI = [{"role": "user", "content": "[[k]]"}]


# ------------------------------------------------------------------ the queue itself


def test_turns_are_given_in_arrival_order_and_handed_over() -> None:
    async def run() -> list[str]:
        admission = Admission(1, queued=3, wait=60)
        order: list[str] = []

        async def request(name: str, hold: asyncio.Event) -> None:
            assert await admission.enter() is None
            order.append(name)
            await hold.wait()
            admission.leave()

        holds = {n: asyncio.Event() for n in "abcd"}
        tasks = []
        for name in "abcd":
            tasks.append(asyncio.ensure_future(request(name, holds[name])))
            await asyncio.sleep(0)  # each arrives after the one before
        assert admission.active == 1 and admission.waiting == 3 and admission.full
        for name in "abcd":
            holds[name].set()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        assert admission.active == 0 and admission.waiting == 0
        return order

    assert asyncio.run(run()) == ["a", "b", "c", "d"]


def test_past_the_queue_or_the_wait_a_request_is_refused_with_the_reason() -> None:
    async def run() -> tuple[str | None, str | None]:
        admission = Admission(1, queued=1, wait=0.05)
        assert await admission.enter() is None  # the one turn, never handed back here
        waiter = asyncio.ensure_future(admission.enter())
        await asyncio.sleep(0)
        full = await admission.enter()  # the queue holds one already
        timed_out = await waiter
        return full, timed_out

    full, timed_out = asyncio.run(run())
    assert full == "at its concurrency limit and its queue is full"
    assert timed_out is not None and "waited 0.05 s for a turn" in timed_out


def test_without_a_queue_the_limit_refuses_at_once() -> None:
    async def run() -> str | None:
        admission = Admission(1, queued=0)
        await admission.enter()
        return await admission.enter()

    assert asyncio.run(run()) == "at its concurrency limit"


def test_draining_tells_every_waiting_request_and_refuses_new_ones() -> None:
    async def run() -> list[str | None]:
        admission = Admission(1, queued=5, wait=60)
        await admission.enter()
        waiting = [asyncio.ensure_future(admission.enter()) for _ in range(3)]
        await asyncio.sleep(0)
        admission.drain()
        return [*await asyncio.gather(*waiting), await admission.enter()]

    assert asyncio.run(run()) == ["shutting down"] * 4


def test_a_client_that_leaves_while_waiting_gives_its_place_up() -> None:
    async def run() -> tuple[int, int]:
        admission = Admission(1, queued=5, wait=60)
        await admission.enter()
        gone = asyncio.ensure_future(admission.enter())
        stays = asyncio.ensure_future(admission.enter())
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        admission.leave()  # the turn goes to the one still waiting
        assert await stays is None
        return admission.active, admission.waiting

    assert asyncio.run(run()) == (1, 0)


def test_a_raised_limit_gives_its_new_turns_to_the_requests_waiting() -> None:
    async def run() -> tuple[tuple[int, int], list[bool], tuple[int, int]]:
        admission = Admission(1, queued=4, wait=60)
        await admission.enter()
        waiting = [asyncio.ensure_future(admission.enter()) for _ in range(3)]
        await asyncio.sleep(0)
        admission.resize(3)  # the engine runs three at once: two more go now, in order
        after = admission.active, admission.waiting
        await asyncio.wait(waiting[:2], timeout=10)
        done = [task.done() for task in waiting]
        admission.leave()
        await asyncio.gather(*waiting)
        return after, done, (admission.active, admission.waiting)

    assert asyncio.run(run()) == ((3, 1), [True, True, False], (3, 0))


def test_a_lowered_limit_takes_effect_as_turns_are_handed_back() -> None:
    async def run() -> tuple[int, bool, int]:
        admission = Admission(3, queued=4, wait=60)
        for _ in range(3):
            await admission.enter()
        admission.resize(1)
        late = asyncio.ensure_future(admission.enter())
        await asyncio.sleep(0)
        admission.leave()
        admission.leave()  # two handed back: still at the limit of one, nobody enters
        await asyncio.sleep(0)
        held_back = not late.done()
        admission.leave()  # now below it: the one waiting enters
        assert await late is None
        return admission.active, held_back, admission.waiting

    assert asyncio.run(run()) == (1, True, 0)


# ------------------------------------------------------------------ through the server


def _served(
    loop: LoopThread, limits: Limits, delay: float, standin: StandIn | None = None, share: int = 0
) -> str:
    standin = standin or StandIn("llama.cpp")
    standin.add("k", "Hello.")
    standin.delay = delay
    backend = loop.serve(standin.app())
    config = ServeConfig(
        backend,
        template=CASE_BY_NAME["hermes"].load(),
        limits=limits,
        share_engine_slots=share,
    )
    return loop.serve(create_app(config))


async def _statuses(url: str, count: int) -> list[tuple[int, Any]]:
    async with aiohttp.ClientSession() as session:

        async def one() -> tuple[int, Any]:
            async with session.post(url + "/v1/chat/completions", json={"messages": HI}) as r:
                return r.status, await r.json()

        return await asyncio.gather(*(one() for _ in range(count)))


def test_a_load_above_the_limit_is_queued_and_served(loop: LoopThread) -> None:
    """Three times the concurrency limit at once: every request is answered (before this
    queue, two of three were refused)."""
    url = _served(loop, Limits(max_concurrent=2, max_queued=16), delay=0.2)
    answers = asyncio.run(_statuses(url, 6))
    assert [status for status, _ in answers] == [200] * 6


def test_past_the_queue_the_server_answers_503_with_retry_after(loop: LoopThread) -> None:
    url = _served(loop, Limits(max_concurrent=1, max_queued=1), delay=1.0)
    answers = asyncio.run(_statuses(url, 4))
    statuses = sorted(status for status, _ in answers)
    assert statuses == [200, 200, 503, 503]
    refused = [body for status, body in answers if status == 503]
    assert all("queue is full" in body["error"]["message"] for body in refused)


async def _ready(url: str) -> None:
    """Wait until the server has found out what its engine is (GET /ready says 200)."""
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            async with session.get(url + "/ready") as r:
                if r.status == 200:
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the server never became ready")


def _metric(url: str, name: str) -> float:
    async def get() -> str:
        async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as r:
            return await r.text()

    line = next(x for x in asyncio.run(get()).splitlines() if x.startswith(name + " "))
    return float(line.split()[1])


@pytest.mark.parametrize(("share", "most"), [(1, 2), (2, 1)])
def test_the_limit_follows_the_engines_slots(loop: LoopThread, share: int, most: int) -> None:
    """llama.cpp reports two slots: six requests at once wait in serve's queue, at most two
    (one per worker of two) at the engine, all answered; the metric says the limit."""
    standin = StandIn("llama.cpp", props={"total_slots": 2})
    url = _served(loop, Limits(max_queued=16), delay=0.2, standin=standin, share=share)
    asyncio.run(_ready(url))  # the engine known: its slots too
    answers = asyncio.run(_statuses(url, 6))
    assert [status for status, _ in answers] == [200] * 6
    assert standin.most_running == most
    assert _metric(url, "autoparser_concurrency_limit") == most


def test_an_operators_limit_is_kept_whatever_the_engine_reports(loop: LoopThread) -> None:
    standin = StandIn("llama.cpp", props={"total_slots": 1})
    url = _served(loop, Limits(max_concurrent=3, max_queued=16), delay=0.3, standin=standin)
    asyncio.run(_ready(url))
    answers = asyncio.run(_statuses(url, 3))
    assert [status for status, _ in answers] == [200] * 3
    assert standin.most_running == 3
    assert _metric(url, "autoparser_concurrency_limit") == 3


def test_following_the_engine_the_queue_waits_as_long_as_the_engines_would() -> None:
    """Requests that would have waited for a slot in the engine's queue (bounded by the
    first-byte timeout) wait in serve's for as long, not only --queue-timeout."""
    admission = Admission(128, queued=16, wait=60)
    follow_slots(admission, Metrics(), 2, 300.0, 5)
    assert (admission.limit, admission.wait) == (3, 300.0)  # five slots over two workers
    follow_slots(admission, Metrics(), 1, 10.0, 1)
    assert (admission.limit, admission.wait) == (1, 300.0)  # never shorter
