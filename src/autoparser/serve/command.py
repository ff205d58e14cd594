"""The ``serve`` subcommand's arguments and entry point (imports aiohttp only when run)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autoparser.serve.kinds import KIND_CHOICES


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``autoparser serve`` to the CLI's subparsers."""
    serve: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="OpenAI-compatible chat server in front of a completion engine",
        description=(
            "Serve /v1/chat/completions (tools, reasoning, response_format, streaming) in "
            "front of llama.cpp's /completion or any OpenAI-style /v1/completions."
        ),
    )
    serve.add_argument("--backend", required=True, help="the engine's base URL")
    serve.add_argument(
        "--backend-kind",
        choices=KIND_CHOICES,
        default="auto",
        help="auto (default): llama.cpp when GET /props answers like it, else openai",
    )
    serve.add_argument(
        "--template",
        help="chat template (.jinja, tokenizer_config.json, directory, .gguf); "
        "default: the llama.cpp backend's own (GET /props)",
    )
    serve.add_argument("--model", help="model name to report and send (default: the backend's)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument(
        "--tool-call-deltas",
        choices=["whole", "incremental"],
        default=None,
        help="stream each tool call in one delta once it is complete and valid (whole, "
        "the library's default), or its name and arguments as they are generated "
        "(incremental: a call that then breaks cannot be taken back)",
    )
    serve.set_defaults(func=cmd_serve)
    return serve


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print(
            "autoparser: error: serve needs the serve extra: pip install 'autoparser[serve]'",
            file=sys.stderr,
        )
        return 2
    from autoparser.serve import run
    from autoparser.serve.app import ServeConfig

    config = ServeConfig(
        backend_url=args.backend,
        backend_kind=args.backend_kind,
        template=args.template,
        model=args.model,
        tool_call_deltas=args.tool_call_deltas,
        host=args.host,
        port=args.port,
    )
    run(config, print=lambda text: print(text, file=sys.stderr))
    return 0
