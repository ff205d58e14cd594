"""The work around the grammar for a request with many distinct tools (issue 22: 1,000 tools
handled in about 0.1 s in all): validation, the serve path, rendering.

Tools: ``tests/helpers/distinct_tools.py``, every schema distinct (names, descriptions,
enums and nesting differ, as real tool sets do); "never seen" takes a fresh seed per run.
CPU time (``time.process_time``), best of a few runs, against baselines measured in the same
run: ``json.dumps`` of the same tools (the least any per-tool work costs) and ``json.loads``
of the request body. Sections:

1. request validation (``normalize_request``: tool fields and jsonschema's metaschema
   check): tools never seen, the same tools again, and jsonschema's ``check_schema`` on each
   schema (what the check cost when it was asked per schema);
2. the serve path outside the grammar, per step: ``read_body`` (size, depth, tool limits),
   the chat field checks, validation, one render of the prompt, and ``apply`` with
   provenance when the grammar is already built (the same tools again: everything a request
   costs but the build);
3. through ``autoparser serve`` (a stand-in engine answering at once): a non-streaming
   request with the tools again, wall time, against the engine asked directly.

``--smoke``: 50 and 200 tools, fewer runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from helpers.distinct_tools import distinct_tools  # noqa: E402
from helpers.generate_cases import CASE_BY_NAME  # noqa: E402
from timing import best_of  # noqa: E402

from autoparser import CACHES, Session  # noqa: E402
from autoparser.generate.request import normalize_request  # noqa: E402
from autoparser.serve.chat_completions import parse_request  # noqa: E402
from autoparser.serve.limits import Limits, read_body  # noqa: E402

CLOCK = time.process_time
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the weather in Paris?"},
]
_seed = iter(range(1000, 10**6))


def _normalize(tools: list[dict[str, Any]]) -> object:
    return normalize_request(
        tools=tools,
        tool_choice="auto",
        parallel_tool_calls=None,
        response_format=None,
        enable_thinking=None,
        reasoning_format="auto",
        template_supports_parallel=True,
    )


def _fresh(n: int) -> list[dict[str, Any]]:
    """``n`` tools no earlier run of this process has seen."""
    return distinct_tools(n, next(_seed))


def _cold(fn: Callable[[list[dict[str, Any]]], object], n: int, repeats: int) -> float:
    """Best CPU seconds of ``fn`` on ``n`` tools never seen, a fresh set per run."""
    best = float("inf")
    for _ in range(repeats):
        tools = _fresh(n)
        start = CLOCK()
        fn(tools)
        best = min(best, CLOCK() - start)
    return best


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def validation(sizes: list[int], repeats: int) -> None:
    from jsonschema.validators import validator_for

    print("## 1. request validation (CPU, same run; ratio to json.dumps of the same tools)")
    CACHES.clear()
    first = _cold(_normalize, max(sizes), 1)  # the node shapes of such tools, met once
    print(f"first request of the process ({max(sizes):,} tools, nothing cached): {_ms(first)}")
    print(
        "| tools | json.dumps | never seen | same tools again | check_schema per schema "
        "| never seen / dumps |"
    )
    print("|---|---|---|---|---|---|")
    for n in sizes:
        tools = _fresh(n)
        dumps = best_of(lambda ts=tools: json.dumps(ts), repeats, CLOCK)
        cold = _cold(_normalize, n, repeats)
        warm = best_of(lambda ts=tools: _normalize(ts), repeats, CLOCK)
        schemas = [t["function"]["parameters"] for t in tools]
        start = CLOCK()
        for schema in schemas:
            validator_for(schema).check_schema(schema)
        per_schema = CLOCK() - start
        print(
            f"| {n:,} | {_ms(dumps)} | {_ms(cold)} | {_ms(warm)} | {_ms(per_schema)} "
            f"| {cold / dumps:.2f} |",
            flush=True,
        )


def serve_steps(n: int, repeats: int) -> None:
    template = CASE_BY_NAME["hermes"].load()
    template.analyze()
    limits = Limits(max_tools=max(n, 512))
    typed = template.caps.requires_typed_content
    tools = _fresh(n)
    raw = json.dumps({"model": "m", "messages": MESSAGES, "tools": tools}).encode()
    body = read_body(raw, limits)
    req = parse_request(body, typed)
    session = Session.for_template(template)
    session.params(req.options, provenance=True)  # the grammar of these tools, built once
    loads = best_of(lambda: json.loads(raw), repeats, CLOCK)

    def cpu(fn: Callable[[], object]) -> float:
        return best_of(fn, repeats, CLOCK)

    rows = [
        ("read_body (JSON, size, depth, tool limits)", cpu(lambda: read_body(raw, limits))),
        ("chat fields (parse_request)", cpu(lambda: parse_request(body, typed))),
        (
            # A session of its own each time: the params cache never answers.
            "session.params, grammar built (3 renders, validation, memo)",
            cpu(lambda: Session.for_template(template).params(req.options, provenance=True)),
        ),
    ]
    parts = [
        (
            "the same request again (the session's params cache)",
            cpu(lambda: session.params(req.options, provenance=True)),
        ),
        ("of which validation (normalize_request), never seen", _cold(_normalize, n, repeats)),
        ("of which one render", cpu(lambda: template.render(req.messages, tools=tools))),
    ]
    total = sum(took for _, took in rows)
    print(f"\n## 2. serve path outside the grammar, {n:,} distinct tools, Hermes (CPU)")
    print(f"json.loads of the {len(raw) / 1e6:.2f} MB body (baseline): {_ms(loads)}")
    print("| step | CPU | / json.loads |")
    print("|---|---|---|")
    for label, took in [*rows, ("all three", total), *parts]:
        print(f"| {label} | {_ms(took)} | {took / loads:.1f} |")


def through_serve(n: int, repeats: int) -> None:
    import aiohttp
    from helpers.serve_standin import LoopThread, StandIn

    from autoparser.serve import create_app
    from autoparser.serve.app import ServeConfig

    case = CASE_BY_NAME["hermes"]
    loop = LoopThread()
    try:
        standin = StandIn("llama.cpp")
        key = standin.add("bench", "Sunny.")
        backend = loop.serve(standin.app())
        config = ServeConfig(backend, template=case.load(), limits=Limits(max_tools=max(n, 512)))
        served = loop.serve(create_app(config))
        messages = [*MESSAGES[:1], {"role": "user", "content": f"Weather? {key}"}]
        tools = _fresh(n)
        chat = json.dumps({"messages": messages, "tools": tools}).encode()
        direct = json.dumps({"prompt": key, "stream": False}).encode()

        async def post(url: str, data: bytes) -> float:
            async with aiohttp.ClientSession() as session:
                start = time.perf_counter()
                headers = {"Content-Type": "application/json"}
                async with session.post(url, data=data, headers=headers) as r:
                    assert r.status == 200, await r.text()
                    await r.read()
                return time.perf_counter() - start

        first = asyncio.run(post(served + "/v1/chat/completions", chat))
        again = min(
            asyncio.run(post(served + "/v1/chat/completions", chat)) for _ in range(repeats)
        )
        engine = min(asyncio.run(post(backend + "/completion", direct)) for _ in range(repeats))
        print(f"\n## 3. through autoparser serve, {n:,} distinct tools, non-streaming (wall)")
        print("| first request (grammar built) | same tools again | engine | again / engine |")
        print("|---|---|---|---|")
        print(f"| {_ms(first)} | {_ms(again)} | {_ms(engine)} | {again / engine:.0f}x |")
    finally:
        loop.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    sizes, repeats = ([50, 200], 2) if args.smoke else ([100, 1000], 5)
    validation(sizes, repeats)
    serve_steps(sizes[-1], repeats)
    through_serve(sizes[-1], repeats)


if __name__ == "__main__":
    main()
