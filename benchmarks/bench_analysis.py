"""Benchmark: cold template analysis (jinja2 compile + all variant renders + diffs) per template.

Also the self-check the facade adds (``autoparser.verify``: a handful of renders of the
probe conversations, parsers built and run), timed apart on an already analysed template.

Baseline, measured in the same run: compiling the template and rendering one prompt
(what any use of the template costs). The ratio says how many "compile + render" the
analysis is worth. Cached lookups are compared with a plain dict lookup.

Usage: python benchmarks/bench_analysis.py [--smoke] [--templates DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

from timing import best_of

from autoparser import ChatTemplate
from autoparser.analysis.analyzer import analyze_template, clear_cache, run_analysis
from autoparser.errors import AutoparserError, TemplateError
from autoparser.verify import verify_analysis

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "templates"
OWN = ROOT / "tests" / "templates"
MESSAGES = [{"role": "user", "content": "Hello"}]


def _forget_compiled() -> None:
    """Drop the template layer's compile cache, so "cold" includes the jinja2 compile."""
    from autoparser.template import renderer

    compile_fn = getattr(renderer, "_compile", None)
    if compile_fn is not None and hasattr(compile_fn, "cache_clear"):
        compile_fn.cache_clear()


def _baseline(source: str) -> None:
    _forget_compiled()
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    with contextlib.suppress(TemplateError):
        template.render(MESSAGES)


def _cold(source: str) -> None:
    _forget_compiled()
    run_analysis(ChatTemplate(source, bos_token="<s>", eos_token="</s>"))


def _verify(source: str) -> None:
    """The verification alone: the analysis is cached, the renders and parsers are not."""
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    with contextlib.suppress(AutoparserError):
        verify_analysis(template.renderer, analyze_template(template.renderer))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="one repeat, for CI")
    parser.add_argument("--templates", type=Path, default=None)
    args = parser.parse_args()
    folder = args.templates or (CORPUS if CORPUS.is_dir() else OWN)
    # The own templates sit in purpose folders (formats/, reasoning/, ...): search below.
    paths = sorted(folder.rglob("*.jinja"))
    if not paths:
        print(f"no templates in {folder}", file=sys.stderr)
        return 1
    repeats = 1 if args.smoke else 5

    rows: list[tuple[float, float, str]] = []
    checks: list[float] = []
    skipped: list[str] = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        try:
            base = best_of(functools.partial(_baseline, source), repeats)
            cold = best_of(functools.partial(_cold, source), repeats)
        except AutoparserError:
            skipped.append(path.stem)  # cannot compile or analyse: nothing to time
            continue
        rows.append((cold, base, path.stem))
        checks.append(best_of(functools.partial(_verify, source), repeats))
    rows.sort()
    colds = [r[0] for r in rows]
    bases = [r[1] for r in rows]
    median_cold, median_base = statistics.median(colds), statistics.median(bases)
    worst = rows[-1]

    # Cached lookups: the analysis of an already analysed template.
    clear_cache()
    template = ChatTemplate(paths[0].read_text(encoding="utf-8"))
    template.analyze()
    loops = 2_000 if args.smoke else 50_000
    t0 = time.perf_counter()
    for _ in range(loops):
        template.analyze()
    cached = (time.perf_counter() - t0) / loops
    plain: dict[tuple[str, str, str], int] = {(template.source, "", ""): 1}
    key = (template.source, "", "")
    t0 = time.perf_counter()
    for _ in range(loops):
        plain.get(key)
    dict_lookup = (time.perf_counter() - t0) / loops
    assert template.analyze() is template.analyze()
    assert template.analyze().verification is not None

    print(f"templates: {len(rows)} from {folder} (best of {repeats})")
    if skipped:
        print(f"not timed (template error): {', '.join(skipped)}")
    print(
        f"cold analysis incl. compile: median {median_cold * 1e3:.1f} ms, "
        f"worst {worst[0] * 1e3:.1f} ms ({worst[2]})"
    )
    if checks:
        print(
            f"verification (added per template, cold): median "
            f"{statistics.median(checks) * 1e3:.1f} ms, worst {max(checks) * 1e3:.1f} ms"
        )
    print(
        f"baseline compile + one render: median {median_base * 1e3:.2f} ms; "
        f"analysis / baseline: median {median_cold / median_base:.1f}x"
    )
    print(
        f"cached lookup: {cached * 1e6:.2f} us "
        f"({cached / dict_lookup:.1f}x a plain dict lookup of {dict_lookup * 1e9:.0f} ns)"
    )
    print("slowest: " + ", ".join(f"{n} {c * 1e3:.0f} ms" for c, _, n in rows[-3:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
