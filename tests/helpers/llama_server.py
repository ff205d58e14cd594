"""A real llama.cpp server (and ``autoparser serve``) as subprocesses, for the end-to-end
tests and the serve benchmark: where scripts/build_llamacpp.sh caches the binary and the
vocabularies, and one way to start a process and wait until it answers ``/health``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path.home() / ".cache" / "autoparser" / "llama.cpp"
SERVER = Path(os.environ.get("AUTOPARSER_LLAMA_SERVER", CACHE / "bin" / "llama-server"))
VOCAB = CACHE / "vocab" / "ggml-vocab-qwen2.gguf"  # byte-level BPE, ChatML's tokens
SPM_VOCAB = CACHE / "vocab" / "ggml-vocab-llama-spm.gguf"  # Llama 2's SentencePiece
MISSING = (
    f"no llama-server at {SERVER} (set AUTOPARSER_LLAMA_SERVER or run "
    f"scripts/build_llamacpp.sh) or no vocabulary at {VOCAB}"
)


class LaunchError(RuntimeError):
    """A process did not come up: its log's tail says why."""


def available() -> bool:
    """Whether the binary and the BPE vocabulary are there."""
    return SERVER.exists() and VOCAB.exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, seconds: float = 120) -> None:
    """Wait until ``url/health`` answers 200; LaunchError if the process exits first or
    the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LaunchError(f"{url}: process exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as f:
                if f.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise LaunchError(f"{url}: not up: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate (resuming it first, should a test have stopped it) and reap."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
    proc.wait(timeout=30)


@contextmanager
def started(
    cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``cmd`` (which listens on ``port``), its output in ``log``; its URL and process
    once it answers, stopped on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc, log)
        yield url, proc
    finally:
        stop(proc)


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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    port = free_port()
    cmd = [sys.executable, "-m", "autoparser.cli", "serve", "--backend", backend]
    cmd += ["--port", str(port), *flags]
    with started(cmd, port, log, env) as up:
        yield up
