"""Every code block of README.md and docs/*.md runs, so the docs cannot drift from the code.

A ``python`` block runs with the blocks before it in the same document (one namespace per
document, in order), in a folder holding the example files autoparser ships
(``src/autoparser/examples``). A block that talks to ``http://127.0.0.1:8000`` talks to
``autoparser serve`` in front of a stand-in engine replaying the shipped model output. An
``sh`` block's ``autoparser`` commands run through the CLI (``serve`` and ``studio`` only
parse their arguments and load the template they name: they would listen forever); its other
lines name an outside program, each listed in ``EXTERNAL`` with what the test checks of it
instead. A block without a language is a drawing or an output listing, and ``text`` a
signature sketch: not code; a ``toml`` block (a configuration file) must parse. Figures quoted
in README.md live in docs/performance.md alone.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT

from autoparser import ChatTemplate
from autoparser.cli import build_argument_parser, main
from autoparser.examples import example_path

ROOT = REPO_ROOT
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
LANGUAGES = {"", "python", "sh", "text", "toml"}
SERVER = "http://127.0.0.1:8000"
# Outside programs the docs show, and what stands for running them here.
EXTERNAL = {
    "python3 -m venv": "the install line: pyproject.toml is the project's",
    ". .venv/bin/activate": "the install line",
    "pip install": "every extra named exists in pyproject.toml",
    "python -m pytest": "the suite itself",
    "llama-server": "llama.cpp's server (tests/serve/test_app_llama_server.py runs a real one)",
    "vllm serve": "vLLM (tests/integrations/vllm/test_parsers.py runs the real one)",
    "python -m sglang.launch_server": (
        "SGLang (tests/integrations/test_adapter_contract.py runs its real parser classes)"
    ),
    "export ": "an environment variable the commands after it read",
    "claude ": "Claude Code (tests/serve/test_app_agent_clis.py runs the real one, so configured)",
    "codex": "Codex CLI (tests/serve/test_app_agent_clis.py runs the real one, so configured)",
}


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, language, code) of every fenced block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)
    ]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _with(language: str) -> list[Path]:
    return [p for p in DOCS if any(lang == language for _, lang, _ in blocks(p))]


@pytest.fixture
def examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("chatml_tools.jinja", "conversation.json", "tools.json", "model_output.txt"):
        shutil.copy(example_path(name), tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@contextlib.contextmanager
def _server() -> Iterator[str]:
    """``autoparser serve`` (the example template) before an engine replaying the example
    output; its base URL."""
    pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
    from helpers.serve_standin import LoopThread, Reply, StandIn

    from autoparser import ChatTemplate
    from autoparser.serve import create_app
    from autoparser.serve.app import ServeConfig

    output = example_path("model_output.txt").read_text(encoding="utf-8")

    class Replay(StandIn):
        def _reply(self, prompt: str) -> Reply:
            return Reply(output)

    loop = LoopThread()
    try:
        engine = loop.serve(Replay("llama.cpp").app())
        template = ChatTemplate.from_file(example_path())
        yield loop.serve(create_app(ServeConfig(engine, template=template)))
    finally:
        loop.close()


def test_docs_use_known_block_languages() -> None:
    found = {(_name(p), line, lang) for p in DOCS for line, lang, _ in blocks(p)}
    unknown = sorted(f for f in found if f[2] not in LANGUAGES)
    assert not unknown, f"blocks in a language this test does not run: {unknown}"
    assert any(lang == "python" for *_, lang in found)


@pytest.mark.parametrize("path", _with("python"), ids=_name)
def test_python_blocks_run(path: Path, examples: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for line, language, code in blocks(path):
        if language != "python":
            continue
        with contextlib.ExitStack() as stack:
            if SERVER in code:
                code = code.replace(SERVER, stack.enter_context(_server()))
            try:
                exec(compile(code, f"{_name(path)}:{line}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{_name(path)}, block at line {line}: {exc!r}") from exc


def _commands(code: str) -> Iterator[str]:
    for raw in code.splitlines():
        command = raw.split(" #")[0].strip().rstrip("\\").strip()
        if command and not command.startswith(("-", "#")):
            yield from (c.strip() for c in command.split("&&"))


@pytest.mark.parametrize("path", _with("sh"), ids=_name)
def test_sh_blocks_run(path: Path, examples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for line, language, code in blocks(path):
        if language != "sh":
            continue
        for command in _commands(code):
            where = f"{_name(path)}, block at line {line}: {command}"
            if command.startswith(("autoparser serve", "autoparser studio")):
                # Servers listen until stopped: their arguments are parsed, and a template
                # they name loads (tests/test_serve*.py and test_studio*.py run them).
                args = build_argument_parser().parse_args(shlex.split(command)[1:])
                if getattr(args, "template", None):
                    assert ChatTemplate.from_file(args.template), where
            elif command.startswith("autoparser "):
                assert main(shlex.split(command)[1:]) == 0, where
            elif command.startswith("sh examples/"):
                assert (ROOT / shlex.split(command)[1]).is_file(), where
            elif command.startswith("pip install"):
                for extra in re.findall(r"\[([\w,]+)\]", command):
                    for name in extra.split(","):
                        assert re.search(rf"^{name} = \[", pyproject, re.M), where
            else:
                assert command.startswith(tuple(EXTERNAL)), f"{where}: not runnable here"
    capsys.readouterr()


@pytest.mark.parametrize("path", _with("toml"), ids=_name)
def test_toml_blocks_parse(path: Path) -> None:
    """A ``toml`` block is a configuration file to copy: it must at least be valid TOML."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    for line, language, code in blocks(path):
        if language == "toml":
            try:
                tomllib.loads(code)
            except tomllib.TOMLDecodeError as exc:
                raise AssertionError(f"{_name(path)}, block at line {line}: {exc}") from exc


def test_readme_figures_come_from_performance_md() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Performance", 1)[1].split("\n## ", 1)[0]
    figures = re.findall(r"\d+(?:\.\d+)?\s*(?:x\b|ms\b|µs\b|MB\b|kB\b)", section)
    assert not figures, f"README quotes figures: {figures}; they belong in docs/performance.md"
    assert "docs/performance.md" in section
