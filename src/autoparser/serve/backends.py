"""The engine-neutral names the request routes import from here (``chat_completions``,
``agent_apis``): a generation, how it finished, the engine's error. They live in
``serve/engines/base.py`` with the engines (``serve/engines/``); this module only names them
for the routes that read them from their old place."""

from __future__ import annotations

from autoparser.serve.engines.base import BackendError, Finished, Generation

__all__ = ["BackendError", "Finished", "Generation"]
