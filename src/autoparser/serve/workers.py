"""Several serve processes on one port (``--workers N``): a parent that listens, N workers.

One Python process answers on one core; a GPU engine behind it can take more. The parent
binds the address once (a port clash ends it at once, before any worker starts), then
starts N workers, each a full serve (its own event loop, caches and engine connections)
accepting on that one socket, so the kernel hands each new connection to a worker that is
waiting for one. Nothing is shared between workers but the socket and the metrics:
``/metrics`` of any worker reports the sums over all of them (``prometheus_client``'s
multiprocess mode, in a private directory the parent makes and removes).

The parent forwards SIGTERM and SIGINT to every worker, each of which drains as a single
serve does (``--grace-period``), and exits once all have. A worker that dies on its own
stops the others, and the parent exits with its status: a supervisor (systemd, Kubernetes)
restarts the whole server, as it would a single process. A worker whose parent is gone
stops too.

The workers are new interpreters (``python -m autoparser serve``), not forks: they read
the parent's resolved settings (flags, environment and config file already layered)
from an environment variable, which only their user can read, unlike a command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

# What a worker is handed (names outside the AUTOPARSER_* settings namespace).
SETTINGS_VARIABLE = "_AUTOPARSER_SERVE_SETTINGS"
SOCKET_VARIABLE = "_AUTOPARSER_SERVE_SOCKET"
METRICS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name
MAX_WORKERS = 256
# How often a worker looks whether its parent is still there.
PARENT_CHECK_SECONDS = 1.0

log = logging.getLogger("autoparser.serve")


def worker_settings(args: argparse.Namespace) -> str:
    """The resolved settings as JSON text (what a worker rebuilds its arguments from)."""
    plain = (str, int, float, bool, list, tuple, type(None))
    return json.dumps({k: v for k, v in vars(args).items() if isinstance(v, plain)})


def settings_of(text: str) -> argparse.Namespace:
    """The arguments ``worker_settings`` wrote, one worker in: never starts workers itself."""
    values = json.loads(text)
    if not isinstance(values, dict):
        raise ValueError("worker settings: not a JSON object")
    values["workers"] = 1
    return argparse.Namespace(**values)


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound once for every worker (OSError on a clash,
    worded as a single serve words it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=1024)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def run_workers(args: argparse.Namespace, count: int) -> int:
    """Start ``count`` workers on one socket and wait for them; the exit status."""
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"--workers: must be between 1 and {MAX_WORKERS}, got {count}")
    sock = listen(args.host, args.port)
    metrics = tempfile.mkdtemp(prefix="autoparser-metrics-")  # 0700: this user's only
    env = {
        **os.environ,
        SETTINGS_VARIABLE: worker_settings(args),
        SOCKET_VARIABLE: str(sock.fileno()),
        METRICS_VARIABLE: metrics,
    }
    command = [sys.executable, "-m", "autoparser", "serve"]
    live: dict[int, subprocess.Popen[bytes]] = {}
    stopping: list[int] = []  # the signal that stops the workers, once one came

    def stop_all(signum: int) -> None:
        if not stopping:
            stopping.append(signum)
        for proc in live.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop_all(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    status = 0
    try:
        for _ in range(count):
            # Their own session: a terminal's Ctrl-C reaches the parent only, which
            # forwards it once (a second SIGINT would cut a worker's drain short).
            proc = subprocess.Popen(
                command, env=env, pass_fds=(sock.fileno(),), start_new_session=True
            )
            live[proc.pid] = proc
        log.info(
            "workers: %d on %s:%d (pids %s)",
            count,
            args.host,
            args.port,
            " ".join(map(str, live)),
        )
        sock.close()  # the workers hold it now
        while live:
            pid, wait_status = os.wait()
            if pid not in live:
                continue
            proc = live.pop(pid)
            proc.returncode = os.waitstatus_to_exitcode(wait_status)
            _mark_dead(pid, metrics)
            if not stopping:
                log.error(
                    "worker %d exited with status %d: stopping the others", pid, proc.returncode
                )
                status = proc.returncode or 1
                stop_all(signal.SIGTERM)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for proc in live.values():  # only after an error in this loop
            proc.kill()
        sock.close()
        shutil.rmtree(metrics, ignore_errors=True)
    return status


def _mark_dead(pid: int, metrics: str) -> None:
    """Drop a finished worker's live gauges (requests in flight) from the sums."""
    from prometheus_client import multiprocess

    with contextlib.suppress(OSError):
        multiprocess.mark_process_dead(pid, metrics)  # type: ignore[no-untyped-call]


async def watch_parent(parent: int) -> None:
    """Stop this worker (as SIGTERM does: draining) once its parent is gone."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_CHECK_SECONDS)
    log.warning("the parent process is gone: stopping")
    os.kill(os.getpid(), signal.SIGTERM)


def orphan_guard(parent: int) -> Callable[[web.Application], AsyncIterator[None]]:
    """An aiohttp cleanup context running ``watch_parent`` for the application's life."""

    async def guard(_app: web.Application) -> AsyncIterator[None]:
        task = asyncio.ensure_future(watch_parent(parent))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return guard


def worker_start(environ: Mapping[str, str]) -> tuple[argparse.Namespace, socket.socket] | None:
    """The settings and socket a parent handed this process, or None when it is no worker
    (ValueError when only one of them was handed)."""
    text, fd = environ.get(SETTINGS_VARIABLE), environ.get(SOCKET_VARIABLE)
    if text is None and fd is None:
        return None
    if text is None or fd is None or not fd.isdigit():
        raise ValueError("started as a worker of serve --workers without its settings or socket")
    return settings_of(text), socket.socket(fileno=int(fd))
