"""``autoparser serve``: OpenAI chat completions and Responses, and Anthropic Messages, in
front of a completion engine.

Needs the ``serve`` extra (``pip install autoparser[serve]``, which brings aiohttp); the
rest of the package never imports it. ``create_app`` gives the aiohttp application (for
embedding and tests), ``run`` serves it until interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

    from aiohttp import web

    from autoparser.serve.app import ServeConfig


def create_app(config: ServeConfig) -> web.Application:
    """The aiohttp application for ``config`` (backend probed, template loaded at startup):
    chat completions, and the Responses and Messages APIs over the same request path."""
    from autoparser.serve.app import create_app as _create_app

    return _create_app(config)


def run(
    config: ServeConfig,
    log_level: str = "info",
    *,
    sock: socket.socket | None = None,
    parent: int | None = None,
    **run_app_options: Any,
) -> None:
    """Serve on ``config.host:config.port`` until SIGINT/SIGTERM, which stop taking new
    requests and give running ones ``config.limits.grace_period`` seconds to end.

    ``sock``: an already listening socket to accept on instead (a worker of ``--workers``);
    ``parent``: the process that started this one, whose end stops it.
    """
    import logging

    from aiohttp import web

    from autoparser.serve.workers import orphan_guard

    configure_logging(config.log_format, log_level)
    log = logging.getLogger("autoparser.serve")
    options: dict[str, Any] = {  # aiohttp.web.run_app's keywords, each its own type
        "host": config.host,
        "port": config.port,
        "access_log": None,
        "handler_cancellation": True,
        "shutdown_timeout": config.limits.grace_period,
        "print": lambda text: log.info("%s", text.strip()),
        **run_app_options,
    }
    if sock is not None:
        options.update(host=None, port=None, sock=sock)
    app = create_app(config)
    if parent is not None:
        app.cleanup_ctx.append(orphan_guard(parent))
    web.run_app(app, **options)


def configure_logging(log_format: str, log_level: str = "info") -> None:
    """The process's log lines: the message alone (text), or one JSON object per line
    (json) for every logger, aiohttp's and Python's warnings included."""
    import logging
    import sys

    from autoparser.serve.observe import JsonLines

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter("%(message)s"))
    logging.basicConfig(level=log_level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)
    logging.getLogger("aiohttp.access").disabled = True


def __getattr__(name: str) -> Any:
    if name == "ServeConfig":
        from autoparser.serve.app import ServeConfig

        return ServeConfig
    raise AttributeError(name)


__all__ = ["ServeConfig", "create_app", "run"]
