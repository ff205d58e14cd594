"""Write docs/api.md from the docstrings of the public API (``autoparser.__all__``).

Run ``python docs/gen_api.py`` after changing a public docstring; tests/project/test_api_docs.py
fails when a public name has no docstring or is missing from docs/api.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import autoparser

OUT = Path(__file__).parent / "api.md"


def public_members(cls: type) -> Iterator[tuple[str, object]]:
    """(name, function or property) of a class's own public methods and properties."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            yield name, value
        elif isinstance(value, (classmethod, staticmethod)):
            yield name, value.__func__
        elif inspect.isfunction(value):
            yield name, value


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def render() -> str:
    """The Markdown reference: one section per public name, its members below it."""
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.",
        "Everything below is importable as `from autoparser import NAME`.",
        "",
    ]
    for name in sorted(autoparser.__all__):
        obj = getattr(autoparser, name)
        if inspect.isfunction(obj):
            lines += [f"## `{name}{_signature(obj)}` (function)", "", inspect.getdoc(obj) or "", ""]
            continue
        if not isinstance(obj, type):
            # An object of the library's own (a registry that fills as modules load) is
            # named by its type; a plain value by its repr.
            own = type(obj).__module__.startswith("autoparser")
            shown = f"a `{type(obj).__name__}`" if own else f"`{name} = {obj!r}`"
            lines += [f"## `{name}` (constant)", "", shown, ""]
            continue
        kind = "exception" if issubclass(obj, Exception) else "class"
        lines += [f"## `{name}` ({kind})", "", inspect.getdoc(obj) or "", ""]
        for member, value in public_members(obj):
            if isinstance(value, property):
                lines += [f"### `{name}.{member}` (property)", ""]
                doc = inspect.getdoc(value.fget)
            else:
                lines += [f"### `{name}.{member}{_signature(value)}`", ""]
                doc = inspect.getdoc(value)
            lines += [doc or "", ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
