"""The command line as a new user meets it, run as a real process (exit code and message):
clean errors with exit 2, stdin wherever a file is read, help when bare, quiet pipes,
a schema hint the CLI can follow, light start-up, and many templates in one process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.paths import REPO_ROOT

ROOT = REPO_ROOT
EXAMPLES = ROOT / "src/autoparser/examples"
TEMPLATE = str(EXAMPLES / "chatml_tools.jinja")
TOOLS = str(EXAMPLES / "tools.json")
OUTPUT = (EXAMPLES / "model_output.txt").read_text(encoding="utf-8")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _run(*args: str, stdin: bytes | str = b"") -> subprocess.CompletedProcess[str]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run(
        [sys.executable, "-m", "autoparser.cli", *args],
        input=data,
        capture_output=True,
        env=ENV,
        timeout=300,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _clean_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done
    assert done.stderr.startswith("autoparser: error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_non_utf8_template_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.jinja"
    bad.write_bytes("{{ 'café' }}".encode("latin-1"))
    for command in ("render", "caps", "analyze"):
        _clean_error(_run(command, str(bad)), f"{bad}: not UTF-8 text", "0xe9")
    _clean_error(_run("render", "-", stdin=bad.read_bytes()), "stdin: not UTF-8")
    _clean_error(_run("studio", str(bad), "--no-browser"), f"{bad}: not UTF-8 text")
    _clean_error(_run("studio", str(tmp_path / "none.jinja"), "--no-browser"), "no such file")
    config = tmp_path / "tokenizer_config.json"
    config.write_bytes(b'{"chat_template": "\xe9"}')
    _clean_error(_run("render", str(config)), "not UTF-8")


def test_serve_with_an_unreachable_backend_starts_and_says_why() -> None:
    """An engine that is down at start is no crash and no traceback (issue 22: startup never
    waits on the engine): serve starts, names the engine in one startup line, answers
    /health with 503 and the reason, and SIGTERM ends it with exit 0."""
    pytest.importorskip("aiohttp", reason="serve needs the serve extra (aiohttp)")
    ports = []
    for _ in range(2):  # ports nothing listens on once closed: the engine's, serve's
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    engine, port = ports
    command = [sys.executable, "-m", "autoparser.cli", "serve", "--backend"]
    command += [f"http://127.0.0.1:{engine}", "--template", TEMPLATE, "--port", str(port)]
    proc = subprocess.Popen(command, env=ENV, stderr=subprocess.PIPE, text=True)
    try:
        health = None
        for _ in range(600):  # bounded: 60 s at most
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    pass
            except urllib.error.HTTPError as exc:
                health = (exc.code, json.loads(exc.read()))
                break
            except OSError:
                time.sleep(0.1)
        assert health is not None and health[0] == 503, health
        assert "unreachable" in health[1]["reason"], health
        assert f"127.0.0.1:{engine}" not in health[1]["reason"]  # no URL in a response
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert f"engine=http://127.0.0.1:{engine}" in stderr.splitlines()[0], stderr


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_template_from_stdin(name: str) -> None:
    from_file = _run("render", TEMPLATE)
    from_stdin = _run("render", name, stdin=Path(TEMPLATE).read_text(encoding="utf-8"))
    assert from_stdin.returncode == 0 and from_stdin.stdout == from_file.stdout
    assert from_file.stdout.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_output_and_tools_from_stdin(name: str, tmp_path: Path) -> None:
    piped = _run("parse", TEMPLATE, "--tools", TOOLS, stdin=OUTPUT)
    named = _run("parse", TEMPLATE, "--tools", TOOLS, "--output", name, stdin=OUTPUT)
    assert piped.returncode == named.returncode == 0
    assert json.loads(named.stdout) == json.loads(piped.stdout)
    assert json.loads(named.stdout)["tool_calls"][0]["function"]["name"] == "get_weather"
    out = tmp_path / "out.txt"
    out.write_text(OUTPUT, encoding="utf-8")
    tools_piped = _run(
        "parse", TEMPLATE, "--tools", name, "--output", str(out), stdin=Path(TOOLS).read_text()
    )
    assert json.loads(tools_piped.stdout) == json.loads(piped.stdout)


def test_stdin_is_read_once() -> None:
    done = _run("parse", "-", "--output", "-", stdin=Path(TEMPLATE).read_text())
    _clean_error(done, "stdin is already read for the template")


def test_bare_command_prints_help() -> None:
    done = _run()
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: autoparser")
    for command in ("render", "analyze", "parse", "grammar", "serve", "studio"):
        assert command in done.stdout
    assert "print the differential analysis of a template" in done.stdout  # help, not usage


def test_piping_into_head_ends_quietly() -> None:
    """The reader closes the pipe after one line; the writer stops without a word."""
    many = [TEMPLATE] * 400  # ~1 MB of JSON lines, far past a pipe's buffer
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoparser.cli", "analyze", "--jsonl", "--json", *many],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert json.loads(first)["ok"] is True
    assert err == "" and proc.returncode == 0


def test_schema_error_hint_is_one_the_cli_can_follow(tmp_path: Path) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object", "if": {"type": "object"}}},
        }
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools), encoding="utf-8")
    done = _run("grammar", TEMPLATE, "--tools", str(path))
    _clean_error(done, "tools[0].function.parameters", "'if'", "remove or rewrite that keyword")
    assert "lenient" not in done.stderr


def test_version_and_help_do_not_load_the_library() -> None:
    """What keeps them fast (the time itself: benchmarks/bench_cli_startup.py)."""
    for args in (["--version"], ["--help"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "autoparser.cli", *args],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
        )
        assert done.returncode == 0
        loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
        for heavy in ("jinja2", "autoparser.chat", "autoparser.template", "aiohttp", "gguf"):
            assert heavy not in loaded, f"{args} imports {heavy}"
    assert _run("--version").stdout.startswith("autoparser ")


def test_analyze_many_templates_as_json_lines(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% if %}", encoding="utf-8")
    missing = tmp_path / "missing.jinja"
    done = _run("analyze", TEMPLATE, str(broken), str(missing), TEMPLATE)
    assert done.returncode == 2 and done.stderr == ""
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["ok"] for r in rows] == [True, False, False, True]
    assert [r["template"] for r in rows] == [TEMPLATE, str(broken), str(missing), TEMPLATE]
    assert "syntax error at line 1" in rows[1]["error"]
    assert "no such file" in rows[2]["error"]
    single = json.loads(_run("analyze", "--json", TEMPLATE).stdout)
    assert rows[0]["tools"] == single["tools"]["format"]["mode"]
    assert rows[0]["verified"] is (not single["verification"]["failures"])
    full = _run("analyze", "--jsonl", "--json", TEMPLATE)
    assert full.returncode == 0
    assert json.loads(full.stdout)["analysis"] == single


def test_studio_prints_its_url_once_listening_and_a_taken_port_is_clean() -> None:
    pytest.importorskip("aiohttp", reason="studio needs the serve extra (aiohttp)")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run("studio", TEMPLATE, "--no-browser", "--port", str(port))
        _clean_error(done, "address already in use")
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoparser.cli", "studio", TEMPLATE, "--no-browser"],
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.match(r"autoparser studio: (http://127\.0\.0\.1:\d+/)#token=([\w-]+) ", line)
        assert found, line
        request = urllib.request.Request(
            found.group(1) + "api/template", headers={"X-Studio-Token": found.group(2)}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert json.loads(answer.read())["name"] == "chatml_tools.jinja"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
