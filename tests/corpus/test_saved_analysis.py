"""Every corpus template's analysis, saved and read back in a fresh process' state, is the
analysis computed (verification included), and is what ``analyze()`` then answers; so are
the probed caps and quirks saved with it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from helpers.paths import corpus_params

from autoparser import CACHES, ChatTemplate
from autoparser.analysis.analyzer import clear_cache
from autoparser.errors import TemplateError

NOW = dt.datetime(2030, 1, 2, 12, 0, 0)  # pinned: dated templates analyse the same each run


@pytest.mark.parametrize("path", corpus_params())
def test_a_saved_analysis_reads_back_as_computed(path: Path, tmp_path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    try:
        first = ChatTemplate(source, now=NOW)
        computed = first.analyze()
        probed = (first.caps, first.quirks)
    except TemplateError as exc:
        pytest.skip(f"the template does not analyse, nothing to save: {exc}")
    saved = ChatTemplate(source, now=NOW).save_analysis(tmp_path / "analysis.json")
    CACHES.clear()
    clear_cache()
    template = ChatTemplate(source, now=NOW)
    assert template.load_analysis(saved)
    assert template.analyze() == computed
    assert template.analyze().to_dict() == computed.to_dict()
    assert (template.caps, template.quirks) == probed
