"""The command line on bad input (one clear error, exit 2) and its everyday options."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.generate_cases import TEMPLATES, TOOLS
from helpers.paths import REPO_ROOT

from autoparser.cli import main

QWEN = str(TEMPLATES / "formats/qwen3coder_like.jinja")
OUTPUT = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
    "</parameter>\n</function>\n</tool_call>"
)
USER = [{"role": "user", "content": "Weather in Paris?"}]


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoparser: error: ")
    assert "Traceback" not in err
    return err


def test_file_that_is_not_json_names_file_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(tmp_path, "bad.json", "[1,\n")
    for option in ("--messages", "--tools"):
        err = _error(capsys, ["render", QWEN, option, bad])
        assert f"{bad}: not JSON" in err and "line 2 column 1" in err


def test_file_of_the_wrong_shape_names_the_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = _write(tmp_path, "obj.json", '{"a": 1}')
    err = _error(capsys, ["grammar", QWEN, "--tools", obj])
    assert f"{obj}: expected a list, got a JSON dict" in err


def test_request_body_given_as_messages_points_to_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = _write(tmp_path, "body.json", json.dumps({"model": "m", "messages": USER}))
    err = _error(capsys, ["render", QWEN, "--messages", body])
    assert f"--request {body}" in err


def test_missing_file_and_bad_var(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.json")
    assert f"{missing}: No such file" in _error(capsys, ["render", QWEN, "--tools", missing])
    assert "--var '1=x'" in _error(capsys, ["render", QWEN, "--var", "1=x"])


def test_request_body_fields_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = _write(tmp_path, "body.json", json.dumps({"messages": "hi"}))
    assert "messages: expected a list" in _error(capsys, ["parse", QWEN, "--request", body])
    body = _write(tmp_path, "tools.json", json.dumps({"messages": USER, "tools": "x"}))
    assert "tools: must be a list" in _error(capsys, ["grammar", QWEN, "--request", body])


def test_template_that_always_raises_fails_caps_and_analyze(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "raise.jinja", "{{ raise_exception('never renders') }}")
    assert "never renders" in _error(capsys, ["caps", path])
    path = _write(tmp_path, "raise2.jinja", "{{ raise_exception('still never') }}\n")
    assert "still never" in _error(capsys, ["analyze", path])


def test_version_and_help_on_every_option() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "autoparser.cli", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.startswith("autoparser ")
    from autoparser.cli import build_argument_parser

    parser = build_argument_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():  # type: ignore[attr-defined]
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_readme_synopsis_lists_every_command_and_option() -> None:
    from autoparser.cli import build_argument_parser

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    synopsis = readme[readme.index("## Command line") : readme.index("## Serve")]
    subparsers = next(a for a in build_argument_parser()._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():  # type: ignore[attr-defined]
        assert f"autoparser {name} " in synopsis, name
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in synopsis, f"{name} {option} is not in the README synopsis"


def test_grammar_prints_whole_literals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = _write(tmp_path, "tools.json", json.dumps(TOOLS))
    assert main(["grammar", QWEN, "--tools", tools]) == 0
    out = capsys.readouterr().out
    rules = dict(line.split(" ::= ", 1) for line in out.splitlines() if " ::= " in line)
    # One rule for every call (first and later ones); the literals of the call's markup are
    # whole strings except where llguidance needs them split (a free-text token may run
    # where they start: peg/gbnf_emit.py's _SplitFinder).
    assert rules["root"].startswith("tool-call "), rules["root"]
    assert '"<function="' in rules["tool-call"], rules["tool-call"]
    # Each argument a rule of its own, named after the tool and the argument.
    assert "get-weather-city-arg" in rules["tool-call"], rules["tool-call"]
    assert '"<parameter="' in rules["get-weather-city-arg"], rules["get-weather-city-arg"]


def test_request_body_and_vars_reach_the_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = _write(
        tmp_path,
        "t.jinja",
        "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"
        "|{{ tools|length if tools else 0 }}|{{ flag }}|{{ who }}|{{ eos_token }}",
    )
    body = _write(
        tmp_path,
        "body.json",
        json.dumps({"messages": USER, "tools": TOOLS, "chat_template_kwargs": {"flag": True}}),
    )
    argv = ["render", template, "--no-polyfills", "--request", body, "--var", "who=me"]
    argv += ["--bos-token", "<s>"]
    assert main([*argv, "--eos-token", "</s>"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip("\n") == f"<s>Weather in Paris?|{len(TOOLS)}|True|me|</s>"


def test_render_json_carries_the_stops(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", QWEN, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prompt"].endswith("assistant\n")
    assert data["additional_stops"]
    assert set(data) >= {"preserved_tokens", "grammar_triggers", "grammar_lazy"}


def test_parse_and_stream_give_the_same_call_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = _write(tmp_path, "tools.json", json.dumps(TOOLS))
    monkeypatch.setattr(sys, "stdin", io.StringIO(OUTPUT))
    assert main(["parse", QWEN, "--tools", tools, "--seed", "7"]) == 0
    whole = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(sys, "stdin", io.StringIO(OUTPUT))
    assert (
        main(["parse", QWEN, "--tools", tools, "--seed", "7", "--stream", "--chunks", "openai"])
        == 0
    )
    chunks = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    ids = [
        call["id"]
        for c in chunks
        for call in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" in call
    ]
    assert ids == [call["id"] for call in whole["tool_calls"]]
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "tool_calls"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_analyze_explain_prints_a_legend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", QWEN, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "How to read this" in out and "preserved_tokens" in out
    assert "verification: verified (" in out  # the self-check's result, with its checks
    assert "'\\n'" in out or "\\n" in out  # markers shown with visible newlines
