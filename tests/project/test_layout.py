"""Tests a newcomer can place: the suite mirrors the source layout.

A module's tests live in ``tests/<package>/test_<module>[_<aspect>].py`` (a package's own
``__init__`` is named by the package: ``tests/formats/test_formats_contract.py``); suites
over every template of the corpus, or a model's recorded outputs, in ``tests/corpus/``; checks
of the project as a whole (layers, docs, the README's demo) in ``tests/project/``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from helpers.paths import REPO_ROOT, TESTS_DIR

SOURCE = REPO_ROOT / "src" / "autoparser"
# Folders of tests/ that are not a package of the source, and what they hold.
FREE_FOLDERS = {
    "corpus": "suites over every template of the corpus and recorded model outputs",
    "project": "checks of the project as a whole",
}
NOT_TESTS = {
    "helpers": "code the tests share",
    "templates": "the project's own templates",
    "data": "pinned expectations",
}


def _names(folder: PurePosixPath) -> set[str] | None:
    """What a test module in this folder may be named after: the package's modules, its
    subpackages and its own name (for its ``__init__``); None if the folder is no package."""
    package = SOURCE.joinpath(*folder.parts)
    if not (package / "__init__.py").exists():
        return None
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return names | ({package.name} if folder.parts else set())


def misplaced(relative_paths: Iterable[PurePosixPath]) -> list[str]:
    """Each test module (path relative to tests/) that is not where the layout puts it."""
    found = []
    for relative in relative_paths:
        folder = relative.parent
        top = folder.parts[0] if folder.parts else ""
        if top in NOT_TESTS:
            found.append(f"{relative}: a test module among {NOT_TESTS[top]}")
            continue
        if top in FREE_FOLDERS:
            continue
        names = _names(folder)
        if names is None:
            found.append(f"{relative}: src/autoparser/{folder} is not a package")
            continue
        stem = relative.stem.removeprefix("test_")
        if not any(stem == name or stem.startswith(name + "_") for name in names):
            found.append(f"{relative}: names no module of src/autoparser/{folder}")
    return found


def test_every_test_module_mirrors_a_source_module() -> None:
    modules = [
        PurePosixPath(p.relative_to(TESTS_DIR).as_posix()) for p in TESTS_DIR.rglob("test_*.py")
    ]
    assert len(modules) > 50
    assert misplaced(sorted(modules)) == []


def test_feature_named_and_stray_modules_are_refused() -> None:
    refused = [
        "test_nested_elements.py",  # named by a feature, not a module
        "stream/test_nested_elements.py",
        "nowhere/test_parser.py",  # no such package
        "helpers/test_paths.py",  # a test among shared code
    ]
    accepted = [
        "stream/test_parser.py",
        "stream/test_parser_props.py",
        "formats/test_formats_contract.py",
        "integrations/vllm/test_parsers.py",
        "test_cli_render.py",
        "corpus/test_roundtrip.py",
        "project/test_architecture.py",
    ]
    assert len(misplaced(PurePosixPath(p) for p in refused)) == len(refused)
    assert misplaced(PurePosixPath(p) for p in accepted) == []
