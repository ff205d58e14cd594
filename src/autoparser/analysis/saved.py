"""Saved analyses: a template's analysis written to a small JSON file and read back.

A cold analysis costs tens of milliseconds (jinja2's compile and about 60 probe renders);
a server or a CLI that loads the same template again should not pay it twice. The file
holds the analysis (``TemplateAnalysis.to_dict``, its verification included) under a key
that says what it was computed from: a hash of the template text and the tokens it is
rendered with, the library's and jinja2's versions, the file format's number and, for a
template that reads the date (``strftime_now``, ``date_string``...), the render date (its
generation prompt may print it, see tests/test_cache_clock.py). A file whose key differs,
or that does not read as such a file, is ignored with a log line: never trusted blindly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2

from autoparser.analysis.model import TemplateAnalysis
from autoparser.template import Renderer, TemplateCaps, TemplateQuirks
from autoparser.template.caps import detect_caps, detect_quirks
from autoparser.template.conventions import DATE_NAMES
from autoparser.template.switches import ThinkingSwitch

log = logging.getLogger(__name__)

# Bumped when the file's shape or what an analysis means changes without a release.
FORMAT = 2
LIBRARY_VERSION = "0.1.0"  # autoparser.__version__ (tests/analysis/test_saved.py checks)
ENV_VARIABLE = "AUTOPARSER_ANALYSIS_CACHE"  # a directory, or "off"
_OFF = frozenset({"", "0", "off", "no", "false", "none"})
_DATED = re.compile(r"\b(?:strftime_now|" + "|".join(map(re.escape, DATE_NAMES)) + r")\b")


@dataclasses.dataclass(frozen=True)
class AnalysisKey:
    """What an analysis was computed from; a saved one is used only under an equal key."""

    template_hash: str
    library: str
    jinja2: str
    format: int
    date: str  # the render date (ISO), "" when the template never reads the date


@dataclasses.dataclass(frozen=True)
class SavedAnalysis:
    """What a saved file gives back: the verified analysis and the probed capabilities
    (the caps probe is most of what ``apply`` would still pay in a new process)."""

    analysis: TemplateAnalysis
    caps: TemplateCaps
    quirks: TemplateQuirks


def template_hash(renderer: Renderer) -> str:
    """SHA-256 of the template text and the tokens it is rendered with."""
    material = [renderer.source, renderer.bos_token, renderer.eos_token]
    material.append(sorted(renderer.special_tokens.items()))  # type: ignore[arg-type]
    return hashlib.sha256(json.dumps(material).encode("utf-8")).hexdigest()


def render_date(renderer: Renderer) -> str:
    """The date the analysis' renders read, or "" when the text names no date variable
    (a conservative text test: a name in a comment only costs a dated key)."""
    if not _DATED.search(renderer.source):
        return ""
    now = renderer.now or (renderer.clock or datetime.now)()
    return now.date().isoformat()


def analysis_key(renderer: Renderer) -> AnalysisKey:
    """The key an analysis of ``renderer`` is saved and looked up under, today."""
    return AnalysisKey(
        template_hash(renderer), LIBRARY_VERSION, jinja2.__version__, FORMAT, render_date(renderer)
    )


def cache_path(directory: str | Path, renderer: Renderer) -> Path:
    """Where the analysis of ``renderer`` is kept in a cache directory (one file per
    template; a new date or version overwrites it)."""
    return Path(directory) / f"{template_hash(renderer)[:32]}.json"


def default_analysis_cache() -> Path | None:
    """The analysis cache directory: ``$AUTOPARSER_ANALYSIS_CACHE`` ("off" for none), else
    ``$XDG_CACHE_HOME/autoparser/analysis`` (``~/.cache`` when unset)."""
    chosen = os.environ.get(ENV_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in _OFF else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autoparser" / "analysis"


def save_analysis(path: str | Path, renderer: Renderer, analysis: TemplateAnalysis) -> Path:
    """Write ``analysis`` of ``renderer`` to ``path`` (atomically: a reader never sees half
    a file); the directory is made when missing. Returns the path."""
    target = Path(path)
    data = {
        "key": dataclasses.asdict(analysis_key(renderer)),
        "analysis": analysis.to_dict(),
        "caps": dataclasses.asdict(detect_caps(renderer)),
        "quirks": dataclasses.asdict(detect_quirks(renderer)),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".analysis-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def load_analysis(path: str | Path, renderer: Renderer) -> SavedAnalysis | None:
    """What was saved at ``path`` for ``renderer``, or None: no file, or one that is
    unreadable, corrupt or of another key (template, versions, format, date), logged."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("saved analysis %s ignored: unreadable (%s)", source.name, type(exc).__name__)
        return None
    try:
        data = json.loads(text)
        saved = AnalysisKey(**data["key"])
        loaded = SavedAnalysis(
            TemplateAnalysis.from_dict(data["analysis"]),
            _caps_from_dict(data["caps"]),
            TemplateQuirks(**data["quirks"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("saved analysis %s ignored: corrupt (%s)", source.name, type(exc).__name__)
        return None
    expected = analysis_key(renderer)
    if saved != expected:
        stale = [f.name for f in dataclasses.fields(AnalysisKey) if _differs(saved, expected, f)]
        log.info("saved analysis %s ignored: stale (%s differs)", source.name, ", ".join(stale))
        return None
    return loaded


def _caps_from_dict(data: dict[str, Any]) -> TemplateCaps:
    switch = data.get("thinking_switch")
    found = ThinkingSwitch(**switch) if switch is not None else None
    return TemplateCaps(**{**data, "thinking_switch": found})


def _differs(a: AnalysisKey, b: AnalysisKey, field: dataclasses.Field[Any]) -> bool:
    return bool(getattr(a, field.name) != getattr(b, field.name))
