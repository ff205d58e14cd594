"""A Hugging Face cache on disk, as a download would leave it, for Hub-id tests that run
offline (``HF_HOME`` pointed at it, ``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import json
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_hf_home(root: Path, repo_id: str, tokenizer_config: dict[str, object]) -> Path:
    """``root/hf`` holding ``repo_id``'s tokenizer_config.json (refs/main naming the
    snapshot); the directory to use as ``HF_HOME``."""
    home = root / "hf"
    repo = home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (snapshot / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return home
