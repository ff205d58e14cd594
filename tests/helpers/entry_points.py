"""An entry point declared as an installed distribution declares it: the engine drivers
(run by the plug-in tests inside the engines' own environments) register autoparser's
plug-in the way an ``pip install autoparser`` would, without installing anything."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def declare_entry_point(work: Path, group: str, entry_point: str) -> None:
    """``autoparser = entry_point`` in ``group``, in a distribution's metadata under
    ``work``, which goes on the import path (``importlib.metadata`` finds it there)."""
    dist = work / "autoparser_entry_point-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: autoparser-entry-point\nVersion: 0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[{group}]\nautoparser = {entry_point}\n", encoding="utf-8"
    )
    sys.path.insert(0, str(work))
    importlib.invalidate_caches()
