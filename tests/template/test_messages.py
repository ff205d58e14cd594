"""``plain_data``: the copy of messages and tools every render hands the template.

Plain JSON (all of a request's tool schemas) goes through an inline fast path; whatever
the input, the copy is made of exact plain types only, shares no container with the
caller's data, and keeps every value.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import OrderedDict
from typing import Any

from helpers.distinct_tools import distinct_tools
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser.template.messages import plain_data


class Colour(str, enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


@dataclasses.dataclass
class Point:
    x: int
    y: list[int]


PLAIN = (str, int, float, bool, type(None))


def containers(value: Any) -> list[int]:
    """The ids of every dict, list and tuple in ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in containers(v))]
    if isinstance(value, (list, tuple)):
        return [id(value), *(i for v in value for i in containers(v))]
    return []


def exact(value: Any) -> bool:
    """Whether ``value`` is made of exact plain types (tuples allowed, as transformers keeps)."""
    if type(value) in PLAIN:
        return True
    if type(value) is dict:
        return all(type(k) in PLAIN and exact(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(map(exact, value))
    return False


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.sampled_from([Colour.RED, Size.BIG]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=VALUES)
def test_the_copy_is_plain_fresh_and_equal(value: Any) -> None:
    copy = plain_data(value)
    assert exact(copy)
    assert not set(containers(copy)) & set(containers(value))
    assert copy == value


def test_subclasses_become_their_base_type() -> None:
    copy = plain_data({"c": [Colour.RED], "s": Size.BIG, "p": Point(1, [2])})
    assert copy == {"c": ["red"], "s": 3, "p": {"x": 1, "y": [2]}}
    assert type(copy["c"][0]) is str and type(copy["s"]) is int


def test_tool_schemas_are_copied_whole() -> None:
    tools = distinct_tools(40, 4)
    copy = plain_data(tools)
    assert copy == tools and exact(copy)
    assert not set(containers(copy)) & set(containers(tools))
