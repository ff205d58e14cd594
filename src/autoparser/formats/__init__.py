"""Registry of hand-written formats, for templates the analysis cannot express.

A handler is a function ``(ctx: BuildContext) -> ParserDefinition``, registered under a
name; ``TemplateAnalysis.handler`` names the handler to use (the analysis sets it with
``detect_format``, from the fingerprints below). A handler builds its parsers with the
PEG library and the helpers of ``autoparser.generate`` (context, reasoning, json_calls,
tagged_calls, sections, assembly), tags nodes with the
vocabulary of ``autoparser.tags`` and returns a ``ParserDefinition``; streaming, deltas,
truncation and the grammar then work as for generated formats. Handlers live in
``autoparser/formats/<name>.py`` and register themselves on import; ``get_handler``
imports the module of that name on first use.

This module stays below ``analysis`` and ``generate`` (it imports neither): the analysis
needs only the fingerprints, and the builders, which sit above the generate primitives,
are imported on demand. To add a format: a fingerprint here and ``formats/<name>.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from autoparser.errors import TemplateError

if TYPE_CHECKING:
    from autoparser.definition import ParserDefinition
    from autoparser.generate.context import BuildContext

Handler = Callable[["BuildContext"], "ParserDefinition"]

# The handler name of the generated format (``generate.assembly.build_standard``), used
# when the analysis names no hand-written one: every format is dispatched through here.
STANDARD = ""

_HANDLERS: dict[str, Handler] = {}

# Hand-written formats, by fingerprint: (handler name, substring of the template source).
FINGERPRINTS: tuple[tuple[str, str], ...] = (
    # gpt-oss "harmony": <|start|>assistant<|channel|>analysis<|message|>...; tool calls are
    # addressed by "to=functions.f" in the header, so no marker brackets the call.
    ("harmony", "<|channel|>"),
    # functionary v3.2: ">>>recipient\n" switches between "all" (text) and a function name;
    # the name is itself the delimiter, which the tag families cannot express.
    ("functionary_v3_2", ">>>${recipient}"),
    # gemma-4: call:NAME{key:<|"|>text<|"|>,n:3} -- bare keys, <|"|>-quoted strings, None:
    # the arguments are not JSON, so no generated format can express them.
    ("gemma4", "<|tool_call>call:"),
)


def detect_format(source: str) -> str:
    """The hand-written format whose fingerprint the template source holds ("" if none)."""
    for name, fingerprint in FINGERPRINTS:
        if fingerprint in source:
            return name
    return ""


def register(name: str) -> Callable[[Handler], Handler]:
    """Decorator: register a handler under ``name`` (the value of analysis.handler)."""

    def decorate(handler: Handler) -> Handler:
        _HANDLERS[name] = handler
        return handler

    return decorate


def get_handler(name: str) -> Handler:
    """The handler called ``name``, importing ``autoparser.formats.<name>`` if needed."""
    if name not in _HANDLERS and name != STANDARD:
        module = name.replace("-", "_")
        if module.isidentifier():
            try:
                importlib.import_module(f"autoparser.formats.{module}")
            except ModuleNotFoundError as exc:
                if exc.name != f"autoparser.formats.{module}":
                    raise
    if name not in _HANDLERS:
        raise TemplateError(f"no hand-written format handler named {name!r}")
    return _HANDLERS[name]


def registered() -> tuple[str, ...]:
    """Names of the handlers registered so far."""
    return tuple(sorted(_HANDLERS))
