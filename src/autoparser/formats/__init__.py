"""The formats, by name: the generated one and the few hand-written ones.

A format is a ``Format``: a name, a builder ``(ctx: BuildContext) -> ParserDefinition``,
and the answers the layers above need about it (they ask the ``Format``, never compare
names: ``format_of(analysis)``). ``TemplateAnalysis.handler`` names the one to use (the
analysis sets it with ``detect_format``, from the fingerprints in
``analysis/fingerprints.py``), ``STANDARD`` (``""``) naming the generated
``generate.assembly.build_standard``. A hand-written handler builds its parsers with the PEG
library and the helpers of ``autoparser.generate`` (context, reasoning, json_calls,
tagged_calls, sections, assembly), tags nodes with the vocabulary of ``autoparser.tags`` and
returns a ``ParserDefinition``; streaming, deltas, truncation and the grammar then work as
for generated formats.

The handlers are listed below, explicitly: importing a module registers nothing. This
package sits above ``generate`` (its handlers build with it) and below ``params``, which
dispatches through ``format_of``. To add a format: a fingerprint in
``analysis/fingerprints.py``, ``formats/<name>.py`` with its ``build``, and a line in
``_BUILTIN``. ``register``/``add`` add one at run time (an extension, or a test's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from autoparser.analysis.fingerprints import FINGERPRINTS, STANDARD, detect_format
from autoparser.analysis.model import TemplateAnalysis
from autoparser.definition import ParserDefinition
from autoparser.errors import TemplateError
from autoparser.formats import functionary_v3_2, gemma4, harmony
from autoparser.generate.assembly import build_standard
from autoparser.generate.context import BuildContext


class Builder(Protocol):
    """What builds a format's parsers from a request's context (a ``ParserDefinition``:
    the lenient parser, the strict grammar parser, triggers, markers)."""

    def __call__(self, ctx: BuildContext, /) -> ParserDefinition: ...


# Why a transformers response template cannot express a hand-written format.
_NOT_EXPORTABLE = (
    "the format is the hand-written {name!r} one, whose structure (channels, nested "
    "sections or special value syntax) a response template cannot express"
)


@dataclasses.dataclass(frozen=True)
class Format:
    """A format: its name, its builder, and what the layers above ask about it instead of
    branching on the name. Every built-in one passes tests/formats/test_formats_contract.py.

    ``call_openers_listed``: the build context lists every place a call can start (the
    generated format's markers come from the analysis); a format with markers of its own
    does not, so text without a reasoning opener is never waited on as reasoning.
    ``calls_analysed``: whether the template's calls are the analysis' tool format (a
    hand-written format writes calls the analysis may not have found).
    ``export_refusal``: why a response template cannot express the format (None: it can).
    """

    name: str
    build: Builder
    call_openers_listed: bool = False
    calls_analysed: bool = False
    export_refusal: str | None = None

    def __call__(self, ctx: BuildContext, /) -> ParserDefinition:
        return self.build(ctx)

    @property
    def hand_written(self) -> bool:
        """Is this one of the hand-written formats (not the generated one)?"""
        return self.name != STANDARD

    @classmethod
    def hand_written_one(cls, name: str, build: Builder) -> Format:
        """A hand-written format with the cautious answers (markers of its own, calls the
        analysis does not describe, no response template)."""
        return cls(name, build, export_refusal=_NOT_EXPORTABLE.format(name=name))


Handler = Format

GENERATED = Format(STANDARD, build_standard, call_openers_listed=True, calls_analysed=True)
_BUILTIN: dict[str, Format] = {
    STANDARD: GENERATED,
    "harmony": Format.hand_written_one("harmony", harmony.build),
    "functionary_v3_2": Format.hand_written_one("functionary_v3_2", functionary_v3_2.build),
    "gemma4": Format.hand_written_one("gemma4", gemma4.build),
}
_HANDLERS: dict[str, Format] = dict(_BUILTIN)
# The names of the formats autoparser ships (tests/formats/test_formats_contract.py runs each).
BUILTIN_FORMATS: tuple[str, ...] = tuple(_BUILTIN)

__all__ = [
    "BUILTIN_FORMATS",
    "FINGERPRINTS",
    "GENERATED",
    "STANDARD",
    "Builder",
    "Format",
    "Handler",
    "detect_format",
    "format_of",
    "get_handler",
    "register",
    "registered",
]


def register(name: str) -> Callable[[Builder], Builder]:
    """Decorator: register a builder as the hand-written format ``name`` (the value of
    analysis.handler), with the cautious answers of ``Format.hand_written_one``; to answer
    otherwise, add a ``Format`` with ``add``."""

    def decorate(build: Builder) -> Builder:
        add(Format.hand_written_one(name, build))
        return build

    return decorate


def add(fmt: Format) -> Format:
    """Register ``fmt`` under its name (an extension's format, or a test's)."""
    _HANDLERS[fmt.name] = fmt
    return fmt


def get_handler(name: str) -> Format:
    """The format called ``name``; a ``TemplateError`` naming it when there is none."""
    found = _HANDLERS.get(name)
    if found is None:
        raise TemplateError(f"no hand-written format handler named {name!r}")
    return found


def format_of(analysis: TemplateAnalysis) -> Format:
    """The format an analysed template writes (the one its analysis names)."""
    return get_handler(analysis.handler)


def registered() -> tuple[str, ...]:
    """Names of the handlers registered (the built-in ones, then any added)."""
    return tuple(sorted(_HANDLERS))
