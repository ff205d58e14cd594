"""The one place the server's limits and timeouts live, and the checks every endpoint runs
on a request body before anything else reads it.

Every route (chat completions, Responses, Messages) takes its body through
``read_body`` and its options through ``options.SamplingOptions``, so the same bounds hold
whatever the wire format: a client's mistake is a 400/413 naming the field, never a 5xx.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import NoReturn

# Defaults, documented in docs/serving.md ("Limits").
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_TOOLS = 2048
MAX_SCHEMA_BYTES = 256 * 1024
MAX_MESSAGES = 2048
MAX_SCHEMA_COUNT = 10_000  # largest minLength/maxItems/... a tool schema may ask for
MAX_CONCURRENT = 128
MAX_QUEUED = 1024  # requests waiting for one of the max_concurrent turns
QUEUE_TIMEOUT = 60.0  # seconds a request may wait for its turn
MAX_CHOICES = 16  # most choices (``n``) one request may ask for: each is a generation
MAX_TOP_LOGPROBS = 20  # most alternatives per token (``top_logprobs``), as OpenAI's bound
CONNECT_TIMEOUT = 10.0
FIRST_BYTE_TIMEOUT = 300.0
IDLE_TIMEOUT = 60.0
PREPARE_TIMEOUT = 30.0
KEEPALIVE_INTERVAL = 15.0
GRACE_PERIOD = 10.0


class InvalidRequest(Exception):
    """A request the server refuses (HTTP 400 unless ``status`` says 413), naming the field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status


class SystemMessageRefused(InvalidRequest):
    """The template refuses a system message after the first turn, even folded into a user
    turn: routes word this as their API does (Anthropic's clients act on its wording)."""


@dataclasses.dataclass(frozen=True)
class Degradation:
    """Something a request asked for that is served in a lesser form instead of refused:
    ``what`` (the metric's label: schema, media, hosted_tool, tool_grammar,
    system_message), ``label`` (a schema's keyword; else ``what``) and ``detail`` (the log
    line, naming the field)."""

    what: str
    label: str
    detail: str


class Unavailable(Exception):
    """The server cannot answer now (HTTP 503 with ``Retry-After``): the engine is not
    known yet, or it is down."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Bounds on one request's size and work, the server's concurrency, and every timeout
    (seconds). ``max_concurrent`` requests run at once; up to ``max_queued`` more wait for a
    turn, in order, each at most ``queue_timeout`` seconds (an engine queues what it cannot
    run at once too: a front end may not refuse what its engine would serve); beyond the
    queue, or past the wait, 503 with ``Retry-After``. ``max_queued`` may be 0 (no queue)."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_depth: int = MAX_DEPTH
    max_tools: int = MAX_TOOLS
    max_schema_bytes: int = MAX_SCHEMA_BYTES
    max_messages: int = MAX_MESSAGES
    max_schema_count: int = MAX_SCHEMA_COUNT
    max_concurrent: int = MAX_CONCURRENT
    max_queued: int = MAX_QUEUED
    queue_timeout: float = QUEUE_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    first_byte_timeout: float = FIRST_BYTE_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    prepare_timeout: float = PREPARE_TIMEOUT
    keepalive_interval: float = KEEPALIVE_INTERVAL
    grace_period: float = GRACE_PERIOD

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            low = 0 if field.name == "max_queued" else 0.0
            ok = isinstance(value, (int, float)) and math.isfinite(value)
            if not ok or value < low or (value == 0 and field.name != "max_queued"):
                what = "a number >= 0" if field.name == "max_queued" else "a positive number"
                raise ValueError(f"{field.name} must be {what}, got {value!r}")


def _no_constant(name: str) -> NoReturn:
    raise InvalidRequest(f"the request body is not valid JSON: {name} is not a JSON number")


def parse_json(raw: bytes) -> object:
    """The body as JSON; NaN and Infinity (which Python's json accepts) are refused, and so
    is nesting deep enough to exhaust the parser."""
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except RecursionError as exc:
        raise InvalidRequest("the request body is nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, InvalidRequest):
            raise
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from exc


# A \u escape of a UTF-16 surrogate: the only way a lone one gets into a body (UTF-8 cannot
# encode one, and the decoder refuses it).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def check_text(value: object, raw: bytes) -> None:
    """InvalidRequest naming the field when a string of the body (``value``, decoded from
    ``raw``) holds a lone surrogate (``"\\ud800"``): no text, so no engine takes it, and the
    client's mistake must not come back as the engine's 502. Pairs are one character and
    pass; the walk runs only when ``raw`` has a surrogate escape at all."""
    if not _SURROGATE_ESCAPE.search(raw):
        return
    level: list[tuple[str, object]] = [("", value)]
    while level:
        below: list[tuple[str, object]] = []
        for where, node in level:
            if isinstance(node, str):
                _refuse_surrogate(where, node, where)
            elif isinstance(node, dict):
                for key, item in node.items():
                    _refuse_surrogate(f"a key of {where or 'the body'}", key, where or None)
                    below.append((f"{where}.{key}".lstrip("."), item))
            elif isinstance(node, list):
                below += [(f"{where}[{i}]", item) for i, item in enumerate(node)]
        level = below


def _refuse_surrogate(where: str, text: str, param: str | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        point = ord(text[exc.start])
        raise InvalidRequest(
            f"{where}: holds a lone surrogate (U+{point:04X}, character {exc.start}), which "
            "is not text; send the character itself, or both halves of its \\u pair",
            param,
        ) from None


def check_depth(value: object, limit: int, depth: int = 1) -> None:
    """InvalidRequest when containers nest deeper than ``limit`` (``value`` sitting at
    ``depth``), for JSON as ``json.loads`` gives it. Level by level, without recursion: the
    library's walks over schemas and messages are recursive."""
    level = [value]
    while level:
        below: list[object] = []
        for node in level:
            if type(node) is dict:
                below += node.values()
            elif type(node) is list:
                below += node
            else:
                continue
            if depth > limit:
                raise _too_deep(limit)
        level = below
        depth += 1


def _too_deep(limit: int) -> InvalidRequest:
    return InvalidRequest(f"the request body nests deeper than {limit} levels", None, 400)


def check_tools(tools: object, limits: Limits, depth: int = 2) -> None:
    """The number of tools, and each tool's nesting (``tools`` sitting at ``depth`` of the
    body) and size. Count keywords above ``max_schema_count`` are the schema loosening's
    (``Chat.prepare``): left open, or refused naming their pointer with strict schemas."""
    if not isinstance(tools, list):
        check_depth(tools, limits.max_depth, depth)
        return
    if len(tools) > limits.max_tools:
        raise InvalidRequest(
            f"tools: {len(tools)} tools, more than the server's limit of {limits.max_tools}",
            "tools",
        )
    if depth > limits.max_depth:  # the list itself
        raise _too_deep(limits.max_depth)
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        check_depth(tool, limits.max_depth, depth + 1)
        size = len(json.dumps(tool, ensure_ascii=False))
        if size > limits.max_schema_bytes:
            raise InvalidRequest(
                f"{where}: the tool definition is {size} bytes, more than the server's "
                f"limit of {limits.max_schema_bytes}",
                where,
            )


def read_body(raw: bytes, limits: Limits) -> Mapping[str, object]:
    """The JSON object of a request body, within the limits."""
    if len(raw) > limits.max_body_bytes:
        raise InvalidRequest(
            f"the request body is {len(raw)} bytes, more than the server's limit of "
            f"{limits.max_body_bytes}",
            None,
            413,
        )
    body = parse_json(raw)
    if not isinstance(body, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    tools = body.get("tools")
    check_depth({k: v for k, v in body.items() if k != "tools"}, limits.max_depth)
    for name in ("messages", "input"):  # chat and Messages; the Responses API's items
        items = body.get(name)
        if isinstance(items, list) and len(items) > limits.max_messages:
            raise InvalidRequest(
                f"{name}: {len(items)} messages, more than the server's limit of "
                f"{limits.max_messages}",
                name,
            )
    if tools is not None:
        check_tools(tools, limits)
    check_text(body, raw)
    return body
