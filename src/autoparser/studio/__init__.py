"""``autoparser studio``: a local web workbench for chat-template authors.

One page (static files in ``static/``, vanilla JS and CSS, nothing fetched at run time) over
a small JSON API (``api.py``, served by ``app.py``) that shows what the library sees in a
template: the prompt, the analysis and how each marker was found, parsed outputs, streamed
deltas, the grammar and exports. Needs the ``studio`` extra (aiohttp); the library never
imports this package. See docs/studio.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

    from autoparser import TemplateSource


def create_app(
    initial: TemplateSource | None = None, *, host: str = "127.0.0.1", token: str | None = None
) -> web.Application:
    """The studio's aiohttp application, starting from ``initial`` (or the bundled example),
    answering only requests naming ``host`` and API calls carrying ``token`` (default: a
    random one, in ``app[autoparser.studio.app.TOKEN]``)."""
    from autoparser.studio.app import create_app as _create_app

    return _create_app(initial, host=host, token=token)


def run(
    initial: TemplateSource | None,
    host: str,
    port: int,
    token: str | None = None,
    **run_app_options: Any,
) -> None:
    """Serve the studio on ``host:port`` until interrupted; its page's URL carries
    ``token`` (``http://host:port/#token=...``)."""
    from aiohttp import web

    web.run_app(
        create_app(initial, host=host, token=token), host=host, port=port, **run_app_options
    )


__all__ = ["create_app", "run"]
