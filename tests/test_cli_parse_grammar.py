"""The ``autoparser parse`` and ``autoparser grammar`` subcommands."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers.generate_cases import TEMPLATES, TOOLS, accumulate

from autoparser.cli import main

QWEN = str(TEMPLATES / "formats/qwen3coder_like.jinja")
OUTPUT = (
    "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
    "</parameter>\n</function>\n</tool_call>"
)


@pytest.fixture
def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS), encoding="utf-8")
    return str(path)


def test_parse_prints_the_message(
    tools_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(OUTPUT))
    assert main(["parse", QWEN, "--tools", tools_file]) == 0
    message = json.loads(capsys.readouterr().out)
    assert message["content"] == "Let me look."
    call = message["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})


def test_parse_stream_prints_deltas(
    tools_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(OUTPUT))
    assert main(["parse", QWEN, "--tools", tools_file, "--stream", "--chunk-size", "3"]) == 0
    deltas = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(deltas) > 3
    state = accumulate(deltas)
    assert state["content"] == "Let me look."
    assert json.loads(state["tool_calls"][0]["arguments"]) == {"city": "Paris"}


def test_grammar_prints_rules_and_triggers(
    tools_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grammar", QWEN, "--tools", tools_file]) == 0
    out = capsys.readouterr().out
    assert "# lazy: yes" in out and "# trigger (word)" in out and "root ::=" in out
    assert main(["grammar", QWEN, "--tools", tools_file, "--tool-choice", "search", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["grammar_lazy"] is False and "search" in data["grammar"]
    assert "get_weather" not in data["grammar"]


def test_grammar_unknown_tool_is_an_error(
    tools_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grammar", QWEN, "--tools", tools_file, "--tool-choice", "nope"]) == 2
    assert "tool_choice" in capsys.readouterr().err


UNDECLARED = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=hours>\n3\n</parameter>\n</function>\n</tool_call>"
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_parse_reports_findings_on_stderr_and_strict_fails_on_a_cut_call(
    tools_file: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stream: bool,
) -> None:
    """A kept call with an undeclared argument is a finding, exit 0 even with --strict; a
    call cut off is one too, and --strict then exits with EXIT_REFUSED."""
    from autoparser.cli import EXIT_REFUSED

    extra = ["--stream"] if stream else []
    monkeypatch.setattr("sys.stdin", io.StringIO(UNDECLARED))
    assert main(["parse", QWEN, "--tools", tools_file, "--strict", *extra]) == 0
    err = capsys.readouterr().err
    assert "autoparser: finding: undeclared argument 'hours'" in err and ": kept" in err
    cut = OUTPUT[: OUTPUT.index("Paris") + 2]
    monkeypatch.setattr("sys.stdin", io.StringIO(cut))
    assert main(["parse", QWEN, "--tools", tools_file, *extra]) == 0
    assert "autoparser: finding: truncated 'call'" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO(cut))
    assert main(["parse", QWEN, "--tools", tools_file, "--strict", *extra]) == EXIT_REFUSED


def test_parse_tolerance_reject_refuses_the_undeclared_argument(
    tools_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from autoparser.cli import EXIT_REFUSED

    monkeypatch.setattr("sys.stdin", io.StringIO(UNDECLARED))
    code = main(["parse", QWEN, "--tools", tools_file, "--tolerance", "reject", "--strict"])
    captured = capsys.readouterr()
    assert code == EXIT_REFUSED
    message = json.loads(captured.out)
    assert "tool_calls" not in message and message["content"] == UNDECLARED
    assert "undeclared argument 'hours'" in captured.err and ": refused" in captured.err
