"""The sandboxed jinja2 environment chat templates run in (same options as transformers).

Templates come from model repositories and are untrusted code, so they only ever run in
jinja2's sandbox. The options, filters and globals mirror what transformers gives a template
(``trim_blocks``, ``lstrip_blocks``, loop controls, ``{% generation %}``, ``tojson`` without
HTML escaping, ``raise_exception``, ``strftime_now``, a plain ``dict`` and an underscore-proof
``namespace``), because the rendered prompt must be byte-identical to theirs.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, NoReturn

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
import jinja2.utils
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

# Largest string or list a template may build with ``*`` and the largest exponent of ``**``:
# real templates never come near these; hostile ones would otherwise exhaust memory or CPU.
MAX_REPEAT_SIZE = 10_000_000
MAX_EXPONENT_BITS = 4096


class TemplateRaisedError(Exception):
    """Raised by a template's own ``raise_exception(...)`` call."""


def _now() -> datetime:
    return datetime.now()


# The clock ``strftime_now`` reads; tests replace it to make renders reproducible.
clock: Callable[[], datetime] = _now


class GenerationTagExtension(jinja2.ext.Extension):
    """Accept ``{% generation %}...{% endgeneration %}`` and render its body unchanged."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads this class attribute)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Callable[[], str]) -> str:
        return caller()


def _raise_exception(message: str) -> NoReturn:
    raise TemplateRaisedError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # jinja2's own tojson HTML-escapes; chat templates expect plain json.dumps output.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
        default=_json_default,
    )


def _json_default(value: Any) -> Any:
    # A lazy sequence (``tools | map(attribute='function')``) serialises as the list it yields;
    # transformers raises here, llama.cpp renders the list. Anything else stays an error.
    if isinstance(value, Iterator):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _strftime_now(fmt: str) -> str:
    return clock().strftime(fmt)


# ``date_string`` as Llama 3.x templates expect it ("26 Jul 2024").
DATE_STRING_FORMAT = "%d %b %Y"


def fixed_date_variables(now: datetime) -> dict[str, Any]:
    """Template variables that pin the date a render sees to ``now``.

    ``strftime_now`` reads ``now`` instead of the real clock and ``date_string`` (the variable
    Llama 3.x templates print, with their own fallback when it is undefined) is set from it.
    Passed as render variables, which take precedence over the environment's globals.
    """

    def strftime_now(fmt: str) -> str:
        return now.strftime(fmt)

    return {"strftime_now": strftime_now, "date_string": now.strftime(DATE_STRING_FORMAT)}


class _TemplateDict:
    """``dict`` for templates: builds dicts without exposing the ``dict`` type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _check_namespace_name(name: object) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(
            f"a template may not store {name!r} on a namespace (leading underscore)"
        )


class _TemplateNamespace(jinja2.utils.Namespace):
    """``namespace()`` that refuses underscore-prefixed attributes (a route to internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # ``self`` in args, like jinja2's
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _check_namespace_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_namespace_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)


def _sized(value: object) -> int | None:
    return len(value) if isinstance(value, (str, list, tuple)) else None


def _guarded_mul(left: Any, right: Any) -> Any:
    for seq, count in ((left, right), (right, left)):
        size = _sized(seq)
        if size is not None and isinstance(count, int) and size * count > MAX_REPEAT_SIZE:
            raise SecurityError(f"repetition too large ({size} x {count} > {MAX_REPEAT_SIZE})")
    return operator.mul(left, right)


def _guarded_pow(left: Any, right: Any) -> Any:
    ints = isinstance(left, int) and isinstance(right, int)
    if ints and abs(left) > 1 and right * abs(left).bit_length() > MAX_EXPONENT_BITS:
        raise SecurityError(f"power too large ({left} ** {right})")
    return operator.pow(left, right)


# A printf-style field with a huge width or precision, or one taken from the arguments.
_HUGE_PRINTF_FIELD = re.compile(r"%[-#0 +]*(?:\*|\d{8,})|%[-#0 +]*\d*\.(?:\*|\d{8,})")
# A str.format field with a huge width or precision (``{:>999999999}``).
_HUGE_FORMAT_FIELD = re.compile(r"\{[^{}]*:[^{}]*\d{8,}[^{}]*\}")


def _check_printf(template: object) -> None:
    if isinstance(template, str) and _HUGE_PRINTF_FIELD.search(template):
        raise SecurityError("printf-style field width or precision too large (or '*')")


def _guarded_mod(left: Any, right: Any) -> Any:
    _check_printf(left)
    return operator.mod(left, right)


def _check_int_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_REPEAT_SIZE:
            raise SecurityError(f"argument {value} too large (over {MAX_REPEAT_SIZE})")


_GUARDED_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "*": _guarded_mul,
    "**": _guarded_pow,
    "%": _guarded_mod,
}


class _GuardedMixin:
    """Refuse the few operations that let a template build gigantic values.

    ``*`` and ``**`` on huge operands, printf/format fields with huge widths, and huge integer
    arguments to calls (``'x'.ljust(10**9)``). Real templates never come near these limits.
    """

    intercepted_binops = frozenset(_GUARDED_BINOPS)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        return _GUARDED_BINOPS[operator](left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _check_int_arguments(args, kwargs)
        target = getattr(__obj, "__wrapped__", __obj)
        bound = getattr(target, "__self__", None)
        if isinstance(bound, str) and _HUGE_FORMAT_FIELD.search(bound):
            raise SecurityError("format field width or precision too large")
        return super().call(__context, __obj, *args, **kwargs)  # type: ignore[misc]


def _guard_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check_int_arguments(args, kwargs)
        if name == "format" and args:
            _check_printf(args[0])
        return original(*args, **kwargs)

    guarded.__name__ = original.__name__
    # Keep jinja2's pass_context / pass_eval_context markers on the wrapper.
    guarded.__dict__.update(original.__dict__)
    if hasattr(original, "jinja_pass_arg"):
        guarded.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return guarded


class ChatSandbox(_GuardedMixin, ImmutableSandboxedEnvironment):
    """The environment transformers renders in: immutable sandbox (no list/dict mutation)."""


class MutableChatSandbox(_GuardedMixin, SandboxedEnvironment):
    """Fallback for templates that mutate lists (``.append``), which transformers refuses.

    Still sandboxed against Python internals; only in-place changes of containers are allowed.
    """


def _configure(env: SandboxedEnvironment) -> SandboxedEnvironment:
    for name in ("center", "indent", "format", "truncate", "wordwrap"):
        env.filters[name] = _guard_filter(name, env.filters[name])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


def _options() -> dict[str, Any]:
    return {
        "trim_blocks": True,
        "lstrip_blocks": True,
        "extensions": [GenerationTagExtension, jinja2.ext.loopcontrols],
    }


def make_environment() -> SandboxedEnvironment:
    """A fresh immutable sandbox configured exactly like transformers' chat environment."""
    return _configure(ChatSandbox(**_options()))


def make_mutable_environment() -> SandboxedEnvironment:
    """A sandbox that additionally lets templates mutate lists and dicts."""
    return _configure(MutableChatSandbox(**_options()))
