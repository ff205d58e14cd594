"""``--log-format json``: every line the process writes is one JSON object (startup,
aiohttp's banner, warnings about the engine, access lines, the exit error), and no line
holds a Python repr (issue 37 §3)."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("prometheus_client", reason="the serve extra is not installed")

from helpers.generate_cases import CASE_BY_NAME, TEMPLATES
from helpers.processes import cli_env, free_port, serve_command, stop

from autoparser.serve.observe import JsonLines

REPR = re.compile(r"\b[A-Z]\w+\((?:\w+=|\w+\()")  # ClientConnectorError(ConnectionKey(host=


def _dead_engine() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _lines(text: str) -> list[dict[str, object]]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    records = []
    for line in lines:
        record = json.loads(line)  # fails the test on any line that is not JSON
        assert isinstance(record, dict), line
        assert not REPR.search(line), line
        records.append(record)
    return records


def test_every_line_of_a_run_is_json(tmp_path: Path) -> None:
    port = free_port()
    template = str(TEMPLATES / CASE_BY_NAME["hermes"].template)
    # auto: the engine is asked at start, and it is down: a warning line
    cmd = serve_command(_dead_engine(), "--template", template, "--port", str(port))
    cmd += ["--log-format", "json"]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stderr=out, stdout=out, env=cli_env())
    url = f"http://127.0.0.1:{port}"
    try:
        status, deadline = 0, time.monotonic() + 120
        while status != 503:  # up, and telling that the engine is down
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
            try:
                urllib.request.urlopen(url + "/health", timeout=10)
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                pass
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=b'{"messages": [{"role": "user", "content": "hi"}]}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=10)
    finally:
        stop(proc)
    records = _lines(log.read_text())
    messages = [str(r.get("message", "")) for r in records]
    assert any(m.startswith("starting:") for m in messages)
    assert any("Running on" in m for m in messages)  # aiohttp's banner
    warning = next(r for r in records if str(r.get("message", "")).startswith("engine not"))
    assert warning["level"] == "warning" and "ClientConnectorError" in str(warning["message"])
    access = next(r for r in records if r.get("path") == "/v1/chat/completions")
    assert access["status"] == 503 and access["logger"] == "autoparser.serve.access"


def test_the_exit_error_is_json_too() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        cmd = serve_command(_dead_engine(), "--port", port, "--log-format", "json")
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=cli_env())
    assert result.returncode == 2
    last = _lines(result.stderr)[-1]
    assert last["level"] == "error" and "address already in use" in str(last["message"])


def test_a_traceback_is_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("now",), None)
        record.exc_info = sys.exc_info()
    line = JsonLines().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "failed now" and "ValueError: boom" in parsed["traceback"]
