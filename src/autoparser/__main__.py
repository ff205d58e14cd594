"""``python -m autoparser``: the ``autoparser`` command, for environments without its script
on PATH."""

from __future__ import annotations

from autoparser.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
