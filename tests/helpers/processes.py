"""Servers the tests run as subprocesses (llama-server, ``autoparser serve``, the studio):
a free port, the command and environment that run this checkout's CLI, and one way to
start a process and wait until it answers."""

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


class LaunchError(RuntimeError):
    """A process did not come up: its log's tail says why."""


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (at the time of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_env() -> dict[str, str]:
    """This environment, with this interpreter's sys.path for a child's imports."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def serve_command(backend: str, *flags: str) -> list[str]:
    """``autoparser serve`` in front of ``backend``, run by this interpreter."""
    return [sys.executable, "-m", "autoparser.cli", "serve", "--backend", backend, *flags]


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
