"""serve's settings from flags, ``AUTOPARSER_*`` environment variables and a ``--config``
TOML file, in that order of precedence (issue 37 §4); the API key never needs the command
line."""

from __future__ import annotations

import argparse
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("tomllib", reason="Python 3.11+ (3.10 reads TOML with tomli)")

from helpers.generate_cases import CASE_BY_NAME, TEMPLATES
from helpers.processes import cli_env, free_port, serve_command, stop, wait_up
from helpers.serve_standin import LoopThread, StandIn

from autoparser.cli import build_argument_parser
from autoparser.serve import command
from autoparser.serve.limits import Limits


def _settings(argv: list[str], environ: dict[str, str] | None = None) -> argparse.Namespace:
    parser = build_argument_parser()
    args = parser.parse_args(["serve", *argv])
    return command.settings(args, environ or {})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "serve.toml"
    path.write_text(
        'backend = "http://engine:8080"\n'
        "max-concurrent = 7\n"
        "first_byte_timeout = 12.5\n"
        "strict_schemas = true\n"
        'allowed_hosts = ["api.internal", "10.0.0.5"]\n'
        'api_key = ["from-file"]\n'
        'log_format = "json"\n',
        encoding="utf-8",
    )
    return path


def test_flags_beat_the_environment_which_beats_the_file(config: Path) -> None:
    env = {"AUTOPARSER_MAX_CONCURRENT": "5", "AUTOPARSER_LOG_FORMAT": "text"}
    got = _settings(["--config", str(config), "--log-format", "json"], env)
    assert got.max_concurrent == 5  # the environment over the file
    assert got.log_format == "json"  # the flag over the environment
    assert got.first_byte_timeout == 12.5 and got.strict_schemas is True  # the file
    assert got.allowed_hosts == "api.internal,10.0.0.5" and got.api_key == ["from-file"]
    assert got.backend == "http://engine:8080"
    assert got.port == 8000 and got.idle_timeout == Limits().idle_timeout  # defaults


def test_the_config_file_may_come_from_the_environment(config: Path) -> None:
    got = _settings([], {"AUTOPARSER_CONFIG": str(config)})
    assert got.max_concurrent == 7


def test_environment_values_are_read_as_the_flags_read_them() -> None:
    env = {
        "AUTOPARSER_BACKEND": "http://e:1",
        "AUTOPARSER_PORT": "9001",
        "AUTOPARSER_STRICT_SCHEMAS": "yes",
        "AUTOPARSER_API_KEY": "k1, k2",
        "AUTOPARSER_MEDIA": "reject",
    }
    got = _settings([], env)
    assert (got.backend, got.port, got.strict_schemas) == ("http://e:1", 9001, True)
    assert got.api_key == ["k1", "k2"] and got.media == "reject"
    assert _settings([], {"AUTOPARSER_STRICT_SCHEMAS": "0"}).strict_schemas is False


@pytest.mark.parametrize(
    ("env", "text", "named"),
    [
        ({"AUTOPARSER_PORT": "eighty"}, "", "AUTOPARSER_PORT"),
        ({"AUTOPARSER_MEDIA": "drop"}, "", "AUTOPARSER_MEDIA"),
        ({"AUTOPARSER_STRICT_SCHEMAS": "maybe"}, "", "AUTOPARSER_STRICT_SCHEMAS"),
        ({}, "max_concurrency = 3\n", "max_concurrency"),
        ({}, 'port = "x"\n', "port"),
        ({}, "strict_schemas = 1\n", "strict_schemas"),
        ({}, "port = [1]\n", "port"),
        ({}, "port = \n", "not TOML"),
    ],
)
def test_a_bad_setting_is_named(env: dict[str, str], text: str, named: str, tmp_path: Path) -> None:
    argv = []
    if text:
        path = tmp_path / "bad.toml"
        path.write_text(text, encoding="utf-8")
        argv = ["--config", str(path)]
    with pytest.raises(command.SettingsError, match=named):
        _settings(argv, env)


def test_the_command_says_what_is_missing_or_wrong(tmp_path: Path) -> None:
    env = {k: v for k, v in cli_env().items() if not k.startswith("AUTOPARSER_")}
    done = subprocess.run(
        serve_command("http://x:1")[:-2], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2 and "--backend is required" in done.stderr
    done = subprocess.run(
        serve_command("http://x:1"),
        capture_output=True,
        text=True,
        env={**env, "AUTOPARSER_MAX_TOOLS": "many"},
        timeout=120,
    )
    assert done.returncode == 2 and "AUTOPARSER_MAX_TOOLS" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_api_key_needs_no_flag(loop: LoopThread, tmp_path: Path) -> None:
    """serve started from the environment alone: its key is not on its command line, and
    it is enforced."""
    standin = StandIn("llama.cpp")
    standin.add("k", "Hello.")
    port = free_port()
    env = {
        **cli_env(),
        "AUTOPARSER_BACKEND": loop.serve(standin.app()),
        "AUTOPARSER_BACKEND_KIND": "llama.cpp",
        "AUTOPARSER_TEMPLATE": str(TEMPLATES / CASE_BY_NAME["hermes"].template),
        "AUTOPARSER_PORT": str(port),
        "AUTOPARSER_API_KEY": "s3cret",
    }
    cmd = serve_command("")[:-2]  # no --backend: the environment has it
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_up(url, proc, log)
        assert "s3cret" not in " ".join(cmd)
        body = json.dumps({"messages": [{"role": "user", "content": "[[k]]"}]}).encode()
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(url + "/v1/chat/completions", body, headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 401
        request.add_header("Authorization", "Bearer s3cret")
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert json.loads(answer.read())["choices"][0]["message"]["content"] == "Hello."
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("argv", "environ", "share"),
    [
        ([], {}, 1),  # no limit given: the engine's slots
        (["--workers", "3"], {}, 3),  # shared over the workers
        (["--max-concurrent", "128"], {}, 0),  # given, even as the default's value
        ([], {"AUTOPARSER_MAX_CONCURRENT": "8"}, 0),  # given in the environment
    ],
)
def test_the_limit_follows_the_engine_unless_one_is_given(
    argv: list[str], environ: dict[str, str], share: int
) -> None:
    args = _settings(["--backend", "http://engine:8080", *argv], environ)
    assert command.engine_share(args) == share
    args.engine_share = 5  # a worker follows its parent's
    assert command.engine_share(args) == 5
