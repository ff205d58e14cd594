"""The tag vocabulary: every tag's meaning to the message said once, in ``autoparser.tags``,
and the stream modules reading it rather than tabling tags of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autoparser
from autoparser import tags

STREAM = Path(autoparser.__file__).parent / "stream"


def test_the_groups_name_known_tags_only() -> None:
    grouped = {
        *tags.TEXT_FIELDS,
        *tags.WHOLE_ARGUMENTS,
        *tags.ARGUMENTS,
        *tags.VALUE_SPECS,
        *tags.SPAN_LABELS,
    }
    assert grouped <= set(tags.ALL)
    assert len(set(tags.ALL)) == len(tags.ALL)


def test_the_sets_are_the_specs() -> None:
    specs = tags.VALUE_SPECS
    assert {t for t, s in specs.items() if s.decoder == "string"} == tags.STRING_VALUES
    assert {tags.TOOL_ARG_STRING, tags.TOOL_ARG_STRING_LEAD} == tags.TRIMS_LEAD
    assert {tags.TOOL_ARG_STRING, tags.TOOL_ARG_STRING_TRAIL} == tags.TRIMS_TRAIL
    assert {*tags.WHOLE_ARGUMENTS, tags.TOOL_ARG} == tags.ARGUMENTS
    # Every argument encoding is one span kind to a viewer.
    assert {tags.SPAN_LABELS[t] for t in tags.ARGUMENTS} == {"tool-args"}


def test_the_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        tags.VALUE_SPECS[tags.TOOL_ARG_JSON] = tags.ValueSpec("string")  # type: ignore[index]


@pytest.mark.parametrize("path", sorted(STREAM.glob("*.py")), ids=lambda p: p.name)
def test_no_stream_module_tables_tags_of_its_own(path: Path) -> None:
    """A collection (tuple, list, set, dict) of two or more ``tags.X`` names outside
    ``tags.py`` is a second table of the vocabulary."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        items = (
            node.keys
            if isinstance(node, ast.Dict)
            else node.elts
            if isinstance(node, ast.Tuple | ast.List | ast.Set)
            else []
        )
        named = [
            item
            for item in items
            if isinstance(item, ast.Attribute)
            and isinstance(item.value, ast.Name)
            and item.value.id == "tags"
        ]
        assert len(named) < 2, f"{path.name} line {node.lineno}: a table of tags"
