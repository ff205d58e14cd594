"""Count ``Any`` in src/autoparser: uses per 1000 non-blank lines, overall and per module.

``Any`` belongs at untyped boundaries (jinja2's API, JSON a caller sends); everywhere else a
precise type says what flows. CI prints this (.ci/run); issue 20 sets the target at 10 per
1000 non-blank lines. ``python scripts/count_any.py [--top N]``.
"""

from __future__ import annotations

import argparse
import io
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "autoparser"
TARGET = 10.0


def count(path: Path) -> tuple[int, int]:
    """(uses of the name ``Any`` outside comments and strings, non-blank lines) of a file."""
    text = path.read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    uses = sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")
    lines = sum(1 for line in text.splitlines() if line.strip())
    return uses, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5, help="modules to list, most uses first")
    args = parser.parse_args()
    rows = [(p.relative_to(SRC.parent), *count(p)) for p in sorted(SRC.rglob("*.py"))]
    uses = sum(r[1] for r in rows)
    lines = sum(r[2] for r in rows)
    rate = 1000 * uses / max(lines, 1)
    where = f"{uses} uses in {lines} non-blank lines of src/"
    print(f"Any: {where}: {rate:.1f} per 1000 (target {TARGET:g})")
    for name, n, _ in sorted(rows, key=lambda r: -r[1])[: args.top]:
        print(f"  {n:4d}  {name}")


if __name__ == "__main__":
    main()
