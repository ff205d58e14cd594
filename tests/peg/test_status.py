"""The outcome of a parse, as an enum for results and as plain ints for the hot loops."""

from __future__ import annotations

from autoparser.peg.status import FAIL, MORE, OK, STATUSES, ParseStatus


def test_plain_ints_map_back_to_their_statuses() -> None:
    assert [STATUSES[n] for n in (FAIL, OK, MORE)] == [
        ParseStatus.FAIL,
        ParseStatus.SUCCESS,
        ParseStatus.NEED_MORE_INPUT,
    ]
    assert all(STATUSES[s] is s for s in ParseStatus)
    assert len(set(STATUSES)) == len(ParseStatus)


def test_only_failure_is_falsy() -> None:
    """Loops test ``if status:`` for "not failed"."""
    assert not ParseStatus.FAIL and ParseStatus.SUCCESS and ParseStatus.NEED_MORE_INPUT
