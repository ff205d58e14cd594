"""Benchmark: cold template analysis per template, everything a new template costs.

Cold = a new ``ChatTemplate`` from the source with every cache emptied (compiled templates,
probed capabilities, analyses, verifications), then ``template.analyze()``: the jinja2
compile, the capability probe, the analysis' variant renders and diffs, and the
self-verification (renders of the probe conversations, parsers built and run). The four
phases are timed apart (medians over the templates, of each template's fastest run).
With the saved analysis = what a later process pays when the analysis was saved
(``ChatTemplate.save_analysis``): a new ``ChatTemplate`` (its compile included), the file
read back, ``analyze()`` and the caps (saved with it). With the kept code too = the same
with ``ChatTemplate(..., analysis_cache=DIR)``, which also keeps the compiled code there
(``template/compiled.py``): what serve and the CLI pay for a template seen before.

Baseline, measured in the same run: compiling the template and rendering one prompt
(what any use of the template costs). The ratio says how many "compile + render" the
analysis is worth. Cached lookups are compared with a plain dict lookup. Times are CPU
time (``time.process_time``): the machine is shared, and other processes' load inflates
wall time.

Usage: python benchmarks/bench_analysis.py [--smoke] [--templates DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import inspect
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from timing import best_of

from autoparser import ChatTemplate
from autoparser.analysis.analyzer import analyze_template, clear_cache
from autoparser.errors import AutoparserError, TemplateError
from autoparser.template import Renderer, detect_caps

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "templates"
OWN = ROOT / "tests" / "templates"
MESSAGES = [{"role": "user", "content": "Hello"}]
CLOCK = time.process_time
PHASES = ("compile", "caps probe", "analysis", "verification")

# Every cache a template's analysis fills, as (module, attribute): emptied before each cold
# run. The compile cache has moved once; the older place is kept so that the same script
# times an older checkout (``PYTHONPATH=<old>/src``) for before/after comparisons.
_COMPILE_CACHES = (
    ("autoparser.template.compiled", "compile_source"),
    ("autoparser.template.renderer", "_compile"),
)
_CACHES = (
    ("autoparser.template.probe", "_shared"),
    ("autoparser.template.caps", "_probe_shared"),
    ("autoparser.verify", "_CACHE"),
)


def _cache(module: str, name: str) -> object | None:
    try:
        return getattr(importlib.import_module(module), name, None)
    except ModuleNotFoundError:
        return None


def _clearers() -> list[Callable[[], None]]:
    """How to empty each cache; a cache not found is an error (a run would not be cold).

    Since autoparser.cache owns every store, ``CACHES.clear`` empties them all; the list
    below is for older checkouts."""
    owner = _cache("autoparser.cache", "CACHES")
    if owner is not None:
        return [clear_cache, owner.clear]  # type: ignore[attr-defined]
    compile_cache = next(
        (c for c in (_cache(*where) for where in _COMPILE_CACHES) if c is not None), None
    )
    found = [compile_cache, *(_cache(*where) for where in _CACHES)]
    names = [_COMPILE_CACHES[0], *_CACHES]
    clearers: list[Callable[[], None]] = [clear_cache]
    for cache, (module, name) in zip(found, names, strict=True):
        clear = getattr(cache, "cache_clear", None) or getattr(cache, "clear", None)
        if clear is None:
            raise SystemExit(f"cache {module}.{name} not found: the runs would not be cold")
        clearers.append(clear)
    return clearers


def _forget(clearers: list[Callable[[], None]]) -> None:
    for clear in clearers:
        clear()


def _baseline(clearers: list[Callable[[], None]], source: str) -> None:
    _forget(clearers)
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    with contextlib.suppress(TemplateError):
        template.render(MESSAGES)


def _cold_phases(clearers: list[Callable[[], None]], source: str) -> tuple[float, ...]:
    """One cold run, the seconds of each phase (what ``template.analyze()`` does, in order)."""
    _forget(clearers)
    times = [CLOCK()]
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    times.append(CLOCK())
    detect_caps(template.renderer)
    times.append(CLOCK())
    analyze_template(template.renderer)
    times.append(CLOCK())
    template.analyze()  # the cached analysis, verified
    times.append(CLOCK())
    return tuple(b - a for a, b in itertools.pairwise(times))


def _saved(clearers: list[Callable[[], None]], source: str, path: Path) -> None:
    """A new process with the analysis saved: compile, read the file, ``analyze()``."""
    _forget(clearers)
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    if not template.load_analysis(path):
        raise SystemExit(f"the saved analysis {path} was not used")
    template.analyze()
    _ = template.caps, template.quirks  # what serve reads at startup: saved too


def _kept(clearers: list[Callable[[], None]], source: str, directory: Path) -> None:
    """A new process with the analysis and the compiled code kept in ``directory``."""
    _forget(clearers)
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>", analysis_cache=directory)
    template.analyze()
    _ = template.caps, template.quirks


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f} ms"


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

    clearers = _clearers()
    saving = hasattr(ChatTemplate, "save_analysis")  # not in older checkouts
    scratch = Path(tempfile.mkdtemp(prefix="bench-analysis-"))
    saved_rows: list[tuple[float, str]] = []
    kept_rows: list[tuple[float, str]] = []
    keeping = "code_cache" in inspect.signature(Renderer).parameters  # not in older checkouts
    rows: list[tuple[float, float, str]] = []
    splits: list[tuple[float, ...]] = []
    skipped: list[str] = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        try:
            base = best_of(functools.partial(_baseline, clearers, source), repeats, CLOCK)
            runs = [_cold_phases(clearers, source) for _ in range(repeats)]
        except AutoparserError:
            skipped.append(path.stem)  # cannot compile or analyse: nothing to time
            continue
        fastest = min(runs, key=sum)
        rows.append((sum(fastest), base, path.stem))
        if saving:
            template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
            file = template.save_analysis(scratch / f"{path.stem}.json")
            load = functools.partial(_saved, clearers, source, file)
            saved_rows.append((best_of(load, repeats, CLOCK), path.stem))
        if keeping:
            kept_in = scratch / "kept"
            warm = ChatTemplate(source, bos_token="<s>", eos_token="</s>", analysis_cache=kept_in)
            warm.analyze()  # saves the analysis and keeps the code
            kept = functools.partial(_kept, clearers, source, kept_in)
            kept_rows.append((best_of(kept, repeats, CLOCK), path.stem))
        splits.append(fastest)
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

    print(f"templates: {len(rows)} from {folder} (best of {repeats}, CPU time)")
    if skipped:
        print(f"not timed (template error): {', '.join(skipped)}")
    print(
        "cold analysis (compile, caps, analysis, verification): "
        f"median {median_cold * 1e3:.1f} ms, "
        f"worst {worst[0] * 1e3:.1f} ms ({worst[2]})"
    )
    print(
        "phases, median (worst): "
        + ", ".join(
            f"{phase} {_median_ms([s[i] for s in splits])} ({max(s[i] for s in splits) * 1e3:.0f})"
            for i, phase in enumerate(PHASES)
        )
    )
    print(
        f"baseline compile + one render: median {median_base * 1e3:.2f} ms; "
        f"analysis / baseline: median {median_cold / median_base:.1f}x"
    )
    print(
        f"cached lookup: {cached * 1e6:.2f} us "
        f"({cached / dict_lookup:.1f}x a plain dict lookup of {dict_lookup * 1e9:.0f} ns)"
    )
    if saved_rows:
        saved_rows.sort()
        median_saved = statistics.median(r[0] for r in saved_rows)
        print(
            "with the saved analysis (compile, read the file, analyze(), caps): "
            f"median {median_saved * 1e3:.1f} ms, worst {saved_rows[-1][0] * 1e3:.1f} ms "
            f"({saved_rows[-1][1]}); / baseline: median {median_saved / median_base:.2f}x; "
            f"/ cold: median {median_saved / median_cold:.2f}x"
        )
    if kept_rows:
        kept_rows.sort()
        median_kept = statistics.median(r[0] for r in kept_rows)
        print(
            "with the saved analysis and the kept code (read both, analyze(), caps): "
            f"median {median_kept * 1e3:.2f} ms, worst {kept_rows[-1][0] * 1e3:.1f} ms "
            f"({kept_rows[-1][1]}); / baseline: median {median_kept / median_base:.2f}x; "
            f"/ cold: median {median_kept / median_cold:.3f}x"
        )
    shutil.rmtree(scratch, ignore_errors=True)
    print("slowest: " + ", ".join(f"{n} {c * 1e3:.0f} ms" for c, _, n in rows[-3:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
