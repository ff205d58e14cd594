"""Pure text helpers for argument text: escaping, the closer of a JSON prefix, escape cuts,
the one-object check, and values a template printed with Python's str()."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoparser.stream.repair import (
    escape_json,
    json_closer,
    json_object_text,
    python_dict_json,
    python_value_json,
    safe_escape_cut,
)


@given(st.text(), st.integers(0, 40))
def test_escaping_pieces_apart_equals_escaping_the_whole(text: str, cut: int) -> None:
    assert escape_json(text[:cut]) + escape_json(text[cut:]) == escape_json(text)
    assert json.loads(f'"{escape_json(text)}"') == text


@pytest.mark.parametrize(
    ("prefix", "closed"),
    [
        ('{"a": "x', '{"a": "x"}'),
        ('{"a": [1, {"b": 2', '{"a": [1, {"b": 2}]}'),
        ('{"a":', '{"a": null}'),
        ('{"a": 1, "b"', '{"a": 1, "b": null}'),
        ('{"s": "back\\', '{"s": "back\\\\"}'),  # the lone backslash: its escape done
        ('{"q": "a \\" }', '{"q": "a \\" }"}'),  # the quote is escaped: still in the string
        ("[", "[]"),
    ],
)
def test_a_prefix_closes_into_valid_json(prefix: str, closed: str) -> None:
    assert prefix + json_closer(prefix) == closed
    json.loads(closed)


@pytest.mark.parametrize(
    ("raw", "cut"),
    [
        ("abc", 3),
        ("ab\\", 2),  # an escape not finished
        ("ab\\u00", 2),
        ("ab\\u00e9", 8),
        ("x\\ud83d", 1),  # a high surrogate waits for its low half
        ("x\\ud83d\\ude00", 13),
        ("\\n", 2),
    ],
)
def test_escape_cuts_hold_back_what_cannot_decode_alone(raw: str, cut: int) -> None:
    assert safe_escape_cut(raw) == cut


@pytest.mark.parametrize(
    ("text", "is_object"),
    [
        ('{"a": 1}', True),
        ('  {"a": [1, {}]}\n', True),
        ("[1]", False),
        ('{"a": 1} {"b": 2}', False),
        ('{"a": }', False),
        ("", False),
        ('"{}"', False),
    ],
)
def test_one_json_object(text: str, is_object: bool) -> None:
    assert json_object_text(text) is is_object


def test_values_printed_by_python_become_json() -> None:
    assert python_value_json("{'a': True, 'b': None}") == '{"a": true, "b": null}'
    assert python_value_json(' "already json" ') == '"already json"'
    assert python_value_json("not a value") is None
    assert python_dict_json("[1, 2]") is None
    assert python_dict_json("{'k': 'v'}") == '{"k": "v"}'
