"""The ``studio`` subcommand's arguments and entry point (imports aiohttp only when run)."""

from __future__ import annotations

import argparse
import re
import sys

TYPE_CHECKING = False  # not typing's: the CLI's --help should not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from autoparser import TemplateSource

    _P = TypeVar("_P", bound=argparse.ArgumentParser)


def register(subparsers: argparse._SubParsersAction[_P]) -> _P:
    """Add ``autoparser studio`` to the CLI's subparsers."""
    studio = subparsers.add_parser(
        "studio",
        help="a template workbench in the browser (local server, works offline)",
        description=(
            "Serve a page that shows what autoparser sees in a template: the prompt with its "
            "markers, the analysis and how each marker was found, parsed model outputs and "
            "their deltas, the grammar, and exports. Needs the studio extra (aiohttp)."
        ),
    )
    studio.add_argument(
        "template",
        nargs="?",
        help=".jinja file, tokenizer_config.json, model directory, .gguf, - for stdin, or a "
        "Hub model id (the hub extra) "
        "(default: a bundled ChatML example; a template can also be pasted on the page)",
    )
    studio.add_argument("--host", default="127.0.0.1", help="address to listen on")
    studio.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: a free one)"
    )
    studio.add_argument(
        "--no-browser", action="store_true", help="only print the URL, do not open a browser"
    )
    studio.set_defaults(func=cmd_studio)
    return studio


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


def _load(name: str, load_path: Callable[[str], TemplateSource]) -> TemplateSource:
    """A local template, or the Hub model ``org/name`` (the hub extra) when no such path
    exists."""
    import os

    if not os.path.exists(name) and HUB_ID.fullmatch(name):
        from autoparser import load_pretrained

        return load_pretrained(name)
    return load_path(name)


def cmd_studio(args: argparse.Namespace) -> int:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print(
            "autoparser: error: studio needs the studio extra: pip install 'autoparser[studio]'",
            file=sys.stderr,
        )
        return 2
    from autoparser import decode_text, load_path, load_text
    from autoparser.studio import run

    initial = None
    if args.template in ("-", "/dev/stdin"):
        initial = load_text(decode_text(sys.stdin.buffer.read(), "stdin"), "<stdin>")
    elif args.template:
        initial = _load(args.template, load_path)
    import secrets

    port = args.port or _free_port(args.host)
    token = secrets.token_urlsafe(24)  # in the fragment: never sent, never in a Referer
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/#token={token}"

    def listening(_banner: str) -> None:
        """Called by aiohttp once the socket listens: only then the URL works."""
        print(f"autoparser studio: {url}  (Ctrl-C to stop)", file=sys.stderr, flush=True)
        if not args.no_browser:
            import webbrowser

            webbrowser.open(url)

    run(initial, args.host, port, token, print=listening)
    return 0
