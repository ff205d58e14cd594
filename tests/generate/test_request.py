"""Request validation at scale: many distinct tools pass, a bad one among them is named.

The metaschema check itself is compared with jsonschema in test_schema_check.py; here it is
seen through ``normalize_request``, as ``ChatTemplate.apply`` and serve call it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers.distinct_tools import distinct_tools

from autoparser.errors import RequestError
from autoparser.generate.request import normalize_request

jsonschema = pytest.importorskip("jsonschema")


def _normalize(tools: list[dict[str, Any]], **options: Any) -> Any:
    defaults: dict[str, Any] = {
        "tool_choice": "auto",
        "parallel_tool_calls": None,
        "response_format": None,
        "enable_thinking": None,
        "reasoning_format": "auto",
        "template_supports_parallel": True,
    }
    return normalize_request(tools=tools, **{**defaults, **options})


def _oracle(schema: dict[str, Any]) -> str:
    with pytest.raises(jsonschema.exceptions.SchemaError) as info:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    return str(info.value.message)


def test_distinct_tools_are_accepted_as_given() -> None:
    tools = distinct_tools(200, 3)
    request = _normalize(tools)
    assert [t.name for t in request.tools] == [t["function"]["name"] for t in tools]
    assert [t.parameters for t in request.tools] == [t["function"]["parameters"] for t in tools]
    for tool in tools:  # the oracle agrees every one is valid
        jsonschema.validators.validator_for(tool["function"]["parameters"]).check_schema(
            tool["function"]["parameters"]
        )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("properties",), []),
        (("required",), ["a", "a"]),
        (("description",), 7),
        (("additionalProperties",), "no"),
    ],
)
def test_a_bad_schema_among_many_is_named_with_jsonschemas_message(
    path: tuple[str, ...], value: object
) -> None:
    tools = copy.deepcopy(distinct_tools(50, 5))
    _normalize(tools)  # every node shape now known valid
    bad = tools[37]["function"]["parameters"]
    bad[path[0]] = value
    with pytest.raises(RequestError) as info:
        _normalize(tools)
    assert str(info.value) == (
        f"tools[37].function.parameters: invalid JSON schema: {_oracle(bad)}"
    )


def test_a_bad_nested_schema_is_named() -> None:
    tools = copy.deepcopy(distinct_tools(20, 9))
    schema = tools[3]["function"]["parameters"]
    name = next(iter(schema["properties"]))
    schema["properties"][name] = {"type": "string", "minLength": -1}
    with pytest.raises(RequestError, match=r"^tools\[3\]\.function\.parameters: invalid JSON"):
        _normalize(tools)


def test_response_format_schema_is_checked_alike() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "strin"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    with pytest.raises(RequestError) as info:
        _normalize([], response_format=fmt)
    assert str(info.value) == (
        f"response_format.json_schema.schema: invalid JSON schema: {_oracle(schema)}"
    )


def test_a_schema_uri_that_is_no_string_is_a_request_error() -> None:
    """jsonschema's ``validator_for`` raises TypeError on it; the request gets an error
    naming the field."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {"$schema": ["x"]}}}
    with pytest.raises(RequestError, match=r"^tools\[0\]\.function\.parameters: invalid JSON"):
        _normalize([tool])
