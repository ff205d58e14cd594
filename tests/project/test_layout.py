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


def untested(
    source_modules: Iterable[PurePosixPath], test_modules: set[PurePosixPath]
) -> list[str]:
    """Each source module (path relative to src/autoparser) without a test module of its own:
    ``tests/<package>/test_<module>.py`` or ``test_<module>_<aspect>.py`` (a package's
    ``__init__`` counts when the package has modules of its own, which are then checked)."""
    found = []
    for module in source_modules:
        if module.name in {"__init__.py", "__main__.py"}:
            continue
        folder = PurePosixPath(*module.parent.parts)
        stem = module.stem
        if not any(
            test.parent == folder
            and (test.stem == f"test_{stem}" or test.stem.startswith(f"test_{stem}_"))
            for test in test_modules
        ):
            found.append(f"src/autoparser/{module}: no tests/{folder / f'test_{stem}.py'}")
    return found


def _test_modules() -> set[PurePosixPath]:
    return {
        PurePosixPath(p.relative_to(TESTS_DIR).as_posix()) for p in TESTS_DIR.rglob("test_*.py")
    }


def test_every_source_module_has_its_test_module() -> None:
    sources = [PurePosixPath(p.relative_to(SOURCE).as_posix()) for p in SOURCE.rglob("*.py")]
    assert len(sources) > 50
    assert untested(sorted(sources), _test_modules()) == []


def test_a_module_without_tests_is_named() -> None:
    tests = {PurePosixPath(p) for p in ("stream/test_parser.py", "test_cli_render.py")}
    sources = [PurePosixPath(p) for p in ("stream/parser.py", "cli.py", "stream/spans.py")]
    assert untested(sources, tests) == [
        "src/autoparser/stream/spans.py: no tests/stream/test_spans.py"
    ]
    # a test named after a longer module does not count for a shorter one
    assert untested([PurePosixPath("stream/delta.py")], {PurePosixPath("stream/test_deltas.py")})


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
