"""Server overhead per generated token and throughput with many concurrent streams.

Baseline, measured in the same run: reading the stand-in engine's SSE stream directly.
Then the same generations through ``autoparser serve`` (template apply, parser, OpenAI
chunks). Prints ratios, so the figures compare across machines. ``--smoke``: tiny sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import aiohttp  # noqa: E402
from helpers.generate_cases import CASE_BY_NAME, TOOLS, scenarios  # noqa: E402
from helpers.serve_standin import LoopThread, StandIn  # noqa: E402

from autoparser.serve import create_app  # noqa: E402
from autoparser.serve.app import ServeConfig  # noqa: E402


async def _read_all(url: str, bodies: list[dict[str, object]], concurrency: int) -> int:
    """Stream every body (``concurrency`` at a time); the number of SSE events read."""
    sem = asyncio.Semaphore(concurrency)
    events = 0

    async def one(session: aiohttp.ClientSession, body: dict[str, object]) -> None:
        nonlocal events
        async with sem, session.post(url, json=body) as r:
            assert r.status == 200, await r.text()
            async for line in r.content:
                events += line.startswith(b"data:")

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(one(session, b) for b in bodies))
    return events


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    n_requests, repeat = (8, 2) if args.smoke else (128, 40)
    case = CASE_BY_NAME["hermes"]
    message = scenarios(case)["complex_args"]
    output = "Let me look that up. " * repeat + case.output(message, TOOLS)
    loop = LoopThread()
    try:
        standin = StandIn("llama.cpp")
        standin.max_chunk = 4  # ~ token-sized pieces
        key = standin.add("bench", output)
        backend = loop.serve(standin.app())
        served = loop.serve(create_app(ServeConfig(backend, template=case.load())))
        tokens = len(standin._chunks(output, "bench"))
        messages = [{"role": "user", "content": key}]
        prompt = case.load().apply(messages, tools=TOOLS).prompt
        direct = {"prompt": prompt, "stream": True}
        chat = {"messages": messages, "tools": TOOLS, "stream": True}
        print(f"# {n_requests} streams of {tokens} pieces ({len(output)} chars) each")
        for concurrency in (1, 64):
            t0 = time.perf_counter()
            asyncio.run(_read_all(backend + "/completion", [direct] * n_requests, concurrency))
            base = time.perf_counter() - t0
            t0 = time.perf_counter()
            asyncio.run(
                _read_all(served + "/v1/chat/completions", [chat] * n_requests, concurrency)
            )
            serve = time.perf_counter() - t0
            total = n_requests * tokens
            print(
                f"concurrency {concurrency:>2}: direct {total / base:9.0f} tok/s  "
                f"through serve {total / serve:9.0f} tok/s  "
                f"overhead {(serve - base) / total * 1e6:7.1f} us/token  "
                f"ratio serve/direct time {serve / base:5.2f}"
            )
    finally:
        loop.close()


if __name__ == "__main__":
    main()
