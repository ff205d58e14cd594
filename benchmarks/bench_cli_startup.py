"""CLI start-up: wall time of ``autoparser --version`` and ``--help`` in a fresh process.

Baselines measured in the same run: a bare interpreter (``python -c pass``, the floor no
CLI can beat) and a process that imports the whole library (``import autoparser.chat``,
what ``--version`` cost before the imports became lazy). Prints the median of each, the
ratios, and the many-templates ``analyze`` against one process per template.
``--smoke`` runs a short pass for CI.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import median_of

SRC = str(Path(__file__).resolve().parent.parent / "src")
# As an installed package runs: bytecode cached (pip compiles it at install; here a private
# cache folder, written by a first untimed run), whatever PYTHONDONTWRITEBYTECODE says.
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
    "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="bench-cli-pycache-"),
}
EXAMPLE = str(Path(SRC) / "autoparser/examples/chatml_tools.jinja")


def _run(*args: str) -> None:
    subprocess.run([sys.executable, *args], env=ENV, check=True, capture_output=True)


def _time(args: tuple[str, ...], repeats: int) -> float:
    _run(*args)  # untimed: fills the bytecode cache
    return median_of(lambda: _run(*args), repeats, time.perf_counter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a short pass for CI")
    options = parser.parse_args()
    repeats = 3 if options.smoke else 11
    floor = _time(("-c", "pass"), repeats)
    eager = _time(("-c", "import autoparser.chat"), repeats)
    version = _time(("-m", "autoparser.cli", "--version"), repeats)
    help_ = _time(("-m", "autoparser.cli", "--help"), repeats)
    print(f"python -c pass              {floor * 1000:7.1f} ms (floor)")
    print(f"import autoparser.chat      {eager * 1000:7.1f} ms (the eager CLI's cost)")
    print(f"autoparser --version        {version * 1000:7.1f} ms  {version / eager:.2f}x eager")
    print(f"autoparser --help           {help_ * 1000:7.1f} ms  {help_ / eager:.2f}x eager")
    print(f"--version above the floor   {(version - floor) * 1000:7.1f} ms")
    count = 3 if options.smoke else 10
    many = _time(("-m", "autoparser.cli", "analyze", "--jsonl", *[EXAMPLE] * count), 1)
    single = _time(("-m", "autoparser.cli", "analyze", "--json", EXAMPLE), 1)
    print(
        f"analyze {count} templates: one process {many:.2f} s, "
        f"{count} processes ~{single * count:.2f} s ({single * count / many:.1f}x)"
    )


if __name__ == "__main__":
    main()
