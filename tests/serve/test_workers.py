"""``serve --workers N``: one bound port, N serve processes, metrics summed, one SIGTERM.

The processes are real (the CLI, a stand-in engine in this process). Nothing here asserts
a duration: waits are bounded only so that a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

from helpers.generate_cases import CASE_BY_NAME, TEMPLATES
from helpers.processes import cli_env, free_port, serve_command, wait_up
from helpers.serve_standin import LoopThread, StandIn

from autoparser.serve.workers import (
    MAX_WORKERS,
    SETTINGS_VARIABLE,
    SOCKET_VARIABLE,
    listen,
    run_workers,
    settings_of,
    worker_settings,
    worker_start,
)

HI = [{"role": "user", "content": "[[k]]"}]
REQUESTS = 24
WAIT = 120  # seconds before a hang fails the test


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux: /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    if not path.exists():
        pytest.skip("no /proc children list on this platform")
    return [int(p) for p in path.read_text().split()]


def _chat(url: str) -> int:
    body = json.dumps({"messages": HI}).encode()
    request = urllib.request.Request(
        url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=WAIT) as answer:
        assert json.loads(answer.read())["choices"][0]["message"]["content"] == "Hello."
        return answer.status


def _metric(text: str, name: str, labels: str) -> float:
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


class Served:
    """serve with two workers in front of a stand-in engine; its log."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def answered_by(self) -> set[str]:
        """The workers named in the access lines so far."""
        return set(re.findall(r"\bworker=(\d+)", self.log.read_text()))


def _wait_for_workers(log: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    """Until ``count`` workers say they accept (aiohttp's "Running on" line each); bounded
    by WAIT only so that a hang fails instead of blocking the suite."""
    deadline = time.monotonic() + WAIT
    while log.read_text().count("Running on") < count:
        assert proc.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "the workers did not all start"
        time.sleep(0.1)


@pytest.fixture
def served(loop: LoopThread, tmp_path: Path) -> Iterator[Served]:
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    backend = loop.serve(standin.app())
    port = free_port()
    template = TEMPLATES / CASE_BY_NAME["hermes"].template
    cmd = serve_command(backend, "--template", str(template), "--port", str(port))
    cmd += ["--workers", "2", "--grace-period", "2"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=cli_env())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc, log)
        _wait_for_workers(log, 2, proc)  # both accepting, however slowly the second started
        yield Served(url, proc, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=WAIT)
        assert "Traceback" not in log.read_text()


def test_workers_answer_on_one_port_and_metrics_are_summed(served: Served) -> None:
    workers = _children(served.proc.pid)
    assert len(workers) == 2
    sent = 0
    # Until both workers have answered (the kernel hands connections to whichever waits).
    while len(served.answered_by()) < 2 and sent < REQUESTS * 20:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda _: _chat(served.url), range(REQUESTS)))
        assert statuses == [200] * REQUESTS
        sent += REQUESTS
    assert served.answered_by() == {str(pid) for pid in workers}
    with urllib.request.urlopen(served.url + "/metrics", timeout=WAIT) as answer:
        text = answer.read().decode()
    labels = 'route="/v1/chat/completions",status="200"'
    # Whichever worker answers /metrics, it reports every worker's requests.
    assert _metric(text, "autoparser_requests_total", labels) == sent
    assert _metric(text, "autoparser_requests_in_flight", "") <= 1  # the /metrics request


def test_sigterm_to_the_parent_drains_every_worker(served: Served) -> None:
    proc = served.proc
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT) == 0
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_worker_that_dies_stops_the_server(served: Served) -> None:
    """A supervisor sees the server die and restarts it whole."""
    proc = served.proc
    first, *_ = _children(proc.pid)
    os.kill(first, signal.SIGKILL)
    assert proc.wait(timeout=WAIT) != 0


def test_a_port_clash_ends_the_parent_before_any_worker(loop: LoopThread) -> None:
    backend = loop.serve(StandIn("llama.cpp").app())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        cmd = serve_command(backend, "--port", str(port), "--workers", "3")
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT, env=cli_env())
    assert result.returncode == 2
    assert "address already in use" in result.stderr and "Traceback" not in result.stderr
    assert "workers:" not in result.stderr  # no worker was started


@pytest.mark.parametrize("count", [0, -1, MAX_WORKERS + 1])
def test_a_worker_count_out_of_range_is_refused(count: int) -> None:
    args = argparse.Namespace(host="127.0.0.1", port=free_port())
    with pytest.raises(ValueError, match="--workers"):
        run_workers(args, count)


def test_settings_reach_a_worker_whole_and_never_fan_out_again() -> None:
    args = argparse.Namespace(
        backend="http://e", api_key=["k1", "k2"], workers=4, max_concurrent=9, func=print
    )
    back = settings_of(worker_settings(args))
    assert back.backend == "http://e" and back.api_key == ["k1", "k2"]
    assert back.max_concurrent == 9 and back.workers == 1
    assert not hasattr(back, "func")  # a function is not a setting
    with pytest.raises(ValueError, match="not a JSON object"):
        settings_of("[1]")


def test_the_socket_is_bound_once_and_inheritable() -> None:
    sock = listen("127.0.0.1", 0)
    try:
        assert sock.get_inheritable()
        with pytest.raises(OSError, match="address already in use"):
            listen("127.0.0.1", sock.getsockname()[1])
    finally:
        sock.close()


def test_a_worker_is_handed_both_its_settings_and_its_socket() -> None:
    assert worker_start({}) is None
    settings = worker_settings(argparse.Namespace(backend="http://e"))
    for half in ({SETTINGS_VARIABLE: settings}, {SOCKET_VARIABLE: "3"}):
        with pytest.raises(ValueError, match="without its settings or socket"):
            worker_start(half)
    sock = listen("127.0.0.1", 0)
    try:
        handed = worker_start({SETTINGS_VARIABLE: settings, SOCKET_VARIABLE: str(sock.fileno())})
        assert handed is not None and handed[0].backend == "http://e"
        assert handed[1].fileno() == sock.fileno()
        handed[1].detach()  # the same descriptor: closed once, below
    finally:
        sock.close()
