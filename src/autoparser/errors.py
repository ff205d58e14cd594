"""The project's own exception types: every failure a caller can act on is one of these."""

from __future__ import annotations


class AutoparserError(Exception):
    """Base class of every error raised by autoparser."""


class TemplateError(AutoparserError):
    """A chat template cannot be loaded or rendered (syntax, undefined name, raise_exception)."""


class RequestError(AutoparserError, ValueError):
    """A request (messages, tools, tool_choice, response_format...) is invalid or contradictory."""


class GrammarError(AutoparserError):
    """A parser cannot be expressed as a GBNF grammar (for example an untranslatable lookahead)."""


class SchemaError(AutoparserError, ValueError):
    """A JSON schema uses a keyword or construct the grammar converter does not support.

    ``detail`` is the problem alone and ``hint`` what a library caller can do about it
    (``lenient=True``); a face that cannot offer that option (the CLI, the studio) shows
    ``detail`` with advice of its own.
    """

    def __init__(self, detail: str, hint: str = "") -> None:
        super().__init__(detail + hint)
        self.detail = detail
        self.hint = hint

    @staticmethod
    def message_with_hint(exc: BaseException, hint: str) -> str:
        """``str(exc)`` with the hint of a SchemaError it is or wraps (``raise ... from``)
        replaced by ``hint``: what a face that cannot pass ``lenient`` shows instead."""
        text = str(exc)
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, SchemaError) and cause.hint:
                return text.replace(cause.hint, hint)
            cause = cause.__cause__
        return text


class TemplateLimitError(TemplateError):
    """A template went past a render limit (output or value size, steps, time).

    Templates are untrusted code: one that builds gigantic strings or loops for ever is
    stopped with this error, never "supports nothing". ``limit`` names the field of
    :class:`autoparser.template.limits.RenderLimits` that was exceeded.
    """

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class ExportError(AutoparserError):
    """A template's output format cannot be expressed in another engine's format.

    Raised, for example, when a transformers response template is asked for a format whose
    calls are Python expressions or whose message is split into channels: the message says why.
    """


class IntegrationError(AutoparserError):
    """An engine integration cannot run: the engine is missing or outside the tested
    versions, or it gives the integration no chat template to analyse."""


class AnalysisWarning(UserWarning):
    """The analysis of a template did not verify: its parser misreads the template's own renders.

    Emitted once per template by ``ChatTemplate.apply``; ``ChatTemplate.analyze().verification``
    lists the failed checks. Parsing still runs, but tool calls or reasoning may come back wrong.
    """


class Cancelled(AutoparserError):
    """Work was stopped because whoever asked for it no longer wants it (a server's client
    left, a timeout passed): raised at the next checkpoint of a cancelled ``CancelToken``."""


class WorkLimitError(Cancelled):
    """Work went past the CPU time its ``CancelToken`` allows (``cpu_seconds``).

    The bound is the CPU time of the thread doing the work, never wall time: a busy machine
    makes legitimate work slower, not larger, and must not get it refused. ``cpu_seconds``
    is the bound that was exceeded.
    """

    def __init__(self, cpu_seconds: float, message: str) -> None:
        super().__init__(message)
        self.cpu_seconds = cpu_seconds
