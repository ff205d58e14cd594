"""Conventional variables: values serving stacks pass to templates that read more than
transformers gives them.

Some templates read variables no ``apply_chat_template`` call passes and raise without
them: the tool list as JSON text under ``functions`` (FireFunction v2), today's date under
``datetime`` or ``current_date``. llama.cpp and vLLM-side handlers pass such values; a
template's own documentation asks its callers to. The renderer supplies them by one rule:
only when a render fails because the template reads one of these names undefined, and
never over a value the caller passed. A template that renders without them (one that
tests ``is defined`` or has its own fallback) is left exactly as transformers renders it.

Dates come from the render's clock (``strftime_now``: the pinned ``now`` or the
environment's replaceable ``clock``), so they are reproducible wherever the clock is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import jinja2

from autoparser.template import environment

# Names whose value is the request's tools as indented JSON text ("" without tools).
TOOLS_TEXT_NAMES: tuple[str, ...] = ("functions",)
# Names whose value is today's date, with the format the templates that read them print.
DATE_NAMES: dict[str, str] = {
    "datetime": "%b %d %Y",  # "Jul 26 2024" (FireFunction v2's "Today is ...")
    "current_date": "%Y-%m-%d",
    "date_string": environment.DATE_STRING_FORMAT,  # "26 Jul 2024" (Llama 3.x)
}
CONVENTIONAL_NAMES = frozenset((*TOOLS_TEXT_NAMES, *DATE_NAMES))

# jinja2's message for a name read while undefined ("'functions' is undefined").
_UNDEFINED_NAME = re.compile(r"'(\w+)' is undefined")


def undefined_name(error: BaseException | None) -> str:
    """The variable a jinja2 ``UndefinedError`` says was read undefined ("" otherwise)."""
    if not isinstance(error, jinja2.UndefinedError):
        return ""
    match = _UNDEFINED_NAME.fullmatch(str(error))
    return match.group(1) if match else ""


def _tools_text(tools: object) -> str:
    if not tools:
        return ""
    return json.dumps(tools, ensure_ascii=False, indent=2, default=str)


def conventional_values(
    names: frozenset[str], variables: Mapping[str, object]
) -> dict[str, object]:
    """Values for those of ``names`` the render's ``variables`` do not already hold."""
    given = variables.get("strftime_now")
    strftime = given if given and callable(given) else environment.strftime_now
    values: dict[str, object] = {}
    for name in sorted(names - variables.keys()):
        if name in TOOLS_TEXT_NAMES:
            values[name] = _tools_text(variables.get("tools"))
        elif name in DATE_NAMES:
            values[name] = strftime(DATE_NAMES[name])
    return values
