"""Pinned grammars: a digest of every grammar (text, laziness, triggers) a set of templates
builds for many tools, so that speeding grammar building up cannot change one byte.

``python tests/helpers/grammar_pins.py`` rewrites tests/data/grammar_pins.json from the
current code; it was written once from the code before the grammar-speed work.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent / "src")]

from autoparser import ChatTemplate  # noqa: E402
from autoparser.errors import AutoparserError  # noqa: E402
from helpers.many_tools import many_tools  # noqa: E402
from helpers.paths import corpus_dir, own_path, own_templates  # noqa: E402

PINS = HERE.parent / "data" / "grammar_pins.json"
FEW = 24  # tools for every own template and the corpus sample
MANY = 300  # tools for the typical templates
TYPICAL = ("chatml_hermes", "qwen3coder_like", "glm_like")
CORPUS_STEP = 8  # every eighth corpus template, by sorted name


def cases() -> list[tuple[str, Path, int]]:
    """(key, template path, tool count) of every pinned grammar's template."""
    out = [(f"own/{p.stem}", p, FEW) for p in own_templates()]
    out += [(f"own/{name}@{MANY}", own_path(name), MANY) for name in TYPICAL]
    corpus = corpus_dir()
    if corpus is not None:
        for p in sorted(corpus.glob("*.jinja"))[::CORPUS_STEP]:
            out.append((f"corpus/{p.stem}", p, FEW))
    return out


def digest(path: Path, n: int) -> dict[str, Any]:
    """The grammar digests of one template for ``n`` tools, per tool_choice (or the
    error's type when the request is refused)."""
    try:
        template = ChatTemplate.from_file(path)
    except AutoparserError as exc:
        return {"load": f"error {type(exc).__name__}"}
    tools = many_tools(n)
    out: dict[str, Any] = {}
    for choice in ("auto", "required"):
        try:
            p = template.apply([{"role": "user", "content": "hi"}], tools=tools, tool_choice=choice)
        except AutoparserError as exc:
            out[choice] = f"error {type(exc).__name__}"
            continue
        blob = json.dumps(
            [p.grammar, p.grammar_lazy, [repr(t) for t in p.grammar_triggers]], sort_keys=True
        )
        out[choice] = hashlib.sha256(blob.encode()).hexdigest()
    return out


def main() -> None:
    pins = {key: digest(path, n) for key, path, n in cases()}
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"{len(pins)} templates pinned in {PINS}")


if __name__ == "__main__":
    main()
