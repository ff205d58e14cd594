"""The sandboxed jinja2 environment chat templates run in (same options as transformers).

Templates come from model repositories and are untrusted code, so they only ever run in
jinja2's sandbox. The options, filters and globals mirror what transformers gives a template
(``trim_blocks``, ``lstrip_blocks``, loop controls, ``{% generation %}``, ``tojson`` without
HTML escaping, ``raise_exception``, ``strftime_now``, a plain ``dict`` and an underscore-proof
``namespace``), because the rendered prompt must be byte-identical to theirs.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, NoReturn, SupportsInt, TypeVar, cast

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
import jinja2.runtime
import jinja2.utils
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from autoparser.errors import TemplateLimitError
from autoparser.template.limits import active_budget, budgeted_render

# The largest result of ``**`` (in bits): real templates never come near it; a hostile one
# would otherwise spend minutes on one power. Every other bound is in ``template.limits``.
MAX_EXPONENT_BITS = 4096

_T = TypeVar("_T")
# A filter's arguments (after what jinja2 passes first) and its keyword arguments.
_Args = tuple[object, ...]
_Kwargs = Mapping[str, object]


class TemplateRaisedError(Exception):
    """Raised by a template's own ``raise_exception(...)`` call."""


# Where a render reads the date and time from (``strftime_now``); a renderer takes one as
# an argument (``Renderer(clock=...)``, ``ChatTemplate(clock=...)``), tests included.
Clock = Callable[[], datetime]


def real_clock() -> datetime:
    """The wall clock: what ``strftime_now`` reads unless a render is given another."""
    return datetime.now()


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
    value: object,
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


def _json_default(value: object) -> list[object]:
    # A lazy sequence (``tools | map(attribute='function')``) serialises as the list it yields;
    # transformers raises here, llama.cpp renders the list. Anything else stays an error.
    if isinstance(value, Iterator):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def strftime_now(fmt: str) -> str:
    """Today's date (or time) formatted, read from the wall clock (the default global; a
    render given a clock or a pinned date passes its own, see :func:`clock_variables`)."""
    return real_clock().strftime(fmt)


# ``date_string`` as Llama 3.x templates expect it ("26 Jul 2024").
DATE_STRING_FORMAT = "%d %b %Y"


def fixed_date_variables(now: datetime) -> dict[str, object]:
    """Template variables that pin the date a render sees to ``now``.

    ``strftime_now`` reads ``now`` instead of the real clock and ``date_string`` (the variable
    Llama 3.x templates print, with their own fallback when it is undefined) is set from it.
    Passed as render variables, which take precedence over the environment's globals.
    """

    def strftime_now(fmt: str) -> str:
        return now.strftime(fmt)

    return {"strftime_now": strftime_now, "date_string": now.strftime(DATE_STRING_FORMAT)}


def clock_variables(clock: Clock) -> dict[str, Any]:
    """Template variables that make ``strftime_now`` read ``clock`` (``date_string`` stays
    undefined, as with the wall clock: templates print their own fallback)."""

    def strftime_now(fmt: str) -> str:
        return clock().strftime(fmt)

    return {"strftime_now": strftime_now}


class _TemplateDict:
    """``dict`` for templates: builds dicts without exposing the ``dict`` type itself."""

    def __call__(self, *args: Any, **kwargs: object) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: object) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _check_namespace_name(name: object) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(
            f"a template may not store {name!r} on a namespace (leading underscore)"
        )


class _TemplateNamespace(jinja2.utils.Namespace):
    """``namespace()`` that refuses underscore-prefixed attributes (a route to internals)."""

    def __init__(*args: Any, **kwargs: object) -> None:  # ``self`` in args, like jinja2's
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _check_namespace_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: object) -> None:
        _check_namespace_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)


def _sized(value: object) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _text_size(value: object) -> int:
    return len(value) if isinstance(value, str) else len(str(value))


def _check_result(result: _T, what: str) -> _T:
    size = _sized(result)
    if size is not None:
        active_budget().check_value(size, what)
    return result


def _guarded_mul(left: object, right: object) -> object:
    for seq, count in ((left, right), (right, left)):
        size = _sized(seq)
        if size is not None and isinstance(count, int):
            active_budget().check_value(size * count, "repetition (*)")
    return operator.mul(left, right)


def _guarded_add(left: object, right: object) -> object:
    sizes = (_sized(left), _sized(right))
    if sizes[0] is not None and sizes[1] is not None:
        active_budget().check_value(sizes[0] + sizes[1], "concatenation (+)")
    return operator.add(left, right)


def _guarded_pow(left: object, right: object) -> object:
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and abs(left) > 1
        and right * abs(left).bit_length() > MAX_EXPONENT_BITS
    ):
        raise TemplateLimitError("max_value_size", f"power too large ({left} ** {right})")
    return operator.pow(left, right)


def _concat(parts: tuple[object, ...]) -> str:
    """``a ~ b ~ c``: the joined string, refused before it is built when too large."""
    texts = [str(p) for p in parts]
    active_budget().check_value(sum(map(len, texts)), "string concatenation (~)")
    return "".join(texts)


def _counted(iterable: Iterable[_T]) -> Iterator[_T]:
    """A loop's iterable: every iteration is one step of the render budget."""
    budget = active_budget()
    for item in iterable:
        budget.step()
        yield item


def _output(parts: Iterable[str]) -> str:
    """``environment.concat``: the rendered output (or a macro's), bounded as it grows."""
    budget = active_budget()
    limit = budget.limits.max_output_chars
    out: list[str] = []
    total = 0
    for part in parts:
        total += len(part)
        if total > limit:
            budget.check_output(total)
        out.append(part)
    return "".join(out)


# printf fields (``%-10.3f``, ``%(name)s``, ``%*d``) and str.format fields (``{0:>{w}}``).
_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?[hlL]?[a-zA-Z%]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")
_DIGITS = re.compile(r"\d+")


def _number(digits: str) -> int:
    return int(digits) if len(digits) < 16 else 10**16


def _int_arguments(args: Iterable[object]) -> int:
    return sum(a for a in args if isinstance(a, int) and not isinstance(a, bool) and a > 0)


def _arguments(args: object) -> list[object]:
    if isinstance(args, Mapping):
        return list(args.values())
    return list(args) if isinstance(args, tuple) else [args]


def _check_format_size(fmt: str, values: list[object], printf: bool) -> None:
    """A printf / str.format result is at most the template, plus every field padded to its
    width (or precision) holding the largest argument."""
    largest = max((_text_size(v) for v in values), default=0)
    fields = 0
    padding = 0
    if printf:
        for match in _PRINTF_FIELD.finditer(fmt):
            fields += 1
            for spec in match.groups():
                if spec == "*":
                    padding += _int_arguments(values)
                elif spec:
                    padding += _number(spec)
    else:
        for match in _FORMAT_FIELD.finditer(fmt):
            fields += 1
            spec = match.group().partition(":")[2]
            padding += sum(_number(d) for d in _DIGITS.findall(spec))
            if "{" in spec:
                padding += _int_arguments(values)
    active_budget().check_value(len(fmt) + fields * largest + padding, "formatted string")


def _guarded_mod(left: object, right: object) -> object:
    if isinstance(left, str):
        _check_format_size(left, _arguments(right), printf=True)
    return operator.mod(left, right)


def _check_int_arguments(args: _Args, kwargs: _Kwargs) -> None:
    limit = active_budget().limits.max_value_size
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise TemplateLimitError(
                "max_value_size",
                f"render limit max_value_size={limit:,} exceeded: argument {value:,}",
            )


def _materialized(value: object) -> Collection[object]:
    if isinstance(value, (str, list, tuple, Mapping)):
        return value
    # Anything else is iterated as ``list`` would (a value that is not raises its TypeError).
    return list(cast("Iterable[object]", value))


def _check_join(sep: object, items: Collection[object]) -> None:
    sizes = sum(map(len, map(str, items)))  # C-level: a long list is checked quickly
    active_budget().check_value(sizes + _text_size(sep) * max(len(items) - 1, 0), "join")


def _check_replace(text: str, old: object, new: object, count: object = -1) -> None:
    if not isinstance(old, str) or not isinstance(new, str) or len(new) <= len(old):
        return
    found = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    active_budget().check_value(len(text) + found * (len(new) - len(old)), "replace")


def _check_method(bound: object, name: str, args: _Args, kwargs: _Kwargs) -> _Args:
    """Refuse a str/list method call whose result would be too large (before running it)."""
    budget = active_budget()
    if isinstance(bound, str):
        if name == "join" and args:
            items = _materialized(args[0])
            args = (items, *args[1:])
            _check_join(bound, items)
        elif name == "replace" and len(args) >= 2:
            _check_replace(bound, *args[:3])
        elif name == "expandtabs":
            size = args[0] if args else kwargs.get("tabsize", 8)
            if isinstance(size, int):
                budget.check_value(len(bound) + bound.count("\t") * size, "expandtabs")
        elif name == "translate" and args and isinstance(args[0], Mapping):
            longest = max((_sized(v) or 1 for v in args[0].values()), default=1)
            budget.check_value(len(bound) * longest, "translate")
        elif name in ("format", "format_map"):
            values = [*args, *kwargs.values()]
            if name == "format_map" and args and isinstance(args[0], Mapping):
                values = list(args[0].values())
            _check_format_size(bound, values, printf=False)
    elif isinstance(bound, list) and name == "extend" and args:
        size = _sized(args[0])
        if size is not None:
            budget.check_value(len(bound) + size, "list.extend")
    return args


# Pre-checks of the filters that can build a value much larger than their input; every
# filter's result is checked afterwards too. Each gets the filter's arguments without the
# context / environment jinja2 passes first, and returns them (a lazy iterable made a list).
def _join_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if args and "attribute" not in kwargs and len(args) < 3:
        items = _materialized(args[0])
        args = (items, *args[1:])
        _check_join(args[1] if len(args) > 1 else kwargs.get("d", ""), items)
    return args


def _replace_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if len(args) >= 3:
        _check_replace(str(args[0]), *args[1:3], *args[3:4])
    return args


def _indent_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if args:
        width = args[1] if len(args) > 1 else kwargs.get("width", 4)
        text = str(args[0])
        step = width if isinstance(width, int) else _text_size(width)
        active_budget().check_value(len(text) + (text.count("\n") + 1) * step, "indent")
    return args


def _wordwrap_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if args:
        text = str(args[0])
        width = args[1] if len(args) > 1 else kwargs.get("width", 79)
        wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring") or "\n"
        # ``int`` takes what jinja2's wordwrap does; anything else raises its TypeError here.
        columns = int(cast("str | SupportsInt", width))
        breaks = text.count(" ") + text.count("\n") + len(text) // max(columns, 1) + 1
        active_budget().check_value(len(text) + breaks * _text_size(wrap), "wordwrap")
    return args


def _format_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if args and isinstance(args[0], str):
        _check_format_size(args[0], [*args[1:], *kwargs.values()], printf=True)
    return args


def _sum_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    if args and "attribute" not in kwargs and len(args) < 3:
        items = _materialized(args[0])
        args = (items, *args[1:])
        start = kwargs.get("start", args[2] if len(args) > 2 else 0)
        sizes = [_sized(x) for x in (start, *items)]
        if any(s is not None for s in sizes):
            active_budget().check_value(sum(s or 0 for s in sizes), "sum")
    return args


def _tojson_filter(args: _Args, kwargs: _Kwargs) -> _Args:
    indent = args[2] if len(args) > 2 else kwargs.get("indent")
    if args and isinstance(indent, int) and indent > 1:
        # A generator (``map(...)``) would be used up by the measuring dump: keep its items.
        args = (_materialized(args[0]), *args[1:])
        one = json.dumps(args[0], indent=1, default=_json_default)
        active_budget().check_value(len(one) * indent, "tojson indent")
    return args


_FILTER_CHECKS: dict[str, Callable[[_Args, _Kwargs], _Args]] = {
    "join": _join_filter,
    "replace": _replace_filter,
    "indent": _indent_filter,
    "wordwrap": _wordwrap_filter,
    "format": _format_filter,
    "sum": _sum_filter,
    "tojson": _tojson_filter,
}
# Filters whose integer arguments are widths or counts of the result.
_INT_CHECKED_FILTERS = frozenset({"center", "indent", "format", "truncate", "wordwrap", "tojson"})


def _guard_filter(name: str, original: Callable[..., object]) -> Callable[..., object]:
    check = _FILTER_CHECKS.get(name)
    passed = 1 if hasattr(original, "jinja_pass_arg") else 0  # context / environment first

    def guarded(*args: object, **kwargs: object) -> object:
        head, values = args[:passed], args[passed:]
        if name in _INT_CHECKED_FILTERS:
            _check_int_arguments(values, kwargs)
        if check is not None:
            values = check(values, kwargs)
        return _check_result(original(*head, *values, **kwargs), f"result of filter {name!r}")

    guarded.__name__ = original.__name__
    # Keep jinja2's pass_context / pass_eval_context markers on the wrapper.
    guarded.__dict__.update(getattr(original, "__dict__", {}))
    if hasattr(original, "jinja_pass_arg"):
        guarded.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return guarded


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    words = n * max if isinstance(n, int) and isinstance(max, int) else 0
    active_budget().check_value(words * 12, "lipsum (estimated characters)")
    return str(jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max))


_GUARDED_BINOPS: dict[str, Callable[[object, object], object]] = {
    "*": _guarded_mul,
    "+": _guarded_add,
    "**": _guarded_pow,
    "%": _guarded_mod,
}
_LOOP_FILTER = "autoparser_counted_loop"
_CONCAT_FILTER = "autoparser_guarded_concat"


def _budget_filter(node: jinja2.nodes.Node, name: str) -> jinja2.nodes.Filter:
    return jinja2.nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)


class _GuardedParser(jinja2.parser.Parser):
    """jinja2's parser, routing every loop's iterable and every ``~`` through the render
    budget as it builds them (a filter around each: no second pass over the tree)."""

    def parse_for(self) -> jinja2.nodes.For:
        node = super().parse_for()
        node.iter = _budget_filter(node.iter, _LOOP_FILTER)
        return node

    def parse_concat(self) -> jinja2.nodes.Expr:
        node = super().parse_concat()
        if not isinstance(node, jinja2.nodes.Concat):
            return node  # one operand (a nested ``~`` in it is wrapped already)
        parts = jinja2.nodes.Tuple(node.nodes, "load", lineno=node.lineno)
        return _budget_filter(parts, _CONCAT_FILTER)


class _BudgetedTemplate(jinja2.Template):
    """A compiled template whose every render runs under a fresh :class:`RenderBudget`."""

    def render(self, *args: object, **kwargs: object) -> str:
        with budgeted_render():
            return super().render(*args, **kwargs)


class _GuardedMixin:
    """Bound what a template can build and how long it can run (see ``template.limits``).

    Sizes are checked before ``*``, ``+``, ``~``, ``%``, joins, replaces, paddings and
    formats build their value, results of every call and filter after; every loop iteration
    and call is a step of the render budget, which also watches the clock.
    """

    intercepted_binops = frozenset(_GUARDED_BINOPS)
    template_class = _BudgetedTemplate
    concat = staticmethod(_output)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: object, right: object
    ) -> object:
        return _GUARDED_BINOPS[operator](left, right)

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        environment: jinja2.Environment = self  # type: ignore[assignment]
        return _GuardedParser(environment, source, name, filename).parse()

    def call(
        __self, __context: jinja2.runtime.Context, __obj: object, *args: object, **kwargs: object
    ) -> object:
        active_budget().step()
        if isinstance(__obj, jinja2.runtime.LoopContext) and args:
            # a recursive loop's next level: the iterable jinja2 passes to ``loop(...)``
            args = (_counted(cast("Iterable[object]", args[0])), *args[1:])
        _check_int_arguments(args, kwargs)
        target = getattr(__obj, "__wrapped__", __obj)
        name = getattr(target, "__name__", "")
        args = _check_method(getattr(target, "__self__", None), name, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)  # type: ignore[misc]
        return _check_result(result, f"result of {name or 'call'}")


class ChatSandbox(_GuardedMixin, ImmutableSandboxedEnvironment):
    """The environment transformers renders in: immutable sandbox (no list/dict mutation)."""


class MutableChatSandbox(_GuardedMixin, SandboxedEnvironment):
    """Fallback for templates that mutate lists (``.append``), which transformers refuses.

    Still sandboxed against Python internals; only in-place changes of containers are allowed.
    """


def _configure(env: SandboxedEnvironment) -> SandboxedEnvironment:
    env.filters["tojson"] = _tojson
    for name, original in list(env.filters.items()):
        env.filters[name] = _guard_filter(name, original)
    env.filters[_LOOP_FILTER] = _counted
    env.filters[_CONCAT_FILTER] = _concat
    env.globals["lipsum"] = _lipsum
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


def _made(kind: type[SandboxedEnvironment]) -> SandboxedEnvironment:
    extensions = [GenerationTagExtension, jinja2.ext.loopcontrols]
    return _configure(kind(trim_blocks=True, lstrip_blocks=True, extensions=extensions))


def make_environment() -> SandboxedEnvironment:
    """A fresh immutable sandbox configured exactly like transformers' chat environment."""
    return _made(ChatSandbox)


def make_mutable_environment() -> SandboxedEnvironment:
    """A sandbox that additionally lets templates mutate lists and dicts."""
    return _made(MutableChatSandbox)


@functools.cache
def sandbox(mutable: bool) -> SandboxedEnvironment:
    """The environment every template is compiled in and run by (one of each kind: an
    environment holds only configuration, a template never changes it)."""
    return make_mutable_environment() if mutable else make_environment()
