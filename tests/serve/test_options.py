"""One validated set of generation options: every field type- and range-checked, by name."""

from __future__ import annotations

import math

import pytest

from autoparser.serve.limits import InvalidRequest
from autoparser.serve.options import (
    MAX_LOGIT_BIAS,
    MAX_STOPS,
    NUMBER_FIELDS,
    SamplingOptions,
    boolean,
    number,
)


def test_fields_are_read_under_their_openai_names() -> None:
    options = SamplingOptions.from_fields(
        {
            "max_tokens": 64,
            "temperature": 0.2,
            "top_k": 40,
            "seed": 7,
            "stop": "END",
            "logit_bias": {"15": -100},
            "ignore_eos": True,
            "unknown_field": "left to the route",
        }
    )
    assert options.max_tokens == 64 and options.stop == ("END",)
    assert options.engine_fields() == {
        "temperature": 0.2,
        "top_k": 40,
        "seed": 7,
        "logit_bias": {"15": -100},
        "ignore_eos": True,
    }


def test_the_first_token_limit_field_present_wins() -> None:
    fields = ("max_completion_tokens", "max_tokens")
    body = {"max_tokens": 10, "max_completion_tokens": 20}
    assert SamplingOptions.from_fields(body, fields).max_tokens == 20
    assert SamplingOptions.from_fields({"max_tokens": 10}, fields).max_tokens == 10
    assert SamplingOptions.from_fields({}).engine_fields() == {}


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"temperature": 3}, "temperature", "between 0 and 2"),
        ({"temperature": "hot"}, "temperature", "must be a number, got str"),
        ({"top_p": math.nan}, "top_p", "finite"),
        ({"top_k": 1.5}, "top_k", "an integer"),
        ({"seed": True}, "seed", "an integer, got bool"),
        ({"max_tokens": 0}, "max_tokens", "between 1"),
        ({"stop": ["a", ""]}, "stop", "non-empty string"),
        ({"stop": ["s"] * (MAX_STOPS + 1)}, "stop", f"at most {MAX_STOPS}"),
        ({"logit_bias": {"x": 1}}, "logit_bias", "token ids"),
        ({"logit_bias": {"1": 101}}, "logit_bias.1", "between -100 and 100"),
        ({"logit_bias": [1]}, "logit_bias", "an object"),
        ({"ignore_eos": "yes"}, "ignore_eos", "a boolean"),
    ],
)
def test_a_bad_field_is_named(body: dict[str, object], param: str, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words) as info:
        SamplingOptions.from_fields(body)
    assert info.value.param == param and info.value.status == 400


def test_too_many_logit_biases_are_refused() -> None:
    bias = {str(i): 0 for i in range(MAX_LOGIT_BIAS + 1)}
    with pytest.raises(InvalidRequest, match=f"at most {MAX_LOGIT_BIAS}"):
        SamplingOptions.from_fields({"logit_bias": bias})


def test_every_number_field_has_a_range_that_admits_its_default_kind() -> None:
    for name in NUMBER_FIELDS:
        assert SamplingOptions.from_fields({name: 0}).engine_fields() == {name: 0}, name


def test_helpers_check_exactly_what_they_say() -> None:
    assert number(5, "n", 0, None, True) == 5
    assert number(-1e300, "x", None, None, False) == -1e300
    with pytest.raises(InvalidRequest):
        number(1.0, "n", None, None, True)
    assert boolean(False, "b") is False
