"""Real agent CLIs (Claude Code, Codex CLI) against ``autoparser serve``, kept off the network.

What the end-to-end tests of tests/serve/test_app_agent_clis.py share:

- where scripts/setup_agents.sh put the pinned CLIs, and whether a test may skip without them
  (never in CI);
- a scripted engine answering like Qwen3 (``<think>``, ``<tool_call>{...}</tool_call>``): the
  serve stand-in, its reply picked by the script named ``[[key]]`` in the prompt and the number
  of tool results after it, so one script drives a whole agent loop;
- a recorder in front of serve (every request a CLI sends, its body kept) and a proxy catcher
  (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY point at it: any attempt to reach past 127.0.0.1 is
  recorded and refused);
- a home of the run's own (HOME, CODEX_HOME, XDG dirs, each CLI's switches that keep it from
  calling home), so nothing of the developer's machine is read or written;
- scrubbing a captured body of the run's temporary paths, for tests/data/agent_requests/.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import re
import struct
import subprocess
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest
from aiohttp import web

from autoparser import ChatTemplate
from helpers.paths import CORPUS_SKIP_REASON, TESTS_DIR, corpus_dir
from helpers.serve_standin import KEY, LoopThread, Reply, StandIn

AGENTS_DIR = Path(
    os.environ.get("AUTOPARSER_AGENTS_DIR") or Path.home() / ".cache" / "autoparser" / "agents"
)
FIXTURES = TESTS_DIR / "data" / "agent_requests"
# A hang fails the test instead of blocking CI; no assertion is made about time.
CLI_TIMEOUT = 240.0
TOOL_RESULT = "<tool_response>"  # how the Qwen3 template opens a tool result in the prompt


def cli_path(name: str) -> Path | None:
    """The pinned CLI ``name`` (claude | codex) installed by scripts/setup_agents.sh."""
    path = AGENTS_DIR / "node_modules" / ".bin" / name
    return path if path.exists() and os.access(path, os.X_OK) else None


def require_cli(name: str) -> Path:
    """The CLI's path; skips with the reason when it is absent, fails in CI (CI=true)."""
    path = cli_path(name)
    if path is None:
        _missing(f"{name} is not installed in {AGENTS_DIR} (scripts/setup_agents.sh)")
    return path


def qwen3_template() -> ChatTemplate:
    """The real Qwen3 template the scripted engine answers for, from the corpus; skips
    without the corpus, fails in CI (CI=true)."""
    root = corpus_dir()
    path = root / QWEN3 if root else None
    if path is None or not path.is_file():
        _missing(f"{QWEN3} is not in the template corpus ({CORPUS_SKIP_REASON})")
    return ChatTemplate.from_file(path)


QWEN3 = "Qwen-Qwen3-0.6B.jinja"


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the agent CLI tests: {reason}")
    pytest.skip(reason)


class ScriptedEngine(StandIn):
    """The llama.cpp-style stand-in, its answers scripted per agent loop: the prompt's last
    ``[[key]]`` names a script, and the number of tool results after that key is the step.
    A request with no tools in its prompt (an agent's side request: a title, a summary)
    gets a short plain answer; a step past the script's end repeats its last reply."""

    def __init__(self) -> None:
        super().__init__("llama.cpp")
        self.scripts: dict[str, list[str]] = {}

    def script(self, key: str, replies: list[str]) -> str:
        self.scripts[key] = replies
        return f"[[{key}]]"

    def _reply(self, prompt: str) -> Reply:
        found = list(KEY.finditer(prompt))
        known = [m for m in found if m.group(1) in self.scripts]
        if not known or "<tools>" not in prompt:
            return Reply("Noted.")
        last = known[-1]
        replies = self.scripts[last.group(1)]
        step = prompt.count(TOOL_RESULT, last.end())
        return Reply(replies[min(step, len(replies) - 1)])


def qwen3_call(name: str, arguments: Mapping[str, Any], thought: str) -> str:
    """A Qwen3 answer that thinks, then calls one tool."""
    call = json.dumps({"name": name, "arguments": arguments})
    return f"<think>\n{thought}\n</think>\n\n<tool_call>\n{call}\n</tool_call>"


def qwen3_answer(text: str, thought: str) -> str:
    """A Qwen3 answer that thinks, then answers in text."""
    return f"<think>\n{thought}\n</think>\n\n{text}"


@dataclasses.dataclass(frozen=True)
class Captured:
    """One request a CLI sent to serve, and serve's status for it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int


class Recorder:
    """A front for serve: forwards each request as is, streaming the answer back, and keeps
    what was sent with serve's status."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.seen: list[Captured] = []

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        return app

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with (
            aiohttp.ClientSession(auto_decompress=False) as session,
            session.request(
                request.method,
                self.upstream + request.path_qs,
                data=self.outgoing(request.path, raw) or None,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=CLI_TIMEOUT),
            ) as upstream,
        ):
            self.seen.append(
                Captured(request.method, request.path, kept_headers(headers), body, upstream.status)
            )
            response = web.StreamResponse(status=upstream.status)
            for name, value in upstream.headers.items():
                if name.lower() not in HOP_HEADERS:
                    response.headers[name] = value
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    def outgoing(self, path: str, raw: bytes) -> bytes:
        """The body forwarded to serve: the client's own (a capture past a server that
        refuses what it sends may override this)."""
        return raw

    def posts(self, path: str) -> list[Captured]:
        return [c for c in self.seen if c.method == "POST" and c.path == path]


HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}
# Headers worth keeping in a fixture (what a server may read); the rest (user agents with
# versions, session ids, stainless platform details) would only make fixtures noisy.
KEPT_HEADERS = {"anthropic-version", "anthropic-beta", "content-type", "accept", "openai-beta"}


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower() in KEPT_HEADERS}


class ProxyCatcher:
    """What HTTP_PROXY/HTTPS_PROXY/ALL_PROXY point at: records the first line of every
    attempt (``CONNECT host:443 ...``, ``GET http://...``) and refuses it."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=10)
            self.attempts.append(line.decode(errors="replace").strip() or "<empty>")
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            self.attempts.append("<no request line>")
        finally:
            writer.close()

    def start(self, loop: LoopThread) -> str:
        async def start() -> str:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            port = self._server.sockets[0].getsockname()[1]
            return f"http://127.0.0.1:{port}"

        return str(loop.call(start))

    def stop(self, loop: LoopThread) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        loop.call(stop)


def isolated_env(home: Path, proxy: str) -> dict[str, str]:
    """An environment of the run's own: a fresh HOME, config and temporary dirs, every
    proxy variable at the catcher (127.0.0.1 exempt), no variable of the developer's that a
    CLI reads."""
    keep = {"PATH", "LANG", "LC_ALL", "TERM", "SYSTEMROOT"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    # Claude Code keeps session files (an attached image, among others) under the temporary
    # directory: the run's own too.
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_COLOR="1",
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def claude_env(home: Path, proxy: str, base_url: str) -> dict[str, str]:
    """Claude Code at serve: its documented switches against every non-essential call
    (telemetry, error reporting, auto-update, feedback surveys, model catalogue look-ups)."""
    env = isolated_env(home, proxy)
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="sk-local-autoparser",
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_BUG_COMMAND="1",
        DISABLE_COST_WARNINGS="1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
        CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
        CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL="1",
    )
    return env


def claude_command(cli: Path, prompt: str, *tools: str) -> list[str]:
    """``claude -p`` as a user runs it non-interactively, streaming as it does by default
    (text output), the given tools allowed without asking."""
    return [
        str(cli),
        "-p",
        prompt,
        "--model",
        "qwen3",
        "--allowedTools",
        ",".join(tools),
        "--permission-mode",
        "acceptEdits",
    ]


# Codex's config: a provider at serve speaking the Responses API, and every feature that
# would reach OpenAI, GitHub or ChatGPT off (analytics, feedback, update checks, plugins and
# their catalogue, OpenTelemetry export). Hosted web search stays at its default: it is a
# tool the server would run (Codex only lists it in its requests), and what Codex sends by
# default is what serve has to take.
CODEX_CONFIG = """\
model = "{model}"
model_provider = "autoparser"
check_for_update_on_startup = false

[model_providers.autoparser]
name = "autoparser serve"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "AUTOPARSER_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
"""


def codex_env(home: Path, proxy: str, base_url: str, model: str = "qwen3") -> dict[str, str]:
    """Codex at serve, its CODEX_HOME in the run's home with the config above. ``model``
    picks Codex's metadata for the model, and so its tools: for a name it knows (gpt-5.5)
    it sends ``apply_patch`` as a freeform tool with a Lark grammar, for one it does not
    (qwen3) it falls back on defaults without it."""
    env = isolated_env(home, proxy)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = CODEX_CONFIG.format(base_url=base_url, model=model)
    (codex_home / "config.toml").write_text(config)
    env.update(CODEX_HOME=str(codex_home), AUTOPARSER_API_KEY="sk-local-autoparser")
    return env


def claude_image_command(cli: Path, image: Path, prompt: str) -> tuple[list[str], str]:
    """``claude -p`` given a user message with an image attached, as an SDK or script sends
    one (stream-json input, one message a line): the command and its stdin."""
    command = [str(cli), "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    content = [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(image.read_bytes()).decode(),
            },
        },
        {"type": "text", "text": prompt},
    ]
    line = {"type": "user", "message": {"role": "user", "content": content}}
    return [*command, "--verbose", "--model", "qwen3"], json.dumps(line) + "\n"


def codex_command(cli: Path, prompt: str, image: Path | None = None) -> list[str]:
    """``codex exec`` as a user runs it non-interactively (its default streamed output),
    commands run without asking and without a sandbox (the test's directory is the
    workspace; the container may not offer Codex's sandbox); ``image`` attached with -i."""
    return [
        str(cli),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        *([f"--image={image}"] if image else []),  # (-i takes several: not before the prompt)
        prompt,
    ]


@dataclasses.dataclass(frozen=True)
class Run:
    """A CLI's run: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(command: list[str], cwd: Path, env: dict[str, str], stdin: str = "") -> Run:
    """Run a CLI to its end, given ``stdin``; a hang past CLI_TIMEOUT fails the test."""
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{Path(command[0]).name} did not finish in {CLI_TIMEOUT:.0f} s: {exc.stderr!r}"
        )
    return Run(done.returncode, done.stdout, done.stderr)


def run_replacements(work: Path, home: Path) -> dict[str, str]:
    """A run's machine-specific strings and their placeholders: the working directory and
    home (also as Claude Code's project slug of a path, every non-alphanumeric a dash) and
    the kernel release Claude Code puts in its system prompt."""
    out = {os.uname().release: "6.0.0"}
    for real, placeholder in ((work, "/home/user/project"), (home, "/home/user")):
        out[str(real)] = placeholder
        out[SLUG.sub("-", str(real))] = SLUG.sub("-", placeholder)
    return out


SLUG = re.compile(r"[^A-Za-z0-9]")


def run_until(command: list[str], cwd: Path, env: dict[str, str], seen: Callable[[], bool]) -> None:
    """Run a CLI until ``seen()`` holds (then stop it) or it exits; a CLI still going at
    CLI_TIMEOUT without it fails the test."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + CLI_TIMEOUT
        while not seen() and proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"{Path(command[0]).name}: nothing seen in {CLI_TIMEOUT:.0f} s")
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def scrub(value: Any, replacements: Mapping[str, str]) -> Any:
    """A captured body with each machine-specific string (temporary paths, the user's
    name) replaced by its placeholder, and dates of the run's environment text blanked."""
    text = json.dumps(value, ensure_ascii=False)
    for real, placeholder in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(real)[1:-1], placeholder)
    text = DATE.sub("2026-01-01", text)
    return json.loads(text)


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def save_fixture(name: str, captured: Captured, replacements: Mapping[str, str]) -> Path:
    """Write one captured request under tests/data/agent_requests/<name>.json."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path = FIXTURES / f"{name}.json"
    record = {
        "method": captured.method,
        "path": captured.path,
        "headers": captured.headers,
        "body": scrub(captured.body, replacements),
    }
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def load_fixture(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def tiny_png(width: int = 4, height: int = 4) -> bytes:
    """A valid RGB PNG of one colour, made here (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x20\x80\xe0" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
