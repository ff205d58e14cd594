"""String formats the grammar enforces (RFC 3339 dates and times, UUIDs)."""

from __future__ import annotations

import pytest
from helpers.gbnf_oracle import accepts

from autoparser.schema import schema_to_gbnf
from autoparser.schema.string_formats import FORMAT_RULES

CASES = {
    "date": (["2024-02-29", "1999-12-31"], ["2024-13-01", "2024-1-01", "24-01-01", "2024-00-10"]),
    "time": (
        ["23:59:59Z", "00:00:00.123+05:30", "12:30:00-08:00"],
        ["24:00:00Z", "12:60:00Z", "12:30:00", "12:30Z"],
    ),
    "date-time": (
        ["2024-05-01T10:20:30Z", "2024-05-01t10:20:30.5+01:00"],
        ["2024-05-01 10:20:30Z", "2024-05-01T10:20:30"],
    ),
    "uuid": (
        ["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"],
        ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"],
    ),
}


def test_every_enforced_format_is_covered_here() -> None:
    assert set(FORMAT_RULES) == set(CASES)


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_formats_accept_their_syntax_only(fmt: str) -> None:
    grammar = schema_to_gbnf({"type": "string", "format": fmt})
    assert FORMAT_RULES[fmt][0] in grammar  # the shared rule, by its name
    good, bad = CASES[fmt]
    assert [t for t in good if not accepts(grammar, f'"{t}"')] == []
    assert [t for t in bad if accepts(grammar, f'"{t}"')] == []


def test_annotation_only_formats_stay_plain_strings() -> None:
    assert schema_to_gbnf({"type": "string", "format": "email"}) == schema_to_gbnf(
        {"type": "string"}
    )
