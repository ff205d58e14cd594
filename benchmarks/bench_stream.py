"""Streaming benchmark on ../shared/bench, next to llama.cpp's C++ reference figures.

    python benchmarks/bench_stream.py            # every bench template, 5 repetitions
    python benchmarks/bench_stream.py --smoke    # 1 repetition, no prefix re-parse (CI)

For each template of the bench data, with the request of its ``.1x.meta.json`` (messages,
tools, enable_thinking, reasoning_format, parallel_tool_calls):

- build: the analysis of the template (the analysis cache bypassed; the compiled template and
  its probed capabilities stay cached), then ``template.apply`` (prompt render,
  parser, grammar) with the analysis cached; both per request;
- the median full parse of the 1x and 8x outputs;
- the streaming total for 1x and 8x: ``stream()``, ``feed`` of every piece, ``finish()``.
  The pieces follow the reference protocol of the bench README: growing prefixes of 4 bytes
  each, backed off to a UTF-8 code point boundary, the last being the whole text; our
  ``StreamParser`` takes the difference between successive prefixes;
- the cost per token: CPU µs of each ``feed`` of a 4-byte piece, median and p99 over the
  pieces of the 1x and 8x outputs (1x pooled over the repetitions);
- resumed feeds: how many feeds only resume the last parse's one unfinished leaf (a
  literal, run, until or JSON scan: ``IncrementalParse.resume``), so the stream moves the
  end of the last tree (a text field grows, or nothing inside a call) instead of parsing
  and mapping again; and the median µs of those feeds next to that of the feeds that
  parse again, in the same run (their ratio in parentheses);
- our 8x/1x streaming ratio (linear growth: about 8; the issue's bound: at most 10);
- baseline measured in the same run (not with --smoke): the reference protocol itself in
  Python, i.e. a ``parse(prefix, partial=True)`` of every growing prefix of the 1x and 8x
  outputs (what a parser without incremental state must do, and what the reference does),
  and our streaming total as a ratio of it;
- OK / MISMATCH: the parse against the meta's ``rendered_assistant_message`` (content and
  reasoning compared stripped, tool calls by name and JSON-equal arguments).

The reference figures are llama.cpp's parser on the same bytes: measured in the same run
when its ``bench_chat`` is built (``../shared/tools/llamacpp/build.sh``; found at
$LLAMACPP_BENCH_CHAT or $WORK/bin/bench_chat, WORK default /tmp/llcpp), else read from the
table in the bench README (medians of three runs on a 2-core machine). Times here are CPU times of
this process (``time.process_time``), medians of the repetitions, so that other load on a
shared machine inflates them less. Two bench templates are not in ../shared/templates;
for them a corpus template whose render of the request equals the meta's prompt (Llama
3.1 for 3.3, which differs only in the date line; Hermes 2 Pro for Hermes 3) stands in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timing import median_of

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIRS = [os.environ.get("AUTOPARSER_BENCH", ""), str(ROOT.parent / "shared" / "bench")]
TEMPLATE_DIRS = [
    os.environ.get("AUTOPARSER_TEMPLATES", ""),
    str(ROOT.parent / "shared" / "templates"),
]

# Bench templates missing from the corpus -> a corpus template that renders the same prompt.
STAND_INS = {
    "meta-llama-Llama-3.3-70B-Instruct": "meta-llama-Llama-3.1-8B-Instruct",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
}
SMOKE_TEMPLATES = ("Qwen-Qwen3-0.6B", "Qwen3-Coder", "moonshotai-Kimi-K2")


def first_dir(candidates: list[str], pattern: str) -> Path | None:
    for candidate in candidates:
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob(pattern)):
            return Path(candidate)
    return None


def prefix_ends(text: str, step: int = 4) -> list[int]:
    """Character ends of the growing prefixes: every `step` bytes, backed off to a code point.

    A UTF-8 continuation byte (10xxxxxx) cannot start a code point, so the byte offset moves
    back to the last non-continuation byte; the last prefix is the whole text.
    """
    data = text.encode("utf-8")
    ends: list[int] = []
    for end in range(step, len(data), step):
        while end > 0 and (data[end] & 0xC0) == 0x80:
            end -= 1
        ends.append(end)
    ends.append(len(data))
    # byte offsets -> character offsets (decode each prefix length once, cumulatively)
    out: list[int] = []
    chars = 0
    last = 0
    for end in ends:
        if end > last:
            chars += len(data[last:end].decode("utf-8"))
            last = end
        if not out or chars > out[-1]:
            out.append(chars)
    return out


def pieces_of(text: str, ends: list[int]) -> list[str]:
    starts = [0, *ends[:-1]]
    return [text[a:b] for a, b in zip(starts, ends, strict=True)]


def cpu_median(fn: Callable[[], object], repeats: int) -> float:
    return median_of(fn, repeats, time.process_time)


def reference_figures(bench: Path) -> dict[str, tuple[float, float, float, float]]:
    """template -> (parse 1x µs, stream 1x ms, stream 8x ms, 8x/1x), from the README table."""
    row = re.compile(
        r"^\|\s*([\w.\-]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
    )
    out: dict[str, tuple[float, float, float, float]] = {}
    readme = bench / "README.md"
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            m = row.match(line)
            if m:
                out[m.group(1)] = tuple(float(m.group(i)) for i in range(2, 6))  # type: ignore[assignment]
    return out


def llamacpp_binary() -> Path | None:
    """llama.cpp's chat parser bench (``../shared/tools/llamacpp``, built by its build.sh),
    when present: $LLAMACPP_BENCH_CHAT, else $WORK/bin/bench_chat (WORK default /tmp/llcpp)."""
    given = os.environ.get("LLAMACPP_BENCH_CHAT")
    path = (
        Path(given) if given else Path(os.environ.get("WORK", "/tmp/llcpp")) / "bin" / "bench_chat"
    )
    return path if path.is_file() and os.access(path, os.X_OK) else None


def same_run_reference(
    binary: Path, bench: Path, templates: Path, runs: int
) -> dict[str, tuple[float, float, float, float]]:
    """Like reference_figures, measured now by llama.cpp's own parser on the same inputs."""
    cmd = [str(binary), "--bench", str(bench), "--templates", str(templates)]
    cmd += ["--runs", str(runs), "--stream-runs", str(max(1, runs // 7))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1800)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"llama.cpp reference not measured ({type(exc).__name__}); using the README's")
        return {}
    recs = {}
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        recs[rec["input"]] = rec
    out: dict[str, tuple[float, float, float, float]] = {}
    for name in {k.rsplit(".", 1)[0] for k in recs}:
        one, eight = recs.get(f"{name}.1x", {}), recs.get(f"{name}.8x", {})
        if one.get("parse_us") and one.get("stream_ms") and eight.get("stream_ms"):
            s1, s8 = float(one["stream_ms"]), float(eight["stream_ms"])
            out[name] = (float(one["parse_us"]), s1, s8, s8 / s1)
    return out


def _canonical(arguments: Any) -> str:
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def matches(message: Any, expected: dict[str, Any], output: str) -> str:
    """ "OK", or what differs between the parse and the meta's rendered_assistant_message.

    Content and reasoning are compared stripped. The meta's message holds every part of the
    request's assistant turn, but some templates drop a part from the render (reasoning in a
    template without it, content of a tool-call turn): a part whose text is not in the
    output must parse as absent, and is named in the result ("OK, no reasoning rendered").
    """

    def text(value: Any) -> str:
        return (value or "").strip()

    problems = []
    absent = []
    for field, got in (
        ("content", message.content),
        ("reasoning_content", message.reasoning_content),
    ):
        want = text(expected.get(field))
        if want and want not in output:
            absent.append(field.split("_")[0])
            want = ""
        if text(got) != want:
            problems.append(field.split("_")[0])
    want_calls = [
        (c["function"]["name"], _canonical(c["function"]["arguments"]))
        for c in expected.get("tool_calls") or []
    ]
    try:
        got_calls = [(c.name, _canonical(c.arguments)) for c in message.tool_calls]
    except ValueError:
        got_calls = [("<invalid JSON arguments>", "")]
    if got_calls != want_calls:
        problems.append("tool_calls")
    if problems:
        return "MISMATCH(" + ",".join(problems) + ")"
    return "OK" + (f" (no {'/'.join(absent)} rendered)" if absent else "")


def run_stream(params: Any, pieces: list[str]) -> Any:
    stream = params.stream()
    for piece in pieces:
        stream.feed(piece)
    stream.finish()
    return stream.message


@dataclass
class ChunkCosts:
    """CPU µs of one ``feed`` of a 4-byte piece, pooled over the repetitions."""

    median: float
    p99: float
    resumed: int  # feeds that resumed the last parse's one unfinished leaf
    feeds: int
    resumed_median: float  # µs of those feeds
    reparsed_median: float  # µs of the others (the whole partial parse ran again)


def resumed_feeds(params: Any, pieces: list[str]) -> list[bool]:
    """Per piece: does its feed only resume the one unfinished leaf (a literal, run,
    until or JSON scan) of the last parse (``IncrementalParse.resume``), so the stream
    parser moves the end of the last tree instead of parsing and mapping again?"""
    inc = params.parser.incremental()
    out = []
    for piece in pieces:
        moved = inc.resume(piece) >= 0
        if not moved:
            inc.reparse()
        out.append(moved)
    return out


def _median(values: list[int]) -> float:
    return sorted(values)[len(values) // 2] / 1e3 if values else float("nan")


def chunk_costs(params: Any, pieces: list[str], repeats: int) -> ChunkCosts:
    """Median and p99 CPU µs of one ``feed`` of a 4-byte piece, pooled over the
    repetitions; and the medians of the resumed feeds and of the others.

    The fixed cost per token is what a streaming server pays most often: a parser whose
    total is fine can still be slow per token on short outputs.
    """
    clock = time.process_time_ns
    costs: list[int] = []
    resumed = resumed_feeds(params, pieces)
    split: tuple[list[int], list[int]] = ([], [])
    for _ in range(repeats):
        stream = params.stream()
        feed = stream.feed
        for piece, moved in zip(pieces, resumed, strict=True):
            t0 = clock()
            feed(piece)
            cost = clock() - t0
            costs.append(cost)
            split[moved].append(cost)
        stream.finish()
    costs.sort()
    return ChunkCosts(
        median=costs[len(costs) // 2] / 1e3,
        p99=costs[min(len(costs) - 1, (len(costs) * 99) // 100)] / 1e3,
        resumed=sum(resumed),
        feeds=len(pieces),
        resumed_median=_median(split[True]),
        reparsed_median=_median(split[False]),
    )


def reparse_prefixes(params: Any, text: str, ends: list[int]) -> None:
    for end in ends[:-1]:
        params.parse(text[:end], partial=True)
    params.parse(text)


@dataclass
class Row:
    name: str
    note: str
    analysis_ms: float
    build_ms: float
    parse1_us: float
    parse8_us: float
    stream1_ms: float
    stream8_ms: float
    chunk1_us: ChunkCosts
    chunk8_us: ChunkCosts
    reparse1_ms: float | None
    reparse8_ms: float | None
    check1: str
    check8: str
    stream_check: str


def load_template(path: Path, prompt: str) -> Any:
    """The template with the BOS/EOS the meta's prompt was rendered with (none or <s>/</s>)."""
    from autoparser import ChatTemplate

    source = path.read_text(encoding="utf-8")
    if prompt.startswith("<s>"):
        return ChatTemplate(source, bos_token="<s>", eos_token="</s>", name=path.stem)
    return ChatTemplate(source, name=path.stem)


def measure(name: str, bench: Path, templates: Path, repeats: int, baseline: bool) -> Row | str:
    from autoparser.analysis.analyzer import run_analysis

    meta = json.loads((bench / f"{name}.1x.meta.json").read_text(encoding="utf-8"))
    meta8 = json.loads((bench / f"{name}.8x.meta.json").read_text(encoding="utf-8"))
    source_name = STAND_INS.get(name, name) if not (templates / f"{name}.jinja").is_file() else name
    path = templates / f"{source_name}.jinja"
    if not path.is_file():
        return f"template {name}.jinja not found"
    inputs = meta["inputs"]
    template = load_template(path, meta["prompt"])
    request = {
        "tools": inputs.get("tools"),
        "enable_thinking": inputs.get("enable_thinking"),
        "reasoning_format": inputs.get("reasoning_format", "auto"),
        "parallel_tool_calls": inputs.get("parallel_tool_calls"),
    }
    try:
        analysis_s = cpu_median(lambda: run_analysis(template), repeats)
        # Fill the analysis cache and pay one-time costs (lazy imports) before timing, so
        # that "build" is what each request costs: render + parser + grammar.
        template.apply(inputs["messages"], **request)
        build_s = cpu_median(lambda: template.apply(inputs["messages"], **request), repeats)
        params = template.apply(inputs["messages"], **request)
    except Exception as exc:  # report and go on with the other templates
        return f"apply failed: {type(exc).__name__}: {exc}"[:150]
    notes = []
    if source_name != name:
        notes.append(f"stand-in {source_name}")
    if params.prompt != meta["prompt"]:
        notes.append("prompt differs from the meta's")
    text1 = (bench / f"{name}.1x.txt").read_text(encoding="utf-8")
    text8 = (bench / f"{name}.8x.txt").read_text(encoding="utf-8")
    ends1, ends8 = prefix_ends(text1), prefix_ends(text8)
    pieces1, pieces8 = pieces_of(text1, ends1), pieces_of(text8, ends8)
    parse1 = cpu_median(lambda: params.parse(text1), repeats * 5)
    parse8 = cpu_median(lambda: params.parse(text8), repeats * 3)
    stream1 = cpu_median(lambda: run_stream(params, pieces1), repeats)
    stream8 = cpu_median(lambda: run_stream(params, pieces8), repeats)
    chunk1 = chunk_costs(params, pieces1, repeats)
    chunk8 = chunk_costs(params, pieces8, max(1, repeats // 2))
    reparse1 = reparse8 = None
    if baseline:
        reparse1 = cpu_median(lambda: reparse_prefixes(params, text1, ends1), 1)
        reparse8 = cpu_median(lambda: reparse_prefixes(params, text8, ends8), 1)
    streamed = [run_stream(params, pieces1), run_stream(params, pieces8)]
    parsed = [params.parse(text1), params.parse(text8)]
    same = all(
        (s.content, s.reasoning_content, [(c.name, c.arguments) for c in s.tool_calls])
        == (p.content, p.reasoning_content, [(c.name, c.arguments) for c in p.tool_calls])
        for s, p in zip(streamed, parsed, strict=True)
    )
    return Row(
        name=name,
        note="; ".join(notes),
        analysis_ms=analysis_s * 1e3,
        build_ms=build_s * 1e3,
        parse1_us=parse1 * 1e6,
        parse8_us=parse8 * 1e6,
        stream1_ms=stream1 * 1e3,
        stream8_ms=stream8 * 1e3,
        chunk1_us=chunk1,
        chunk8_us=chunk8,
        reparse1_ms=None if reparse1 is None else reparse1 * 1e3,
        reparse8_ms=None if reparse8 is None else reparse8 * 1e3,
        check1=matches(parsed[0], meta["rendered_assistant_message"], text1),
        check8=matches(parsed[1], meta8["rendered_assistant_message"], text8),
        stream_check="OK" if same else "MISMATCH",
    )


def table(rows: list[Row], refs: dict[str, tuple[float, float, float, float]]) -> list[str]:
    """Markdown table: ours next to the reference, per template."""
    lines = [
        "| template | analysis ms | build ms | parse 1x µs (ref) | parse 8x µs "
        "| stream 1x ms (ref) | stream 8x ms (ref) | 8x/1x (ref) "
        "| µs/chunk 1x med / p99 | µs/chunk 8x med / p99 | resumed feeds 1x / 8x "
        "| µs/chunk resumed / re-parsed (8x med) | re-parse 1x / 8x ms "
        "| stream / re-parse 1x / 8x | parse = meta 1x / 8x | stream = parse |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        ref = refs.get(r.name)
        rp = f"{ref[0]:.1f}" if ref else "-"
        rs1 = f"{ref[1]:.1f}" if ref else "-"
        rs8 = f"{ref[2]:.0f}" if ref else "-"
        rr = f"{ref[3]:.0f}" if ref else "-"
        base = reparse = "-"
        if r.reparse1_ms and r.reparse8_ms:
            reparse = f"{r.reparse1_ms:.0f} / {r.reparse8_ms:.0f}"
            base = f"{r.stream1_ms / r.reparse1_ms:.2f} / {r.stream8_ms / r.reparse8_ms:.3f}"
        name = f"{r.name} ({r.note})" if r.note else r.name
        c1, c8 = r.chunk1_us, r.chunk8_us
        lines.append(
            f"| {name} | {r.analysis_ms:.1f} | {r.build_ms:.1f} | {r.parse1_us:.0f} ({rp}) "
            f"| {r.parse8_us:.0f} | {r.stream1_ms:.1f} ({rs1}) | {r.stream8_ms:.1f} ({rs8}) "
            f"| {r.stream8_ms / r.stream1_ms:.1f} ({rr}) "
            f"| {c1.median:.1f} / {c1.p99:.0f} | {c8.median:.1f} / {c8.p99:.0f} "
            f"| {c1.resumed}/{c1.feeds} / {c8.resumed}/{c8.feeds} "
            f"| {c8.resumed_median:.1f} / {c8.reparsed_median:.1f} "
            f"({c8.resumed_median / c8.reparsed_median:.2f}) | {reparse} | {base} "
            f"| {r.check1} / {r.check8} "
            f"| {r.stream_check} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="quick run: 1 repetition, 3 templates")
    ap.add_argument("--all", action="store_true", help="with --smoke: every template")
    ap.add_argument(
        "--readme-reference",
        action="store_true",
        help="take llama.cpp's figures from the bench README even when its bench_chat is built",
    )
    args = ap.parse_args()
    bench = first_dir(BENCH_DIRS, "*.meta.json")
    templates = first_dir(TEMPLATE_DIRS, "*.jinja")
    if bench is None or templates is None:
        print("bench data or template corpus not found (../shared/bench, ../shared/templates;")
        print("or AUTOPARSER_BENCH / AUTOPARSER_TEMPLATES): nothing to measure")
        return 0
    refs = reference_figures(bench)
    source = "the bench README's table"
    binary = None if args.readme_reference else llamacpp_binary()
    if binary is not None:
        measured = same_run_reference(binary, bench, templates, 21 if not args.smoke else 7)
        if measured:
            refs, source = measured, f"llama.cpp measured in this run ({binary})"
    names = sorted(p.name.removesuffix(".1x.meta.json") for p in bench.glob("*.1x.meta.json"))
    if args.smoke and not args.all:
        names = [n for n in names if n in SMOKE_TEMPLATES]
    repeats = 1 if args.smoke else 5
    rows: list[Row] = []
    for name in names:
        result = measure(name, bench, templates, repeats, baseline=not args.smoke)
        if isinstance(result, str):
            print(f"{name}: {result}")
            continue
        rows.append(result)
    print(f"python {sys.version.split()[0]}, {repeats} repetition(s), CPU time medians")
    print(f"(ref): llama.cpp's C++ parser, from {source}")
    for line in table(rows, refs):
        print(line)
    if rows:
        worst = max(r.stream8_ms / r.stream1_ms for r in rows)
        builds = [r.build_ms for r in rows]
        analyses = [r.analysis_ms for r in rows]
        print(
            f"worst 8x/1x streaming ratio: {worst:.1f} (issue: <= 10; reference 18-51); "
            f"build {min(builds):.1f}-{max(builds):.1f} ms per request, "
            f"analysis {min(analyses):.1f}-{max(analyses):.1f} ms per template "
            "(reference: 0.4-6.6 ms and 2.5-15 ms)"
        )
        bad = [r.name for r in rows if "MISMATCH" in (r.check1 + r.check8 + r.stream_check)]
        print(
            "parse vs rendered_assistant_message: "
            + ("all OK" if not bad else f"MISMATCH in {bad}")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
