"""A real llama.cpp server (and ``autoparser serve`` in front of it) as subprocesses, for
the end-to-end tests and the serve benchmark: where scripts/build_llamacpp.sh caches the
binary and the vocabularies, and how each is started (``helpers.processes``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.processes import cli_env, free_port, serve_command, started

CACHE = Path.home() / ".cache" / "autoparser" / "llama.cpp"
SERVER = Path(os.environ.get("AUTOPARSER_LLAMA_SERVER", CACHE / "bin" / "llama-server"))
VOCAB = CACHE / "vocab" / "ggml-vocab-qwen2.gguf"  # byte-level BPE, ChatML's tokens
SPM_VOCAB = CACHE / "vocab" / "ggml-vocab-llama-spm.gguf"  # Llama 2's SentencePiece
MISSING = (
    f"no llama-server at {SERVER} (set AUTOPARSER_LLAMA_SERVER or run "
    f"scripts/build_llamacpp.sh) or no vocabulary at {VOCAB}"
)


def available() -> bool:
    """Whether the binary and the BPE vocabulary are there."""
    return SERVER.exists() and VOCAB.exists()


@contextmanager
def llama_server(
    model: Path, log: Path, *, context: int = 4096, slots: int = 2
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """llama-server on ``model`` (one thread, ``slots`` parallel sequences, its own
    template with ``--jinja``)."""
    port = free_port()
    cmd = [str(SERVER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", str(context), "-t", "1", "-np", str(slots), "--jinja"]
    with started(cmd, port, log) as up:
        yield up


@contextmanager
def autoparser_serve(
    backend: str, log: Path, *flags: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``autoparser serve`` in front of ``backend``, with this interpreter and sys.path."""
    port = free_port()
    with started(serve_command(backend, "--port", str(port), *flags), port, log, cli_env()) as up:
        yield up
