"""docs/architecture.md is checked against the code: every file, module, object and cache
store it names exists, and the cache paragraph names every store there is.

The layer drawing is checked by ``test_architecture.py``; this checks the prose, which
otherwise keeps the names of things that were renamed or removed.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from types import ModuleType

import pytest
from helpers.paths import REPO_ROOT

import autoparser

DOC = REPO_ROOT / "docs" / "architecture.md"
SOURCE = REPO_ROOT / "src" / "autoparser"
CODE = re.compile(r"`([^`\n]+)`")
# A dotted reference to code: ``peg.Family``, ``Chat.relay``, ``generate.assembly.x``.
DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
# Names outside the project the prose may mention.
FOREIGN = {"importlib", "jinja2", "transformers", "vllm", "json", "re", "os"}


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def store_names() -> set[str]:
    """Every ``CACHES.store("name", ...)`` in the source, read with ast."""
    names = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "store"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "CACHES"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
    return names


def cache_paragraph(text: str) -> str:
    start = text.index("**Caches.**")
    end = text.find("\n\n", start)
    return text[start : end if end >= 0 else len(text)]


def named_stores(paragraph: str) -> set[str]:
    """The backquoted plain lowercase names of the paragraph: the stores it lists."""
    return {m for m in CODE.findall(paragraph) if re.fullmatch(r"[a-z][a-z_]*", m)}


def test_the_cache_paragraph_names_exactly_the_stores_there_are() -> None:
    stores = store_names()
    assert len(stores) > 10
    named = named_stores(cache_paragraph(_doc()))
    assert sorted(named - stores) == [], "stores the docs name that do not exist"
    assert sorted(stores - named) == [], "stores docs/architecture.md does not name"


def test_the_store_reader_sees_a_planted_store() -> None:
    paragraph = "**Caches.** The stores: `compile`, `gone_store` and `CACHES.stats()`."
    assert named_stores(paragraph) == {"compile", "gone_store"}


def _modules() -> dict[str, ModuleType]:
    found = {"autoparser": autoparser}
    for info in pkgutil.walk_packages(autoparser.__path__, "autoparser."):
        try:
            found[info.name] = importlib.import_module(info.name)
        except autoparser.IntegrationError:
            continue  # an engine plug-in whose engine is not installed
    return found


def resolves(reference: str, modules: dict[str, ModuleType]) -> bool:
    """Whether ``a.b.c`` names a module of the package, or an object in one, reading the
    first part as the package, a module by its dotted path or its last name, or a class."""
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        head = ".".join(parts[:split])
        owners = [
            m
            for name, m in modules.items()
            if name in (head, f"autoparser.{head}") or name.endswith(f".{head}")
        ]
        if split == 1:  # a class of any module, or a public name of the package
            owners += [
                getattr(m, head)
                for m in modules.values()
                if isinstance(getattr(m, head, None), type)
            ]
            owners += [getattr(autoparser, head)] if hasattr(autoparser, head) else []
        for owner in owners:
            obj: object = owner
            for attr in parts[split:]:
                obj = getattr(obj, attr, _MISSING)
                if obj is _MISSING:
                    break
            else:
                return True
    return False


_MISSING = object()


def test_every_dotted_name_in_the_docs_exists() -> None:
    modules = _modules()
    references = {
        m
        for m in CODE.findall(_doc())
        if DOTTED.fullmatch(m.removesuffix("()")) and not m.endswith(".py")
    }
    missing = [
        ref
        for ref in sorted(references)
        if ref.split(".")[0] not in FOREIGN and not resolves(ref.removesuffix("()"), modules)
    ]
    assert len(references) > 10
    assert missing == [], f"docs/architecture.md names what the code does not have: {missing}"


def test_the_resolver_refuses_a_removed_name() -> None:
    modules = _modules()
    assert resolves("peg.Family", modules) and resolves("ChatTemplate.apply", modules)
    assert not resolves("template.environment.clock", modules)
    assert not resolves("peg.NoSuchThing", modules)


@pytest.mark.parametrize("kind", ["source", "tests"])
def test_every_file_the_docs_name_exists(kind: str) -> None:
    paths = {m for m in CODE.findall(_doc()) if m.endswith(".py") and not any(c in m for c in "<*")}
    if kind == "tests":
        named = [p for p in paths if p.startswith("tests/")]
        assert [p for p in named if not (REPO_ROOT / p).is_file()] == []
        return
    sources = {p.relative_to(SOURCE).as_posix() for p in SOURCE.rglob("*.py")}
    named = [p.removeprefix("src/autoparser/") for p in paths if not p.startswith("tests/")]
    # a path may be written from its package down (``engines/base.py``, ``tags.py``)
    missing = [p for p in named if not any(s == p or s.endswith("/" + p) for s in sources)]
    assert missing == []
