"""Command-line interface: ``autoparser render | caps | analyze | parse | grammar``.

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

from autoparser.errors import AutoparserError
from autoparser.template import ChatTemplate


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
