"""The formats, by name: the generated one and the few hand-written ones.

A handler is a function ``(ctx: BuildContext) -> ParserDefinition``; ``TemplateAnalysis.
handler`` names the one to use (the analysis sets it with ``detect_format``, from the
fingerprints in ``analysis/fingerprints.py``), ``STANDARD`` (``""``) naming the generated
``generate.assembly.build_standard``. A hand-written handler builds its parsers with the PEG
library and the helpers of ``autoparser.generate`` (context, reasoning, json_calls,
tagged_calls, sections, assembly), tags nodes with the vocabulary of ``autoparser.tags`` and
returns a ``ParserDefinition``; streaming, deltas, truncation and the grammar then work as
for generated formats.

The handlers are listed below, explicitly: importing a module registers nothing. This
package sits above ``generate`` (its handlers build with it) and below ``params``, which
dispatches through ``get_handler``. To add a format: a fingerprint in
``analysis/fingerprints.py``, ``formats/<name>.py`` with its ``build``, and a line in
``_BUILTIN``. ``register`` adds a handler at run time (an extension, or a test's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from autoparser.analysis.fingerprints import FINGERPRINTS, STANDARD, detect_format
from autoparser.definition import ParserDefinition
from autoparser.errors import TemplateError
from autoparser.formats import functionary_v3_2, gemma4, harmony
from autoparser.generate.assembly import build_standard
from autoparser.generate.context import BuildContext


class Format(Protocol):
    """A format: builds, from a request's context, the parsers its output is read with (a
    ``ParserDefinition``: the lenient parser, the strict grammar parser, triggers, markers).
    Every built-in one passes tests/formats/test_formats_contract.py."""

    def __call__(self, ctx: BuildContext, /) -> ParserDefinition: ...


Handler = Format

_BUILTIN: dict[str, Handler] = {
    STANDARD: build_standard,
    "harmony": harmony.build,
    "functionary_v3_2": functionary_v3_2.build,
    "gemma4": gemma4.build,
}
_HANDLERS: dict[str, Handler] = dict(_BUILTIN)
# The names of the formats autoparser ships (tests/formats/test_formats_contract.py runs each).
BUILTIN_FORMATS: tuple[str, ...] = tuple(_BUILTIN)

__all__ = [
    "BUILTIN_FORMATS",
    "FINGERPRINTS",
    "STANDARD",
    "Format",
    "Handler",
    "detect_format",
    "get_handler",
    "register",
    "registered",
]


def register(name: str) -> Callable[[Handler], Handler]:
    """Decorator: register a handler under ``name`` (the value of analysis.handler)."""

    def decorate(handler: Handler) -> Handler:
        _HANDLERS[name] = handler
        return handler

    return decorate


def get_handler(name: str) -> Handler:
    """The handler called ``name``; a ``TemplateError`` naming it when there is none."""
    handler = _HANDLERS.get(name)
    if handler is None:
        raise TemplateError(f"no hand-written format handler named {name!r}")
    return handler


def registered() -> tuple[str, ...]:
    """Names of the handlers registered (the built-in ones, then any added)."""
    return tuple(sorted(_HANDLERS))
