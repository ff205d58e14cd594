"""Registry of hand-written formats, for templates the analysis cannot express.

A handler is a function ``(ctx: BuildContext) -> ParserDefinition``, registered under a
name; ``TemplateAnalysis.handler`` names the handler to use (the analysis sets it from a
fingerprint of the template source). A handler builds its parsers with the PEG library and
the helpers of ``autoparser.generate.builders`` and tags nodes with the vocabulary of
``autoparser.generate.tags``; streaming, deltas, truncation and the grammar then work as
for generated formats. Handlers live in ``autoparser/formats/<name>.py`` and register
themselves on import; ``get_handler`` imports the module of that name on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from autoparser.errors import TemplateError

if TYPE_CHECKING:
    from autoparser.definition import ParserDefinition
    from autoparser.generate.builders import BuildContext

Handler = Callable[["BuildContext"], "ParserDefinition"]

_HANDLERS: dict[str, Handler] = {}


def register(name: str) -> Callable[[Handler], Handler]:
    """Decorator: register a handler under ``name`` (the value of analysis.handler)."""

    def decorate(handler: Handler) -> Handler:
        _HANDLERS[name] = handler
        return handler

    return decorate


def get_handler(name: str) -> Handler:
    """The handler called ``name``, importing ``autoparser.formats.<name>`` if needed."""
    if name not in _HANDLERS:
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
