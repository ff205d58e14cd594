"""String formats the grammar enforces, as GBNF bodies for the text between the quotes.

Only formats with a fixed, checkable syntax are here (RFC 3339 date/time, UUID). Other
formats (email, uri...) are annotations in JSON Schema 2020-12 and stay plain strings.
"""

from __future__ import annotations

_HOUR = '( [01] [0-9] | "2" [0-3] )'
_MINUTE = "[0-5] [0-9]"
_DATE = '[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )'
_TIME = (
    f'{_HOUR} ":" {_MINUTE} ":" ( {_MINUTE} | "60" ) ( "." [0-9]+ )? '
    f'( [Zz] | [+-] {_HOUR} ":" {_MINUTE} )'
)
_HEX = "[0-9a-fA-F]"

FORMAT_RULES: dict[str, tuple[str, str]] = {
    "date": ("json-fmt-date", _DATE),
    "time": ("json-fmt-time", _TIME),
    "date-time": ("json-fmt-date-time", f"{_DATE} [Tt] {_TIME}"),
    "uuid": (
        "json-fmt-uuid",
        f'{_HEX}{{8}} "-" {_HEX}{{4}} "-" {_HEX}{{4}} "-" {_HEX}{{4}} "-" {_HEX}{{12}}',
    ),
}
"""format name -> (shared rule name, body for the string's content)."""
