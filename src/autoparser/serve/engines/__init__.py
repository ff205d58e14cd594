"""The completion engines serve talks to, one dialect module each, and the one registry of
them: ``DIALECTS``, in the order auto-detection tries them (the OpenAI-style dialect, which
matches any engine, last). The ``--backend-kind`` choices, the config's check and the
factory (``backend.make_backend``) all read it. A new engine is one module here: its
``Dialect`` subclass (``base.py``), and its class in ``DIALECTS``.

Loading this registry needs no aiohttp (the dialects talk through ``base.Channel``): the CLI
offers the kinds without the serve extra installed.
"""

from __future__ import annotations

from autoparser.serve.engines.base import Dialect
from autoparser.serve.engines.llama_cpp import LlamaCpp
from autoparser.serve.engines.openai import OpenAIStyle
from autoparser.serve.engines.sglang import SGLang
from autoparser.serve.engines.vllm import VLLM

DIALECTS: tuple[type[Dialect], ...] = (LlamaCpp, VLLM, SGLang, OpenAIStyle)
KINDS: dict[str, type[Dialect]] = {dialect.kind: dialect for dialect in DIALECTS}
# What --backend-kind / ServeConfig.backend_kind accept: "auto" (detected), or a kind.
KIND_CHOICES: tuple[str, ...] = ("auto", *sorted(KINDS))


def dialect_of(kind: str) -> type[Dialect]:
    """The dialect serving ``kind``; a ValueError naming the choices for any other."""
    found = KINDS.get(kind)
    if found is None:
        raise ValueError(f"backend kind must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
    return found


__all__ = ["DIALECTS", "KINDS", "KIND_CHOICES", "Dialect", "dialect_of"]
