"""Property tests for the JSON nodes against the stdlib decoder (RFC 8259 acceptance)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser.peg import ParseStatus, end, json_scan, json_value, tag

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WS = " \t\n\r"

DOCS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4)
    ),
    max_leaves=12,
)


def _reject(name: str) -> object:
    raise ValueError(name)


def rfc_valid(s: str) -> bool:
    """RFC 8259 value with no surrounding whitespace (json.loads minus NaN/Infinity)."""
    if not s or s[0] in WS or s[-1] in WS:
        return False
    try:
        json.loads(s, parse_constant=_reject)
    except (ValueError, RecursionError):
        return False
    return True


@st.composite
def documents(draw: st.DrawFn) -> str:
    doc = draw(DOCS)
    indent = draw(st.sampled_from([None, 0, 2]))
    seps = draw(st.sampled_from([None, (",", ":"), (" , ", " : ")]))
    return json.dumps(doc, indent=indent, separators=seps, ensure_ascii=draw(st.booleans()))


@st.composite
def mutations(draw: st.DrawFn, s: str) -> str:
    alphabet = "{}[]\",:\\ 0123456789-+.eEtrufalsn\n'x"
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(s)))
        op = draw(st.sampled_from(["del", "ins", "sub"]))
        ch = draw(st.sampled_from(alphabet))
        if op == "ins" or not s:
            s = s[:i] + ch + s[i:]
        elif op == "del":
            i = min(i, len(s) - 1)
            s = s[:i] + s[i + 1 :]
        else:
            i = min(i, len(s) - 1)
            s = s[:i] + ch + s[i + 1 :]
    return s


ANCHORED = json_value() + end()


@SETTINGS
@given(data=st.data())
def test_full_parse_accepts_exactly_rfc_json(data: st.DataObject) -> None:
    s = data.draw(documents())
    assert ANCHORED.parse(s).status is ParseStatus.SUCCESS
    m = data.draw(mutations(s))
    expected = rfc_valid(m)
    assert (ANCHORED.parse(m).status is ParseStatus.SUCCESS) == expected, m
    # The iterative scanner alone (no C fast paths) agrees.
    r = json_scan.scan(m, 0, "value", False, False, fast=False)
    assert (r.status == json_scan.OK and r.end == len(m)) == expected, m


@SETTINGS
@given(data=st.data())
def test_every_prefix_needs_more_and_closes(data: st.DataObject) -> None:
    s = data.draw(documents())
    p = tag("v", json_value())
    cuts = data.draw(st.lists(st.integers(0, len(s) - 1), min_size=1, max_size=6))
    for k in cuts:
        r = p.parse(s[:k], partial=True)
        assert r.status is ParseStatus.NEED_MORE_INPUT, s[:k]
        node = r.tree.find("v")
        assert node is not None
        assert rfc_valid(s[:k] + node.closer), (s[:k], node.closer)


@SETTINGS
@given(data=st.data())
def test_partial_parse_of_a_mutated_prefix_never_fails_on_a_valid_prefix(
    data: st.DataObject,
) -> None:
    # A prefix of a valid document (after mutation, if still valid) is never FAIL.
    s = data.draw(mutations(data.draw(documents())))
    if not rfc_valid(s):
        return
    for k in range(len(s) + 1):
        assert json_value().parse(s[:k], partial=True).status is not ParseStatus.FAIL, s[:k]
