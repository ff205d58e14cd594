"""The project's own exception types: one base, the standard bases callers already catch."""

from __future__ import annotations

import inspect

import pytest

import autoparser
from autoparser import errors
from autoparser.errors import (
    AnalysisWarning,
    AutoparserError,
    Cancelled,
    RequestError,
    SchemaError,
    TemplateError,
    TemplateLimitError,
    WorkLimitError,
)


def test_every_error_is_an_autoparser_error_and_public() -> None:
    found = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__ == errors.__name__
    ]
    assert len(found) >= 9
    for cls in found:
        # a warning is not raised: it is the one type outside the error hierarchy
        assert issubclass(cls, AutoparserError) or cls is AnalysisWarning, cls
        assert getattr(autoparser, cls.__name__) is cls, f"{cls.__name__} not exported"
    assert issubclass(AnalysisWarning, UserWarning)


def test_value_errors_stay_value_errors() -> None:
    """Callers that catch ValueError around request or schema handling keep working."""
    assert issubclass(RequestError, ValueError) and issubclass(SchemaError, ValueError)
    assert issubclass(TemplateLimitError, TemplateError)
    assert issubclass(WorkLimitError, Cancelled)


def test_a_schema_error_keeps_its_detail_and_hint_apart() -> None:
    exc = SchemaError("'multipleOf' at /n", " (pass lenient=True to drop it)")
    assert str(exc) == "'multipleOf' at /n (pass lenient=True to drop it)"
    assert (exc.detail, exc.hint) == ("'multipleOf' at /n", " (pass lenient=True to drop it)")


def test_the_hint_is_replaced_through_a_chain_of_causes() -> None:
    inner = SchemaError("bad keyword", "; pass lenient=True")
    try:
        try:
            raise inner
        except SchemaError as e:
            raise RequestError(f"tools[0]: {e}") from e
    except RequestError as outer:
        assert SchemaError.message_with_hint(outer, "; use --lenient") == (
            "tools[0]: bad keyword; use --lenient"
        )
    assert SchemaError.message_with_hint(ValueError("plain"), "x") == "plain"


@pytest.mark.parametrize(
    ("exc", "field", "value"),
    [
        (TemplateLimitError("max_steps", "too many steps"), "limit", "max_steps"),
        (WorkLimitError(0.25, "past 0.25 s CPU"), "cpu_seconds", 0.25),
    ],
)
def test_limit_errors_name_the_limit(exc: Exception, field: str, value: object) -> None:
    assert getattr(exc, field) == value and str(exc)
