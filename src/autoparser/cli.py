"""Command-line interface: ``autoparser render | caps | analyze | parse | grammar | serve``.

Each subcommand is one function ``cmd_<name>(args) -> int``; keep them thin: the
library does the work, the CLI only loads, calls and prints. The library is imported
inside the commands, so that ``--help`` and ``--version`` answer without loading it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence

from autoparser.errors import AutoparserError
from autoparser.message import TOLERANCES

TYPE_CHECKING = False  # not typing's: importing typing costs --help more than the rest
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    from autoparser.analysis.model import AnalysisVerification
    from autoparser.chat import ChatTemplate
    from autoparser.message import ChatMessage
    from autoparser.params import ChatParams

    _T = TypeVar("_T")

STDIN_NAMES = ("-", "/dev/stdin")


class UsageError(AutoparserError):
    """A bad command-line argument or input file (printed as ``autoparser: error: ...``)."""


_stdin_reader: list[str] = []  # the argument that read stdin (it can be read once)


def _read_bytes(path: str, what: str) -> bytes:
    """The bytes of a file, or of stdin for ``-`` / ``/dev/stdin`` (once per run)."""
    if path not in STDIN_NAMES:
        with open(path, "rb") as file:
            return file.read()
    if _stdin_reader:
        raise UsageError(f"{what}: stdin is already read for {_stdin_reader[0]}")
    _stdin_reader.append(what)
    stream = sys.stdin
    buffer = getattr(stream, "buffer", None)
    return buffer.read() if buffer is not None else stream.read().encode("utf-8")


def _read_text(path: str, what: str) -> str:
    """A file's (or stdin's) text; UsageError when it is not UTF-8."""
    data = _read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        name = "stdin" if path in STDIN_NAMES else path
        raise UsageError(
            f"{name}: not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})"
        ) from None


_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
_FILE_SUFFIXES = (".jinja", ".j2", ".json", ".gguf", ".txt")


def is_hub_id(name: str) -> bool:
    """Whether a template argument names a Hugging Face Hub model (``org/name``, the hub
    extra) rather than a path: it has that shape, no such path exists, and it does not end
    like a template file (a mistyped file then says so, not that the Hub lacks it)."""
    return (
        _HUB_ID.fullmatch(name) is not None
        and not name.lower().endswith(_FILE_SUFFIXES)
        and not os.path.exists(name)
    )


def _load_template(args: argparse.Namespace) -> ChatTemplate:
    return _template_from(args.template, args)


def _template_from(path: str, args: argparse.Namespace) -> ChatTemplate:
    import dataclasses

    from autoparser import default_analysis_cache
    from autoparser.chat import ChatTemplate
    from autoparser.template.loading import load_path, load_pretrained, load_text

    if path in STDIN_NAMES:
        loaded = load_text(_read_text(path, "the template"), "<stdin>")
    elif is_hub_id(path):
        loaded = load_pretrained(path)
    else:
        loaded = load_path(path)
    tokens = {
        key: value
        for key in ("bos_token", "eos_token")
        if (value := getattr(args, key, None)) is not None
    }
    if tokens:
        loaded = dataclasses.replace(loaded, **tokens)
    # The analysis is saved (keyed by the template's hash): a second run does not redo it.
    return ChatTemplate.from_source(loaded, analysis_cache=default_analysis_cache())


def _load_json_file(path: str | None, shape: type[_T]) -> _T | None:
    """The JSON in ``path``; UsageError naming the file and the position or the shape."""
    if path is None:
        return None
    try:
        data = json.loads(_read_text(path, path))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise UsageError(f"{path}: not JSON: {exc.msg} at {where}") from None
    if shape is list and isinstance(data, dict) and "messages" in data:
        raise UsageError(
            f"{path}: a whole chat-completions request body; pass it with --request {path}"
        )
    if not isinstance(data, shape):
        want = "a list" if shape is list else "an object"
        raise UsageError(f"{path}: expected {want}, got a JSON {type(data).__name__}")
    return data


def _template_vars(args: argparse.Namespace) -> dict[str, object]:
    """``--var KEY=VALUE`` pairs: the value as JSON, else as a plain string."""
    found: dict[str, object] = {}
    for item in getattr(args, "var", None) or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--var {item!r}: expected KEY=VALUE with KEY a name")
        try:
            found[key] = json.loads(raw)
        except json.JSONDecodeError:
            found[key] = raw
    return found


REQUEST_FIELDS = (
    "messages",
    "tools",
    "tool_choice",
    "response_format",
    "parallel_tool_calls",
    "chat_template_kwargs",
)


def _load_request(path: str | None) -> dict[str, Any]:
    """The fields autoparser uses from an OpenAI chat-completions request body."""
    if path is None:
        return {}
    body = _load_json_file(path, dict) or {}
    if not isinstance(body.get("messages"), list):
        raise UsageError(f"{path}: messages: expected a list of messages")
    kwargs = body.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise UsageError(f"{path}: chat_template_kwargs: expected an object")
    return {k: body[k] for k in REQUEST_FIELDS if k in body}


def cmd_render(args: argparse.Namespace) -> int:
    template = _load_template(args)
    options = _request_options(args)
    messages = options.pop("messages")
    kwargs: dict[str, Any] = options.pop("template_kwargs")
    if options.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = options["enable_thinking"]
    if args.json:
        params = _params(template, args, add_generation_prompt=not args.no_generation_prompt)
        data = {
            "prompt": params.prompt,
            "additional_stops": params.additional_stops,
            "preserved_tokens": params.preserved_tokens,
            "grammar_lazy": params.grammar_lazy,
            "grammar_triggers": [t.to_dict() for t in params.grammar_triggers],
            "thinking_forced_open": params.thinking_forced_open,
        }
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    prompt = template.render(
        messages,
        tools=options.get("tools"),
        add_generation_prompt=not args.no_generation_prompt,
        polyfills=not args.no_polyfills,
        **kwargs,
    )
    sys.stdout.write(prompt)
    if sys.stdout.isatty() and not prompt.endswith("\n"):
        sys.stdout.write("\n")  # only for the eye: piped output is the exact prompt
    return 0


def cmd_caps(args: argparse.Namespace) -> int:
    import dataclasses

    _template_vars(args)  # checked; probing renders its own conversations
    template = _load_template(args)
    caps = dataclasses.asdict(template.caps)
    if args.json:
        print(json.dumps(caps, indent=2))
    else:
        width = max(len(k) for k in caps)
        for key, value in caps.items():
            print(f"{key:<{width}}  {'yes' if value else 'no'}")
    return 0


def _verification_text(check: AnalysisVerification) -> str:
    """The self-check: verified (which checks ran), or each failure with its reason."""
    ran = ", ".join(check.checks)
    lines = [
        f"verification: {'verified' if check.verified else 'FAILED'} ({ran})"
        if check.verified
        else f"verification: FAILED {len(check.failures)} of {len(check.checks)} checks"
    ]
    lines += [f"  failed {f.check}: {f.reason}" for f in check.failures]
    lines += [f"  skipped {name}: {why}" for name, why in check.skipped]
    return "\n".join(lines)


def _analysis_lines(data: Mapping[str, object], prefix: str = "") -> list[tuple[str, str]]:
    """Flatten an analysis dict into (dotted key, shown value); strings repr-quoted so that
    whitespace and escapes in markers are visible, empty markers shown as -."""
    rows: list[tuple[str, str]] = []
    for key, value in data.items():
        name = prefix + key
        if isinstance(value, dict):
            rows.extend(_analysis_lines(value, name + "."))
        elif isinstance(value, str):
            rows.append((name, repr(value) if value else "-"))
        elif isinstance(value, list):
            shown = ", ".join(repr(v) if isinstance(v, str) else repr(tuple(v)) for v in value)
            rows.append((name, shown or "-"))
        else:
            rows.append((name, "yes" if value is True else "no" if value is False else str(value)))
    return rows


EXPLAIN = """\
How to read this (markers are shown as Python strings: '\\n' is a newline):
  verification                whether the parser built from this analysis reads back the
                              template's own renders (each failed check with its reason)
  reasoning.start/end         text around the model's thinking ("<think>" ... "</think>")
  reasoning.*_prompt_suffix   what the prompt ends with when thinking is off / on
  content.start/end           text around the visible answer, if any
  tools.format.*              how a tool call is written: the section and per-call
                              wrappers, JSON field names, the order of fields
  tools.function.*            text before/after a function name in a call
  tools.arguments.*           text around arguments (tag formats: per argument);
                              values_as_python: values printed as {'a': 1}, not JSON
  tools.call_id.*             where a call id appears and what surrounds it
  generation_prompt           what add_generation_prompt appends
  end_of_turn                 strings that end the assistant turn (extra stops)
  preserved_tokens            special tokens a tokenizer must keep as single tokens
  -                           empty / not used by this template
"""


def cmd_analyze(args: argparse.Namespace) -> int:
    _template_vars(args)  # checked; the analysis renders its own conversations
    if args.jsonl or len(args.template) > 1:
        return _analyze_many(args)
    template = _template_from(args.template[0], args)
    analysis = template.analyze()
    data = analysis.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    r, c, t = analysis.reasoning, analysis.content, analysis.tools
    print(f"reasoning: {r.mode.value}   content: {c.mode.value}   tools: {t.format.mode.value}")
    from autoparser.formats import format_of

    fmt = format_of(analysis)
    if fmt.hand_written:
        print(f"hand-written format: {fmt.name}")
    if analysis.workarounds:
        print(f"workarounds: {', '.join(analysis.workarounds)}")
    check = analysis.verification
    if check is not None:
        print(_verification_text(check))
    print()
    data.pop("verification", None)
    rows = [(k, v) for k, v in _analysis_lines(data) if not k.endswith(".mode")]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if args.explain:
        print()
        sys.stdout.write(EXPLAIN)
    return 0


def _analyze_many(args: argparse.Namespace) -> int:
    """One JSON line per template, in one process: the analysis' summary and verification,
    or the error; exit 2 when any template failed (after reporting every one)."""
    from autoparser.formats import format_of

    failed = 0
    for path in args.template:
        row: dict[str, object] = {"template": path}
        try:
            analysis = _template_from(path, args).analyze()
        except (AutoparserError, OSError) as exc:
            failed += 1
            row.update(ok=False, error=_error_text(exc))
        else:
            check = analysis.verification
            row.update(
                ok=True,
                reasoning=analysis.reasoning.mode.value,
                content=analysis.content.mode.value,
                tools=analysis.tools.format.mode.value,
                handler=format_of(analysis).name,
                workarounds=list(analysis.workarounds),
                verified=None if check is None else check.verified,
            )
            if args.json:
                row["analysis"] = analysis.to_dict()
        print(json.dumps(row, ensure_ascii=False), flush=True)
    return 2 if failed else 0


def _request_options(args: argparse.Namespace) -> dict[str, Any]:
    """The request from --request, then the single options on top; ``template_kwargs`` holds
    chat_template_kwargs and --var values."""
    body = _load_request(getattr(args, "request", None))
    options: dict[str, Any] = {
        k: v for k, v in body.items() if k not in ("messages", "chat_template_kwargs")
    }
    options["template_kwargs"] = {**body.get("chat_template_kwargs", {}), **_template_vars(args)}
    if args.tools is not None:
        options["tools"] = _load_json_file(args.tools, list)
    choice = getattr(args, "tool_choice", None)
    if choice is not None:
        known = ("none", "auto", "required")
        options["tool_choice"] = (
            choice if choice in known else {"type": "function", "function": {"name": choice}}
        )
    if args.enable_thinking is not None:
        options["enable_thinking"] = args.enable_thinking == "true"
    if getattr(args, "reasoning_format", None):
        options["reasoning_format"] = args.reasoning_format
    if getattr(args, "no_parallel", False):
        options["parallel_tool_calls"] = False
    if getattr(args, "response_schema", None):
        schema = _load_json_file(args.response_schema, dict)
        options["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
    messages = _load_json_file(args.messages, list) if args.messages else body.get("messages")
    options["messages"] = messages or [{"role": "user", "content": "Hello!"}]
    return options


def _params(
    template: ChatTemplate, args: argparse.Namespace, *, add_generation_prompt: bool = True
) -> ChatParams:
    """The command's request through ``Session`` (the one road every face takes): the
    options as an OpenAI request, read by the library's one reader."""
    from autoparser.session import Session

    options = _request_options(args)
    kwargs = options.pop("template_kwargs")
    if options.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = options.pop("enable_thinking")
    request = {
        **options,
        "chat_template_kwargs": kwargs,
        "add_generation_prompt": add_generation_prompt,
    }
    return Session.for_template(template).params(
        request,
        call_id_seed=getattr(args, "seed", None),
        calls_in_reasoning=bool(getattr(args, "calls_in_reasoning", False)),
    )


EXIT_REFUSED = 3
"""``autoparser parse --strict``'s exit code when a call was refused or cut off (2 is an
error of the command itself)."""


def cmd_parse(args: argparse.Namespace) -> int:
    """Parse model output (stdin) into a message; --stream prints the deltas instead.
    What the parse tolerated or refused goes to stderr, one line per finding."""
    template = _load_template(args)
    params = _params(template, args)
    text = _read_text(args.output, "the output")
    finish = args.finish_reason
    if not args.stream:
        message = params.parse(text, finish_reason=finish, tolerance=args.tolerance)
        print(json.dumps(message.to_openai(), ensure_ascii=False, indent=2))
        return _report_findings(message, args.strict)
    stream = params.stream(tool_call_deltas=args.tool_call_deltas, tolerance=args.tolerance)
    size = max(1, args.chunk_size)
    show = _chunk_printer(args.chunks)
    for start in range(0, len(text), size):
        for delta in stream.feed(text[start : start + size]):
            show(delta, None)
    for delta in stream.finish(finish_reason=finish):
        show(delta, None)
    if args.chunks == "openai":
        ended = "tool_calls" if stream.message.tool_calls else "stop"
        show({}, "length" if stream.message.truncated else ended)
    if stream.dropped_calls:
        dropped = ", ".join(map(str, stream.dropped_calls))
        print(
            f"autoparser: note: calls announced and then dropped (not whole and valid): {dropped}",
            file=sys.stderr,
        )
    return _report_findings(stream.message, args.strict)


def _report_findings(message: ChatMessage, strict: bool) -> int:
    """Print each finding to stderr; the exit code (``EXIT_REFUSED`` under ``strict`` when
    a call was refused or cut off)."""
    for finding in message.findings:
        print(f"autoparser: finding: {finding.describe()}", file=sys.stderr)
    return EXIT_REFUSED if strict and message.refused else 0


def _chunk_printer(style: str) -> Callable[[Mapping[str, object], str | None], None]:
    """Print one delta per line: bare (``deltas``) or in an OpenAI chunk envelope."""

    def show(delta: Mapping[str, object], finish_reason: str | None) -> None:
        if style == "deltas":
            print(json.dumps(delta, ensure_ascii=False))
            return
        chunk = {
            "id": "chatcmpl-autoparser",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "autoparser",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        print(json.dumps(chunk, ensure_ascii=False))

    return show


def cmd_export_response_template(args: argparse.Namespace) -> int:
    """Print the request's output format as a transformers response template (JSON)."""
    template = _load_template(args)
    params = _params(template, args)
    print(json.dumps(params.to_response_template(), ensure_ascii=False, indent=2))
    return 0


def cmd_training_template(args: argparse.Namespace) -> int:
    """Print the template with {% generation %} blocks around what the model generates."""
    sys.stdout.write(_load_template(args).training_template())
    return 0


def cmd_grammar(args: argparse.Namespace) -> int:
    """Print the grammar, its laziness and triggers for a request."""
    template = _load_template(args)
    params = _params(template, args)
    if args.json:
        data = params.grammar_fields()
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    if params.grammar is None:
        print("# no grammar for this request (no tools, tool_choice none, no response format)")
        return 0
    print(f"# lazy: {'yes' if params.grammar_lazy else 'no'}")
    for trigger in params.grammar_triggers:
        print(f"# trigger ({trigger.kind}): {json.dumps(trigger.value, ensure_ascii=False)}")
        if trigger.reason:
            print(f"#   why {trigger.kind}: {trigger.reason}")
    if params.preserved_tokens:
        print(f"# preserved tokens: {json.dumps(params.preserved_tokens, ensure_ascii=False)}")
    sys.stdout.write(params.grammar if params.grammar.endswith("\n") else params.grammar + "\n")
    return 0


TEMPLATE_HELP = (
    ".jinja file, tokenizer_config.json, model directory or .gguf; - for stdin; or a Hub "
    "model id such as Qwen/Qwen3-0.6B (the hub extra; the Hugging Face cache and "
    "HF_HUB_OFFLINE are honoured)"
)


def _add_template_arguments(sub: argparse.ArgumentParser, many: bool = False) -> None:
    """The template and what it is rendered with: shared by every subcommand."""
    if many:
        sub.add_argument("template", nargs="+", help=TEMPLATE_HELP + "; several: JSON lines")
    else:
        sub.add_argument("template", help=TEMPLATE_HELP)
    sub.add_argument("--bos-token", help="bos_token for the template (default: from the config)")
    sub.add_argument("--eos-token", help="eos_token for the template (default: from the config)")
    sub.add_argument(
        "--var",
        action="append",
        metavar="KEY=VALUE",
        help="template variable (VALUE read as JSON, else as a string); repeatable",
    )


def _add_request_arguments(sub: argparse.ArgumentParser) -> None:
    _add_template_arguments(sub)
    sub.add_argument(
        "--request",
        metavar="FILE",
        help="OpenAI chat-completions request body (JSON): messages, tools, tool_choice, "
        "response_format, parallel_tool_calls, chat_template_kwargs; options below override it",
    )
    sub.add_argument("--tools", metavar="FILE", help="JSON file with a list of OpenAI-style tools")
    sub.add_argument(
        "--messages",
        metavar="FILE",
        help="JSON file with a list of OpenAI-style messages (default: one user turn)",
    )
    sub.add_argument(
        "--tool-choice", default=None, help="none | auto | required | the name of one tool"
    )
    sub.add_argument(
        "--no-parallel", action="store_true", help="parallel_tool_calls=false (one call at most)"
    )
    sub.add_argument(
        "--enable-thinking",
        choices=["true", "false"],
        default=None,
        help="pass enable_thinking to the template (default: the template's own default)",
    )


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help is formatted at one width, read once: argparse would
    otherwise ask the terminal's size for every argument added (most of ``--help``'s time).
    Subcommand parsers are of the same class (``add_subparsers`` uses ``type(self)``)."""

    width: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _Parser.width is None:
            import shutil

            _Parser.width = max(shutil.get_terminal_size().columns - 2, 40)
        kwargs.setdefault("formatter_class", _fixed_width_formatter)
        super().__init__(*args, **kwargs)


def _fixed_width_formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=_Parser.width)


def build_argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="autoparser",
        description="Render, analyse and parse with any LLM chat template.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command")

    render = sub.add_parser("render", help="render a conversation to the prompt text")
    _add_request_arguments(render)
    render.add_argument(
        "--no-generation-prompt",
        action="store_true",
        help="add_generation_prompt=false (no assistant header at the end)",
    )
    render.add_argument(
        "--no-polyfills", action="store_true", help="render exactly as transformers would"
    )
    render.add_argument(
        "--json",
        action="store_true",
        help="print the prompt with its stops, preserved tokens and grammar triggers as JSON",
    )
    render.set_defaults(func=cmd_render)

    caps = sub.add_parser("caps", help="print what the template supports")
    _add_template_arguments(caps)
    caps.add_argument("--json", action="store_true", help="print as JSON")
    caps.set_defaults(func=cmd_caps)

    analyze = sub.add_parser("analyze", help="print the differential analysis of a template")
    _add_template_arguments(analyze, many=True)
    analyze.add_argument("--json", action="store_true", help="print the serialised analysis")
    analyze.add_argument(
        "--jsonl",
        action="store_true",
        help="one JSON line per template (the default with several templates): modes, "
        "verification, or the error; with --json the whole analysis too",
    )
    analyze.add_argument("--explain", action="store_true", help="add a legend of the fields")
    analyze.set_defaults(func=cmd_analyze)

    parse = sub.add_parser("parse", help="parse model output from stdin into an OpenAI message")
    _add_request_arguments(parse)
    parse.add_argument(
        "--output",
        metavar="FILE",
        default="-",
        help="the model output to parse (default: - for stdin)",
    )
    parse.add_argument("--stream", action="store_true", help="print the streaming deltas")
    parse.add_argument(
        "--chunk-size", type=int, default=4, help="characters per fed chunk (with --stream)"
    )
    parse.add_argument(
        "--chunks",
        choices=["deltas", "openai"],
        default="deltas",
        help="with --stream: bare deltas, or OpenAI chat.completion.chunk envelopes "
        "ending with finish_reason",
    )
    parse.add_argument(
        "--tool-call-deltas",
        choices=["whole", "incremental"],
        default="whole",
        help="with --stream: each tool call in one delta once complete and valid (default), "
        "or its name and arguments as they are written",
    )
    parse.add_argument(
        "--tolerance",
        choices=list(TOLERANCES),
        default="keep",
        help="a call read only by the format's markers (an argument the schema does not "
        "declare): keep it with a finding (default), or reject it (its text stays content)",
    )
    parse.add_argument(
        "--strict",
        action="store_true",
        help=f"exit with code {EXIT_REFUSED} when a call was refused or cut off "
        "(the findings on stderr say why)",
    )
    parse.add_argument(
        "--finish-reason",
        default=None,
        help="the engine's reason for stopping; 'length' makes a call the output ends "
        "inside a cut call",
    )
    parse.add_argument(
        "--calls-in-reasoning",
        action="store_true",
        help="read tool calls written inside the reasoning as calls and go on with the reasoning "
        "(default: a call ends the reasoning)",
    )
    parse.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the generated tool call ids (same ids with and without --stream)",
    )
    parse.add_argument(
        "--reasoning-format",
        choices=["auto", "deepseek", "none"],
        default=None,
        help="where reasoning goes: auto / deepseek (reasoning_content) or none (content)",
    )
    parse.set_defaults(func=cmd_parse)

    grammar = sub.add_parser("grammar", help="print the GBNF grammar and triggers of a request")
    _add_request_arguments(grammar)
    grammar.add_argument(
        "--response-schema", metavar="FILE", help="JSON schema file constraining the content"
    )
    grammar.add_argument("--json", action="store_true", help="print everything as JSON")
    grammar.set_defaults(func=cmd_grammar)

    export = sub.add_parser(
        "export-response-template",
        help="print the output format as a transformers response template "
        "(read by transformers, vLLM and SGLang)",
    )
    _add_request_arguments(export)
    export.set_defaults(func=cmd_export_response_template)

    training = sub.add_parser(
        "training-template",
        help="print the template with {%% generation %%} blocks for assistant-only training "
        "(transformers' return_assistant_tokens_mask, TRL's assistant_only_loss)",
    )
    _add_template_arguments(training)
    training.set_defaults(func=cmd_training_template)

    from autoparser.serve.command import register as register_serve

    register_serve(sub)
    from autoparser.studio.command import register as register_studio

    register_studio(sub)
    return parser


def _version() -> str:
    from autoparser import __version__

    return __version__


# What the CLI offers instead of the library's lenient=True, which it cannot pass.
CLI_SCHEMA_HINT = (
    " (the grammar cannot enforce it and the CLI converts schemas strictly:"
    " remove or rewrite that keyword in the schema)"
)


def _error_text(exc: BaseException) -> str:
    """The one-line message of an error the CLI reports."""
    if isinstance(exc, OSError) and not isinstance(exc, AutoparserError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    from autoparser.errors import SchemaError

    return SchemaError.message_with_hint(exc, CLI_SCHEMA_HINT)


def _is_serve_error(exc: BaseException) -> bool:
    """Whether ``exc`` is serve's "backend unreachable / not what its API promises"."""
    module = sys.modules.get("autoparser.serve.engines.base")
    error = getattr(module, "BackendError", None)
    return isinstance(error, type) and isinstance(exc, error)


def _quiet_stdout() -> None:
    """After a closed pipe (``| head``): send what is still buffered nowhere, so that the
    interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(f"autoparser {_version()}")  # the one answer that needs no parser built
        return 0
    parser = build_argument_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    _stdin_reader.clear()
    try:
        code = int(args.func(args))
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except (AutoparserError, OSError) as exc:
        print(f"autoparser: error: {_error_text(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not _is_serve_error(exc):
            raise
        print(f"autoparser: error: {_error_text(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
