"""Command-line interface: ``autoparser render | caps | analyze | parse | grammar | serve``.

Each subcommand is one function ``cmd_<name>(args) -> int``; keep them thin: the
library does the work, the CLI only loads, calls and prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoparser.chat import ChatTemplate
from autoparser.errors import AutoparserError


def _load_template(path: str) -> ChatTemplate:
    return ChatTemplate.from_file(path)


def _load_json_file(path: str | None) -> Any:
    if path is None:
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def cmd_render(args: argparse.Namespace) -> int:
    template = _load_template(args.template)
    messages = _load_json_file(args.messages) or [{"role": "user", "content": "Hello!"}]
    tools = _load_json_file(args.tools)
    kwargs: dict[str, Any] = {}
    if args.enable_thinking is not None:
        kwargs["enable_thinking"] = args.enable_thinking == "true"
    prompt = template.render(
        messages,
        tools=tools,
        add_generation_prompt=not args.no_generation_prompt,
        polyfills=not args.no_polyfills,
        **kwargs,
    )
    sys.stdout.write(prompt)
    if sys.stdout.isatty() and not prompt.endswith("\n"):
        sys.stdout.write("\n")  # only for the eye: piped output is the exact prompt
    return 0


def cmd_caps(args: argparse.Namespace) -> int:
    template = _load_template(args.template)
    caps = dataclasses.asdict(template.caps)
    if args.json:
        print(json.dumps(caps, indent=2))
    else:
        width = max(len(k) for k in caps)
        for key, value in caps.items():
            print(f"{key:<{width}}  {'yes' if value else 'no'}")
    return 0


def _analysis_lines(data: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
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


def cmd_analyze(args: argparse.Namespace) -> int:
    template = _load_template(args.template)
    analysis = template.analyze()
    data = analysis.to_dict()
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    r, c, t = analysis.reasoning, analysis.content, analysis.tools
    print(f"reasoning: {r.mode.value}   content: {c.mode.value}   tools: {t.format.mode.value}")
    if analysis.handler:
        print(f"hand-written format: {analysis.handler}")
    if analysis.workarounds:
        print(f"workarounds: {', '.join(analysis.workarounds)}")
    print()
    rows = [(k, v) for k, v in _analysis_lines(data) if not k.endswith(".mode")]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def _request_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {"tools": _load_json_file(args.tools)}
    choice = getattr(args, "tool_choice", None)
    if choice is not None:
        known = ("none", "auto", "required")
        options["tool_choice"] = (
            choice if choice in known else {"type": "function", "function": {"name": choice}}
        )
    if args.enable_thinking is not None:
        options["enable_thinking"] = args.enable_thinking == "true"
    if getattr(args, "no_parallel", False):
        options["parallel_tool_calls"] = False
    if getattr(args, "response_schema", None):
        schema = _load_json_file(args.response_schema)
        options["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
    messages = _load_json_file(args.messages) or [{"role": "user", "content": "Hello!"}]
    options["messages"] = messages
    return options


def cmd_parse(args: argparse.Namespace) -> int:
    """Parse model output (stdin) into a message; --stream prints the deltas instead."""
    template = _load_template(args.template)
    options = _request_options(args)
    if args.reasoning_format:
        options["reasoning_format"] = args.reasoning_format
    params = template.apply(options.pop("messages"), **options)
    text = sys.stdin.read()
    if not args.stream:
        print(json.dumps(params.parse(text).to_openai(), ensure_ascii=False, indent=2))
        return 0
    stream = params.stream()
    size = max(1, args.chunk_size)
    for start in range(0, len(text), size):
        for delta in stream.feed(text[start : start + size]):
            print(json.dumps(delta, ensure_ascii=False))
    for delta in stream.finish():
        print(json.dumps(delta, ensure_ascii=False))
    if stream.message.truncated:
        print("autoparser: note: the output ends inside a call or reasoning", file=sys.stderr)
    return 0


def cmd_grammar(args: argparse.Namespace) -> int:
    """Print the grammar, its laziness and triggers for a request."""
    template = _load_template(args.template)
    options = _request_options(args)
    params = template.apply(options.pop("messages"), **options)
    if args.json:
        data = {
            "grammar": params.grammar,
            "grammar_lazy": params.grammar_lazy,
            "grammar_triggers": [t.to_dict() for t in params.grammar_triggers],
            "preserved_tokens": params.preserved_tokens,
            "additional_stops": params.additional_stops,
            "thinking_forced_open": params.thinking_forced_open,
        }
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    if params.grammar is None:
        print("# no grammar for this request (no tools, tool_choice none, no response format)")
        return 0
    print(f"# lazy: {'yes' if params.grammar_lazy else 'no'}")
    for trigger in params.grammar_triggers:
        print(f"# trigger ({trigger.kind}): {json.dumps(trigger.value, ensure_ascii=False)}")
    if params.preserved_tokens:
        print(f"# preserved tokens: {json.dumps(params.preserved_tokens, ensure_ascii=False)}")
    sys.stdout.write(params.grammar if params.grammar.endswith("\n") else params.grammar + "\n")
    return 0


def _add_request_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("template", help=".jinja, tokenizer_config.json, directory or .gguf")
    sub.add_argument("--tools", help="JSON file with a list of OpenAI-style tools")
    sub.add_argument("--messages", help="JSON file with the conversation (default: one user turn)")
    sub.add_argument(
        "--tool-choice", default=None, help="none | auto | required | the name of one tool"
    )
    sub.add_argument("--no-parallel", action="store_true", help="parallel_tool_calls=false")
    sub.add_argument("--enable-thinking", choices=["true", "false"], default=None)


def build_argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoparser",
        description="Render, analyse and parse with any LLM chat template.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="render a conversation to the prompt text")
    render.add_argument("template", help=".jinja, tokenizer_config.json, directory or .gguf")
    render.add_argument("--messages", help="JSON file with a list of OpenAI-style messages")
    render.add_argument("--tools", help="JSON file with a list of OpenAI-style tools")
    render.add_argument("--enable-thinking", choices=["true", "false"], default=None)
    render.add_argument("--no-generation-prompt", action="store_true")
    render.add_argument(
        "--no-polyfills", action="store_true", help="render exactly as transformers would"
    )
    render.set_defaults(func=cmd_render)

    caps = sub.add_parser("caps", help="print what the template supports")
    caps.add_argument("template")
    caps.add_argument("--json", action="store_true", help="print as JSON")
    caps.set_defaults(func=cmd_caps)

    analyze = sub.add_parser("analyze", help="print the differential analysis of a template")
    analyze.add_argument("template")
    analyze.add_argument("--json", action="store_true", help="print the serialised analysis")
    analyze.set_defaults(func=cmd_analyze)

    parse = sub.add_parser("parse", help="parse model output from stdin into an OpenAI message")
    _add_request_arguments(parse)
    parse.add_argument("--stream", action="store_true", help="print the streaming deltas")
    parse.add_argument("--chunk-size", type=int, default=4, help="characters per fed chunk")
    parse.add_argument("--reasoning-format", choices=["auto", "deepseek", "none"], default=None)
    parse.set_defaults(func=cmd_parse)

    grammar = sub.add_parser("grammar", help="print the GBNF grammar and triggers of a request")
    _add_request_arguments(grammar)
    grammar.add_argument("--response-schema", help="JSON schema file constraining the content")
    grammar.add_argument("--json", action="store_true", help="print everything as JSON")
    grammar.set_defaults(func=cmd_grammar)

    from autoparser.serve.command import register as register_serve

    register_serve(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_argument_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except AutoparserError as exc:
        print(f"autoparser: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"autoparser: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
