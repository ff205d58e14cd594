"""The registry of engine dialects: one class per dialect module, in detection order (the
OpenAI-style fallback last), the one list the factory, the config's check and the CLI's
``--backend-kind`` choices read."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from autoparser.serve import engines
from autoparser.serve.app import ServeConfig
from autoparser.serve.engines import DIALECTS, KIND_CHOICES, KINDS, dialect_of
from autoparser.serve.engines.base import Dialect
from autoparser.serve.engines.openai import OpenAIStyle

# The modules of serve/engines/ that are not a dialect: what every dialect shares.
SHARED = {"base", "transport", "protection", "plain_text", "backend"}


def test_the_backend_registry_is_the_one_list() -> None:
    """Each kind names the class that serves it; the factory, the config and the CLI read it."""
    import aiohttp

    from autoparser.cli import build_argument_parser
    from autoparser.serve.engines.backend import make_backend

    for kind, cls in KINDS.items():
        assert issubclass(cls, Dialect) and cls.kind == kind

    async def made() -> list[str]:
        async with aiohttp.ClientSession() as session:
            return [make_backend(k, "http://x", session).kind for k in KINDS]

    assert asyncio.run(made()) == list(KINDS)
    with pytest.raises(ValueError, match=r"auto, llama\.cpp, openai"):
        ServeConfig("http://x", backend_kind="tgi")
    for kind in KIND_CHOICES:
        args = build_argument_parser().parse_args(
            ["serve", "--backend", "u", "--backend-kind", kind]
        )
        assert args.backend_kind == kind


def test_the_choices_are_auto_and_every_kind_and_keep_the_old_ones() -> None:
    assert KIND_CHOICES[0] == "auto" and set(KIND_CHOICES[1:]) == set(KINDS)
    assert {"llama.cpp", "openai"} <= set(KINDS)  # the --backend-kind values before dialects
    assert len(KINDS) == len(DIALECTS)  # no two dialects claim a kind


def test_every_dialect_module_registers_its_dialect() -> None:
    """A new engine is one module: its Dialect subclass, listed in DIALECTS."""
    names = {m.name for m in pkgutil.iter_modules(engines.__path__)} - SHARED
    assert names >= {"llama_cpp", "vllm", "sglang", "openai"}
    for name in sorted(names):
        module = importlib.import_module(f"autoparser.serve.engines.{name}")
        own = [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, Dialect) and cls.__module__ == module.__name__
        ]
        assert len(own) == 1, f"{name}: one dialect per module, found {own}"
        assert own[0] in DIALECTS, f"{name}: {own[0].__name__} is not in DIALECTS"


def test_detection_tries_the_fallback_last() -> None:
    assert DIALECTS[-1] is OpenAIStyle
    assert DIALECTS[0].kind == "llama.cpp"  # GET /props first, as before dialects


def test_an_unknown_kind_names_the_kinds() -> None:
    assert dialect_of("vllm").kind == "vllm"
    with pytest.raises(ValueError, match=r"llama\.cpp, openai, sglang, vllm, got 'tgi'"):
        dialect_of("tgi")


def test_the_registry_loads_without_aiohttp() -> None:
    """The CLI offers the kinds without the serve extra: the registry and every dialect
    reach their engine through ``base.Channel``, never aiohttp (only the transport does)."""
    code = (
        "import sys, autoparser.serve.engines as e\n"
        "assert e.KIND_CHOICES and 'aiohttp' not in sys.modules, 'aiohttp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
