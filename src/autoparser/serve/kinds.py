"""The serve backends, by kind: the one list the factory, the config's checks and messages,
and the CLI's choices read.

Kept apart from ``backends.py`` (which needs aiohttp) so that the CLI can offer the kinds
without the serve extra installed. A new engine: its ``Backend`` subclass in ``backends.py``
(with ``kind`` set to its name) and a line here; tests/serve/test_app.py checks both agree.
"""

from __future__ import annotations

# kind -> the name of its class in autoparser.serve.backends
BACKENDS: dict[str, str] = {
    "llama.cpp": "LlamaCppBackend",
    "openai": "OpenAIBackend",
}
BACKEND_KINDS: tuple[str, ...] = tuple(BACKENDS)
# What --backend-kind / ServeConfig.backend_kind accept: a kind, or "auto" (GET /props).
KIND_CHOICES: tuple[str, ...] = ("auto", *BACKEND_KINDS)
