"""Where the template corpus, the reference outputs and the project's own templates live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent.parent
OWN_TEMPLATES = TESTS_DIR / "templates"


def corpus_dir() -> Path | None:
    """The real-template corpus: $AUTOPARSER_TEMPLATES or ../shared/templates, if present."""
    env = os.environ.get("AUTOPARSER_TEMPLATES")
    candidates = [Path(env)] if env else []
    candidates.append(TESTS_DIR.parent.parent / "shared" / "templates")
    for path in candidates:
        if path.is_dir() and any(path.glob("*.jinja")):
            return path
    return None


def bench_dir() -> Path | None:
    """The reference model outputs: $AUTOPARSER_BENCH or ../shared/bench, if present."""
    env = os.environ.get("AUTOPARSER_BENCH")
    candidates = [Path(env)] if env else []
    candidates.append(TESTS_DIR.parent.parent / "shared" / "bench")
    for path in candidates:
        if path.is_dir() and any(path.glob("*.meta.json")):
            return path
    return None


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
