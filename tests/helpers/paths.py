"""Where the template corpus, the reference outputs and the project's own templates live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent.parent
REPO_ROOT = TESTS_DIR.parent
# The project's own templates, by purpose: formats/ (tool-call formats the analysis finds),
# reasoning/ (reasoning markers and switches), handlers/ (the hand-written formats),
# markup/ (markup-element arguments), quirks/ (what the polyfills adapt). Stems are unique.
OWN_TEMPLATES = TESTS_DIR / "templates"
# The own templates whose analysis is pinned in tests/data/analysis/own/<folder>/<name>.json.
ANALYSED_FOLDERS = ("formats", "reasoning")
# Own templates in those folders with no pinned analysis, and why.
UNPINNED = {
    "pythonic_like": "Python-literal calls are read through the LFM2 workaround only; the "
    "template serves the model-output tests",
}


def own_templates() -> list[Path]:
    """Every own template, from every purpose folder."""
    return sorted(OWN_TEMPLATES.rglob("*.jinja"))


def analysed_own_templates() -> list[Path]:
    """The own templates whose analysis is pinned (see ANALYSED_FOLDERS)."""
    return [
        p for p in own_templates() if p.parent.name in ANALYSED_FOLDERS and p.stem not in UNPINNED
    ]


def own_path(name: str) -> Path:
    """An own template by its name (``"chatml_hermes"``) or its path under tests/templates."""
    if "/" in name or name.endswith(".jinja"):
        return OWN_TEMPLATES / name
    found = [p for p in own_templates() if p.stem == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} own templates named {name!r}")
    return found[0]


def _shared_dir(variable: str, folder: str, pattern: str) -> Path | None:
    """$variable, else ../shared/<folder>: the first that holds a file matching pattern."""
    env = os.environ.get(variable)
    candidates = [Path(env)] if env else []
    candidates.append(TESTS_DIR.parent.parent / "shared" / folder)
    return next((p for p in candidates if p.is_dir() and any(p.glob(pattern))), None)


def corpus_dir() -> Path | None:
    """The real-template corpus: $AUTOPARSER_TEMPLATES or ../shared/templates, if present."""
    return _shared_dir("AUTOPARSER_TEMPLATES", "templates", "*.jinja")


def bench_dir() -> Path | None:
    """The reference model outputs: $AUTOPARSER_BENCH or ../shared/bench, if present."""
    return _shared_dir("AUTOPARSER_BENCH", "bench", "*.meta.json")


def corpus_templates() -> list[Path]:
    root = corpus_dir()
    return sorted(root.glob("*.jinja")) if root else []


CORPUS_SKIP_REASON = (
    "template corpus not found: set AUTOPARSER_TEMPLATES or place it at ../shared/templates"
)


def corpus_params() -> list[object]:
    """Parametrize values over the corpus; one skipped param with a reason when absent."""
    paths = corpus_templates()
    if not paths:
        return [
            pytest.param(None, marks=pytest.mark.skip(reason=CORPUS_SKIP_REASON), id="no-corpus")
        ]
    return [pytest.param(p, id=p.stem) for p in paths]
