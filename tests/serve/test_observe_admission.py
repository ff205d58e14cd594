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
from autoparser.serve.app import ServeConfig
from autoparser.serve.limits import Limits
from autoparser.serve.observe import Admission

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


# ------------------------------------------------------------------ through the server


def _served(loop: LoopThread, limits: Limits, delay: float) -> str:
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    standin.delay = delay
    backend = loop.serve(standin.app())
    config = ServeConfig(backend, template=CASE_BY_NAME["hermes"].load(), limits=limits)
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
