"""The ``serve`` subcommand's arguments and entry point (imports aiohttp only when run)."""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from autoparser.serve import limits as lim
from autoparser.serve.engines import KIND_CHOICES

_P = TypeVar("_P", bound=argparse.ArgumentParser)

# flag -> (Limits field, type, help); defaults come from limits.py (documented in
# docs/serving.md).
LIMIT_FLAGS: dict[str, tuple[str, type, str]] = {
    "--max-body-bytes": ("max_body_bytes", int, "largest request body (413 above)"),
    "--max-depth": ("max_depth", int, "deepest JSON nesting of a request body"),
    "--max-tools": ("max_tools", int, "most tools in one request"),
    "--max-schema-bytes": ("max_schema_bytes", int, "largest tool definition, as JSON"),
    "--max-messages": ("max_messages", int, "most messages in one request"),
    "--max-schema-count": (
        "max_schema_count",
        int,
        "largest minLength/maxLength/minItems/... in a tool schema",
    ),
    "--max-concurrent": ("max_concurrent", int, "requests answered at once (more wait)"),
    "--max-queued": (
        "max_queued",
        int,
        "requests waiting for a turn beyond --max-concurrent (503 above; 0: no queue)",
    ),
    "--queue-timeout": ("queue_timeout", float, "seconds a request may wait for its turn"),
    "--connect-timeout": ("connect_timeout", float, "seconds to connect to the engine"),
    "--first-byte-timeout": (
        "first_byte_timeout",
        float,
        "seconds until the engine answers (for a whole answer: until it is generated)",
    ),
    "--idle-timeout": ("idle_timeout", float, "seconds the engine may be silent mid-stream"),
    "--prepare-timeout": (
        "prepare_timeout",
        float,
        "CPU seconds to render the prompt and build the grammar (not wall time)",
    ),
    "--keepalive-interval": (
        "keepalive_interval",
        float,
        "seconds between SSE keep-alive comments while the engine has sent nothing",
    ),
    "--grace-period": ("grace_period", float, "seconds SIGTERM waits for requests to end"),
}


def register(subparsers: argparse._SubParsersAction[_P]) -> _P:
    """Add ``autoparser serve`` to the CLI's subparsers."""
    serve = subparsers.add_parser(
        "serve",
        help="OpenAI- and Anthropic-compatible chat server in front of a completion engine",
        description=(
            "Serve /v1/chat/completions (tools, reasoning, response_format, streaming), "
            "OpenAI's /v1/responses and Anthropic's /v1/messages in front of llama.cpp's "
            "/completion or any OpenAI-style /v1/completions. "
            "See docs/serving.md for operating it."
        ),
    )
    serve.add_argument(
        "--config",
        help="TOML file of settings, keys named as the flags (max_concurrent = 64); "
        "flags beat AUTOPARSER_* environment variables, which beat the file",
    )
    serve.add_argument("--backend", help="the engine's base URL (required)")
    serve.add_argument(
        "--backend-kind",
        choices=KIND_CHOICES,
        default="auto",
        help="auto (default): detected (llama.cpp by GET /props, vllm or sglang by the owner "
        "GET /v1/models names), else openai, any OpenAI-style /v1/completions",
    )
    serve.add_argument(
        "--template",
        help="chat template (.jinja, tokenizer_config.json, directory, .gguf, or a Hub model "
        "id such as Qwen/Qwen3-0.6B with the hub extra); default: the llama.cpp backend's "
        "own (GET /props)",
    )
    serve.add_argument("--model", help="model name to report and send (default: the backend's)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes answering on the port, each a full serve on its own core (default 1; "
        "limits such as --max-concurrent apply per worker; /metrics sums them all)",
    )
    serve.add_argument(
        "--tool-call-deltas",
        choices=["whole", "incremental"],
        default=None,
        help="stream each tool call in one delta once it is complete and valid (whole, "
        "the library's default), or its name and arguments as they are generated "
        "(incremental: a call that then breaks cannot be taken back)",
    )
    serve.add_argument(
        "--reasoning-field",
        choices=["reasoning", "reasoning_content", "both"],
        default="reasoning",
        help="the message field reasoning is returned under (default: reasoning, vLLM's "
        "current name); both names are accepted on input",
    )
    serve.add_argument(
        "--plain-user-text",
        choices=["on", "off"],
        default="on",
        help="tokenize message contents as plain text, so user text never becomes control "
        "tokens (default on; llama.cpp, vLLM and SGLang engines: the prompt goes as token "
        "ids; an engine that cannot tokenize gets the text, and the log says so)",
    )
    serve.add_argument(
        "--strict-schemas",
        action="store_true",
        help="refuse (400, naming the JSON pointer) a tool schema keyword or bound the "
        "grammar cannot express; default: leave it out of the grammar at that node, with a "
        "log line and the autoparser_schema_degraded_total metric",
    )
    serve.add_argument(
        "--media",
        choices=["auto", "placeholder", "reject"],
        default="auto",
        help="images and documents in messages and tool results: images sent to an engine "
        "that takes them (llama.cpp with a multimodal projector) and the rest replaced by a "
        "short text placeholder naming what was left out (auto, the default); always a "
        "placeholder; or refused with a 400",
    )
    serve.add_argument("--api-key", action="append", default=[], help="accepted Bearer key")
    serve.add_argument("--api-key-file", help="file of accepted Bearer keys, one per line")
    serve.add_argument(
        "--allowed-origins",
        default="",
        help="comma-separated browser origins allowed besides the server's own, answered "
        "with CORS headers (default none: CORS off, a foreign Origin refused; * for any)",
    )
    serve.add_argument(
        "--allowed-hosts",
        default="",
        help="comma-separated Host names served besides the address listened on, localhost "
        "names and loopback IPs (* for any; needed behind a proxy or DNS name)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the least severe log lines printed (default: info, one access line per request)",
    )
    serve.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="access and event log lines as key=value text or one JSON object per line",
    )
    for flag, (field, kind, text) in LIMIT_FLAGS.items():
        default = getattr(lim.Limits(), field)
        serve.add_argument(flag, type=kind, default=default, help=f"{text} (default {default})")
    serve.set_defaults(func=cmd_serve)
    _PARSER[:] = [serve]
    # Every setting may come from the environment or --config: a flag's value is only
    # known to be given when argparse leaves it out otherwise (``settings`` layers them).
    for action in serve._actions:
        if action.dest not in ("help", "config"):
            DEFAULTS[action.dest] = action.default
            action.default = argparse.SUPPRESS
    return serve


_PARSER: list[argparse.ArgumentParser] = []  # the serve parser registered
DEFAULTS: dict[str, object] = {}  # setting (the flag's dest) -> its default
ENV_PREFIX = "AUTOPARSER_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


class SettingsError(ValueError):
    """A setting from the environment or the config file that cannot be used, named."""


def settings(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    parser: argparse.ArgumentParser | None = None,
) -> argparse.Namespace:
    """The settings of a run: each flag given, else ``AUTOPARSER_<FLAG>`` from
    ``environ``, else the ``--config`` file's key, else the default; values from the
    environment and the file are checked as the flag would check them. ``parser``: the
    serve parser ``args`` came from (default: the one last registered)."""
    parser = parser or _PARSER[0]
    given = vars(args)
    path = given.get("config") or environ.get(f"{ENV_PREFIX}CONFIG")
    from_file = _read_config(path) if path else {}
    actions = {a.dest: a for a in parser._actions if a.dest in DEFAULTS}
    unknown = sorted(set(from_file) - set(actions))
    if unknown:
        raise SettingsError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    out: dict[str, object] = {}
    defaulted: list[str] = []
    for dest, action in actions.items():
        env_name = ENV_PREFIX + dest.upper()
        if dest in given:
            out[dest] = given[dest]
        elif env_name in environ:
            out[dest] = _from_text(action, environ[env_name], env_name)
        elif dest in from_file:
            out[dest] = _from_toml(action, from_file[dest], f"{path}: {dest}")
        else:
            out[dest] = DEFAULTS[dest]
            defaulted.append(dest)
    # which settings nobody gave (a default may be replaced by what the engine reports)
    return argparse.Namespace(**{**given, **out, "defaulted": defaulted})


def engine_share(args: argparse.Namespace) -> int:
    """``ServeConfig.share_engine_slots`` of a run: with no ``--max-concurrent`` given
    (flag, environment or file), the limit follows the engine's slots shared over the
    workers; else 0 (the operator's limit). A worker reads its parent's."""
    share = getattr(args, "engine_share", None)
    if isinstance(share, int):
        return share
    if "max_concurrent" not in getattr(args, "defaulted", ()):
        return 0
    return max(1, int(getattr(args, "workers", 1)))


def _read_config(path: str) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (the serve extra brings tomli there)
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not TOML: {exc}") from None
    return {key.replace("-", "_"): value for key, value in data.items()}


def _from_text(action: argparse.Action, text: str, where: str) -> object:
    """An environment variable's text as the flag's value."""
    if isinstance(action, argparse._StoreTrueAction):
        if text.strip().lower() not in (*_TRUE, *_FALSE):
            raise SettingsError(f"{where}: expected true or false, got {text!r}")
        return text.strip().lower() in _TRUE
    if isinstance(action, argparse._AppendAction):
        return [item.strip() for item in text.split(",") if item.strip()]
    return _checked(action, text, where)


def _from_toml(action: argparse.Action, value: object, where: str) -> object:
    """A config file's value as the flag's value."""
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise SettingsError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise SettingsError(f"{where}: expected a string or a list of strings")
        return items
    if isinstance(value, list) and action.dest in ("allowed_origins", "allowed_hosts"):
        value = ",".join(map(str, value))
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SettingsError(f"{where}: expected a string or a number, got {value!r}")
    return _checked(action, str(value), where)


def _checked(action: argparse.Action, text: str, where: str) -> object:
    convert = action.type if callable(action.type) else str
    try:
        value = convert(text)
    except (TypeError, ValueError):
        kind = getattr(convert, "__name__", "value")
        raise SettingsError(f"{where}: expected {kind}, got {text!r}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise SettingsError(f"{where}: expected one of {choices}, got {text!r}")
    return value


def _keys(args: argparse.Namespace) -> tuple[str, ...]:
    keys = [k.strip() for k in args.api_key if k.strip()]
    if args.api_key_file:
        text = Path(args.api_key_file).read_text(encoding="utf-8")
        keys += [line.strip() for line in text.splitlines() if line.strip()]
    return tuple(keys)


def _listed(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from autoparser.serve.workers import worker_start

    try:
        handed = worker_start(os.environ)  # one of ``--workers``: the parent's settings
        if handed is not None:
            return serve_args(handed[0], sock=handed[1], parent=os.getppid())
        args = settings(args, os.environ)
        if not args.backend:
            raise SettingsError(
                "--backend is required (or AUTOPARSER_BACKEND, or backend in --config)"
            )
    except (SettingsError, OSError) as exc:
        print(f"autoparser: error: {exc}", file=sys.stderr)
        return 2
    return serve_args(args)


def serve_args(
    args: argparse.Namespace, *, sock: socket.socket | None = None, parent: int | None = None
) -> int:
    """Serve with resolved settings: one process, or ``--workers`` of them (``sock``: the
    socket a parent bound for this worker, ``parent`` its process id)."""
    try:
        import aiohttp  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        print(
            "autoparser: error: serve needs the serve extra: pip install 'autoparser[serve]'",
            file=sys.stderr,
        )
        return 2
    from autoparser import AutoparserError
    from autoparser.serve import configure_logging, run
    from autoparser.serve.app import ServeConfig
    from autoparser.serve.workers import run_workers

    try:
        limits = lim.Limits(**{field: getattr(args, field) for field, _, _ in LIMIT_FLAGS.values()})
        config = ServeConfig(
            backend_url=args.backend,
            backend_kind=args.backend_kind,
            template=args.template,
            model=args.model,
            tool_call_deltas=args.tool_call_deltas,
            host=args.host,
            port=args.port,
            limits=limits,
            api_keys=_keys(args),
            allowed_origins=_listed(args.allowed_origins),
            allowed_hosts=_listed(args.allowed_hosts),
            log_format=args.log_format,
            reasoning_field=args.reasoning_field,
            plain_user_text=args.plain_user_text == "on",
            strict_schemas=args.strict_schemas,
            media=args.media,
            share_engine_slots=engine_share(args),
        )
        args.engine_share = config.share_engine_slots  # what the workers follow
        workers = getattr(args, "workers", 1)
        if workers != 1 and sock is None:
            configure_logging(args.log_format, args.log_level)
            return run_workers(args, workers)
        run(config, log_level=args.log_level, sock=sock, parent=parent)
    except (ValueError, OSError, AutoparserError) as exc:
        text = f"autoparser: error: {exc}"
        if args.log_format == "json":  # the last line of a JSON log is JSON too
            import json

            text = json.dumps({"level": "error", "logger": "autoparser", "message": text})
        print(text, file=sys.stderr)
        return 2
    return 0
