"""Python literals as one PEG definition (parser and grammar) and their JSON values."""

from __future__ import annotations

import json

import pytest

from autoparser.peg import end
from autoparser.peg.python_literal import (
    WORD_VALUES,
    literal_json,
    python_literal,
    python_string,
    to_json,
    to_python,
)
from autoparser.peg.status import ParseStatus


def _parses(text: str) -> bool:
    return (python_literal() + end()).parse(text).status is ParseStatus.SUCCESS


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'a'", "a"),
        ('r"\\d+"', "\\d+"),
        ("u'\\u00e9\\x41\\101'", "éAA"),
        ("True", True),
        ("null", None),
        ("[1, {'k': None}, ]", [1, {"k": None}]),
        ("{1: 'one', 'two': 2.5e3}", {"1": "one", "two": 2500.0}),
        ("-0.5", -0.5),
    ],
)
def test_accepted_literals_parse_and_convert(text: str, value: object) -> None:
    assert _parses(text), text
    assert json.loads(to_json(text)) == value


@pytest.mark.parametrize(
    "text", ["'''x'''", "b'x'", "(1, 2)", "{1, 2}", "f(1)", "'a\nb'", "'\\N{DASH}'", "1 + 2"]
)
def test_what_is_no_accepted_literal_is_refused(text: str) -> None:
    assert not _parses(text), text


def test_json_words_are_python_words_outside_strings_only() -> None:
    assert to_python("[true, 'true', null]") == [True, "true", None]
    assert set(WORD_VALUES) == {"True", "False", "None", "true", "false", "null"}


def test_a_value_without_a_json_form_is_none_and_to_json_keeps_the_text() -> None:
    assert literal_json("{1, 2}") is None  # a set
    assert literal_json("1e999") is None  # beyond JSON's range
    assert to_json("'cut off") == json.dumps("'cut off")
    with pytest.raises(ValueError, match="not a Python literal"):
        to_python("f(")


def test_surrogate_pairs_become_one_character() -> None:
    assert literal_json("'\\ud83c\\udf27'") == json.dumps("\U0001f327", ensure_ascii=False)


def test_strings_in_one_quote_style_only() -> None:
    single = python_string("'") + end()
    assert single.parse("'x'").status is ParseStatus.SUCCESS
    assert single.parse('"x"').status is ParseStatus.FAIL
