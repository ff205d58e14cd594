"""Renderer: one chat template text plus its special tokens, rendered as transformers does.

Plain data in, prompt text out: the renderer knows nothing of variants, polyfills or the
request; the public :class:`autoparser.ChatTemplate` composes those on top of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType

import jinja2
from jinja2.exceptions import SecurityError

from autoparser.errors import AutoparserError, TemplateError, TemplateLimitError
from autoparser.template.compiled import TEMPLATE_FILENAME, compile_source
from autoparser.template.conventions import (
    CONVENTIONAL_NAMES,
    conventional_values,
    undefined_name,
)
from autoparser.template.environment import (
    Clock,
    TemplateRaisedError,
    clock_variables,
    fixed_date_variables,
)
from autoparser.template.messages import plain_data, transformers_messages

# A refusal of the immutable sandbox to change a container in place (``list.append`` ...).
_MUTATION_REFUSED = re.compile(r"access to attribute '\w+' of '(?:list|dict|set|deque)' object")


def _template_line(tb: TracebackType | None) -> int | None:
    """The template line of the innermost frame jinja2 attributed to template code."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TEMPLATE_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class Renderer:
    """One compiled chat template and the special tokens it is rendered with.

    ``code_cache``: a directory where the compiled code is kept across processes (see
    :mod:`autoparser.template.compiled`); None compiles in memory only.
    """

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        name: str = "<template>",
        special_tokens: Mapping[str, str] | None = None,
        now: datetime | None = None,
        clock: Clock | None = None,
        code_cache: Path | None = None,
    ) -> None:
        self.source = source
        # A fixed date for strftime_now/date_string (None: read ``clock``), see render().
        self.now = now
        # Where strftime_now reads the date when ``now`` is not pinned (None: the wall clock).
        self.clock = clock
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name
        # Other named tokens (unk_token, pad_token...) passed to the template, as transformers does.
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        try:
            self._compilation = compile_source(source, code_cache)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"{self.name}: syntax error at line {exc.lineno}: {exc.message}"
            ) from exc
        self._compiled = self._compilation.template
        self._mutates = False

    def __repr__(self) -> str:
        return f"Renderer(name={self.name!r})"

    def _fail(self, exc: BaseException, what: str) -> TemplateError:
        line = getattr(exc, "lineno", None) or _template_line(exc.__traceback__)
        where = f" at line {line}" if line else ""
        detail = str(exc) or type(exc).__name__
        if not isinstance(exc, (jinja2.TemplateError, TemplateRaisedError)):
            detail = f"{type(exc).__name__}: {detail}"
        return TemplateError(f"{self.name}: {what}{where}: {detail}")

    def _run(self, compiled: jinja2.Template, variables: dict[str, object]) -> str:
        try:
            return compiled.render(**variables)
        except TemplateRaisedError as exc:
            raise self._fail(exc, "template raised an exception") from exc
        except TemplateLimitError as exc:
            line = _template_line(exc.__traceback__)
            where = f" at line {line}" if line else ""
            raise TemplateLimitError(exc.limit, f"{self.name}{where}: {exc}") from exc
        except AutoparserError:
            raise
        except RecursionError as exc:
            raise self._fail(exc, "render failed (recursion too deep)") from exc
        except Exception as exc:
            raise self._fail(exc, "render failed") from exc

    def render_raw(self, context: Mapping[str, object]) -> str:
        """Render with exactly the given variables (no normalisation, no polyfills).

        ``bos_token`` and ``eos_token`` default to this template's; ``context`` overrides them.
        A template that mutates a list, which transformers' immutable sandbox refuses, is
        rendered again in a sandbox that allows it (on a private copy of the variables). A
        template that fails because it reads a conventional variable nobody passed (the
        tools as ``functions`` text, a ``datetime``...) is rendered again with the
        conventional values (see :mod:`autoparser.template.conventions`).
        """
        variables = {
            **(clock_variables(self.clock) if self.clock is not None else {}),
            **self.special_tokens,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **context,
        }
        try:
            return self._render_variables(variables)
        except TemplateError as exc:
            supplied = self._conventional(exc, variables)
            if not supplied:
                raise
        return self._render_variables({**variables, **supplied})

    def _conventional(
        self, exc: TemplateError, variables: Mapping[str, object]
    ) -> dict[str, object]:
        """The conventional values to render again with, when ``exc`` says the template
        read one of them undefined (none otherwise)."""
        reads = self.conventional_variables
        name = undefined_name(exc.__cause__)
        if name not in reads or name in variables:
            return {}
        return conventional_values(reads, variables)

    @property
    def conventional_variables(self) -> frozenset[str]:
        """The conventional variables this template reads (supplied when it needs them)."""
        return self._compilation.reads & CONVENTIONAL_NAMES

    def _render_variables(self, variables: dict[str, object]) -> str:
        if not self._mutates:
            try:
                return self._run(self._compiled, variables)
            except TemplateError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, SecurityError) and _MUTATION_REFUSED.search(str(cause))):
                    raise
            self._mutates = True  # later renders go straight to the mutable sandbox
        return self._run(self._compilation.mutable_template, plain_data(variables))

    def render(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[Mapping[str, object]] | None = None,
        add_generation_prompt: bool = True,
        *,
        now: datetime | None = None,
        **template_kwargs: object,
    ) -> str:
        """Render a conversation exactly as transformers' ``apply_chat_template`` would.

        No polyfills here: callers adapt the messages first when they want them. ``now`` (or
        this renderer's own ``now``) pins the date the template sees; an explicit
        ``date_string`` in ``template_kwargs`` still wins.
        """
        fixed = self.now if now is None else now
        context: dict[str, object] = {
            "messages": transformers_messages([dict(m) for m in messages]),
            "tools": plain_data(None if tools is None else [dict(t) for t in tools]),
            "documents": None,
            "add_generation_prompt": add_generation_prompt,
            **(fixed_date_variables(fixed) if fixed is not None else {}),
            **plain_data(template_kwargs),
        }
        return self.render_raw(context)
