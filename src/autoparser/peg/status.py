"""The outcome of a parse, defined once for the public results and the hot loops."""

from __future__ import annotations

import enum


class ParseStatus(enum.IntEnum):
    """Outcome of a parse."""

    FAIL = 0
    SUCCESS = 1
    NEED_MORE_INPUT = 2


# The same statuses as plain ints, for the matcher and JSON scanner loops (plain int
# constants compare faster than enum members); ``STATUSES[n]`` maps one back.
FAIL, OK, MORE = int(ParseStatus.FAIL), int(ParseStatus.SUCCESS), int(ParseStatus.NEED_MORE_INPUT)
STATUSES = (ParseStatus.FAIL, ParseStatus.SUCCESS, ParseStatus.NEED_MORE_INPUT)
