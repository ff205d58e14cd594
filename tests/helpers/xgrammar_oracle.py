"""xgrammar as a grammar oracle, run in a child process.

xgrammar 0.2.x declares torch, transformers and triton as dependencies (gigabytes); only its
EBNF parser and string matcher are needed here, so it is installed with ``--no-deps`` (see the
``grammars`` extra in pyproject.toml and .ci) and the child process puts empty stand-ins for
the missing heavy modules in ``sys.modules`` before importing it. A child process keeps those
stand-ins away from the test session (transformers is the rendering oracle there).

Parent side: ``unavailable()`` (why xgrammar cannot run, or "") and ``check(items)``.
Child side: ``python xgrammar_oracle.py`` reads a JSON list of ``{"grammar": GBNF, "text":
str | null}`` on stdin and writes one JSON result per item: ``{"ok": bool, "error": str}``
for the grammar, plus ``"accepted": bool`` when a text was given (the whole text must match
and the matcher must be able to stop).
"""

from __future__ import annotations

import functools
import importlib.machinery
import json
import subprocess
import sys
import types
from typing import Any

HEAVY_MODULES = ("torch", "triton", "transformers")


@functools.cache
def unavailable() -> str:
    """Why the xgrammar oracle cannot run here, or "" when it can."""
    proc = subprocess.run(
        [sys.executable, __file__, "--version"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return (
            f"xgrammar not usable ({last}); install it with "
            "`pip install --no-deps xgrammar apache-tvm-ffi` (the `grammars` extra)"
        )
    return ""


def version() -> str:
    proc = subprocess.run(
        [sys.executable, __file__, "--version"], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def check(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compile each grammar (and match its text, if any) in one child process."""
    proc = subprocess.run(
        [sys.executable, __file__],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"xgrammar oracle failed: {proc.stderr[-2000:]}")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if len(results) != len(items):
        raise RuntimeError(f"xgrammar oracle answered {len(results)} of {len(items)} items")
    return results


# ------------------------------------------------------------------ child process


class _Anything:
    """Stands for any attribute or call result of a missing heavy module."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _Anything()


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything


def _install_stand_ins() -> None:
    import tvm_ffi  # noqa: F401  (first: it must not see a stand-in torch)

    for name in HEAVY_MODULES:
        try:
            __import__(name)
        except ImportError:
            module = _StandIn(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = module


def _child() -> int:
    _install_stand_ins()
    import xgrammar

    if sys.argv[1:] == ["--version"]:
        from importlib.metadata import version as dist_version

        print(dist_version("xgrammar"))
        return 0
    compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False)
    for item in json.load(sys.stdin):
        result: dict[str, Any] = {"ok": False, "error": ""}
        try:
            grammar = xgrammar.Grammar.from_ebnf(item["grammar"])
            result["ok"] = True
            if item.get("text") is not None:
                matcher = xgrammar.GrammarMatcher(
                    compiler.compile_grammar(grammar), terminate_without_stop_token=True
                )
                result["accepted"] = bool(
                    matcher.accept_string(item["text"]) and matcher.is_terminated()
                )
        except Exception as exc:  # xgrammar raises RuntimeError/ValueError with the reason
            result["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
