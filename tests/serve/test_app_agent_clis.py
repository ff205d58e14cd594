"""Claude Code and Codex CLI, unmodified, through ``autoparser serve`` (issue 31).

Each CLI (pinned, installed by scripts/setup_agents.sh) runs non-interactively, as a user runs
it, against serve in front of a scripted engine that answers like Qwen3 (the real Qwen3
template): the model asks for a tool call, the CLI runs it (a file appears in its working
directory, or it reads an image), the result goes back, the final answer comes out; streamed,
as both stream by default. Nothing may leave 127.0.0.1: every proxy variable points at a
catcher, and each run's home is its own (see tests/helpers/agent_clis.py).

Each run happens once (module cache) and is judged by two tests: it stayed local (always
enforced), and its loop completed (before issue 31, serve answered every first request of
both CLIs 400). Skipped without the CLIs, except in CI (CI=true) where that fails.

With AUTOPARSER_CAPTURE_AGENT_REQUESTS=1 the runs also rewrite tests/data/agent_requests/
(the bodies tests/serve/test_agent_apis_captured.py replays).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from helpers.agent_clis import (
    Captured,
    ProxyCatcher,
    Recorder,
    Run,
    ScriptedEngine,
    claude_command,
    claude_env,
    claude_image_command,
    codex_command,
    codex_env,
    qwen3_answer,
    qwen3_call,
    qwen3_template,
    require_cli,
    run_cli,
    run_replacements,
    run_until,
    save_fixture,
    tiny_png,
)
from helpers.gbnf_oracle import accepts
from helpers.serve_standin import LoopThread, as_text

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

CAPTURE = os.environ.get("AUTOPARSER_CAPTURE_AGENT_REQUESTS") == "1"
GREETING = "hello from qwen3\n"
WROTE = "Created hello.txt."
SAW = "The image is one flat colour."
DESCRIBED = "A flat-coloured square."
PATCHED = "Added patched.txt."
PATCH = "*** Begin Patch\n*** Add File: patched.txt\n+hello from qwen3\n*** End Patch\n"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One agent loop: which CLI, the script's key (the prompt carries it), the prompt, the
    script's replies (made for the run's working directory), and what the captured requests
    are saved as."""

    cli: str
    key: str
    prompt: str
    replies: Callable[[Path], list[str]]
    tools: tuple[str, ...] = ()
    fixtures: tuple[tuple[int, str], ...] = ()  # (request index, fixture name)
    attach: bool = False  # the user's message carries the working directory's pixel.png
    model: str = "qwen3"  # the model name the CLI is configured with


SCENARIOS = {
    "claude_write": Scenario(
        "claude",
        "write",
        "Create hello.txt saying hello.",
        lambda work: [
            qwen3_call(
                "Write",
                {"file_path": str(work / "hello.txt"), "content": GREETING},
                "The user wants a file; I will write it.",
            ),
            qwen3_answer(WROTE, "The file is written."),
        ],
        tools=("Write",),
        fixtures=((0, "messages_claude_code_first"), (1, "messages_claude_code_tool_result")),
    ),
    "claude_image": Scenario(
        "claude",
        "image",
        "What is in pixel.png?",
        lambda work: [
            qwen3_call("Read", {"file_path": str(work / "pixel.png")}, "I will look at it."),
            qwen3_answer(SAW, "I saw the image."),
        ],
        tools=("Read",),
        fixtures=((1, "messages_claude_code_tool_result_image"),),
    ),
    "codex_write": Scenario(
        "codex",
        "write",
        "Create hello.txt saying hello.",
        lambda work: [
            qwen3_call(
                "exec_command",
                {"cmd": "printf 'hello from qwen3\\n' > hello.txt"},
                "The user wants a file; I will write it.",
            ),
            qwen3_answer(WROTE, "The file is written."),
        ],
        fixtures=((0, "responses_codex_first"), (1, "responses_codex_function_call_output")),
    ),
    "codex_image": Scenario(
        "codex",
        "image",
        "What is in pixel.png?",
        lambda work: [
            qwen3_call("view_image", {"path": str(work / "pixel.png")}, "I will look at it."),
            qwen3_answer(SAW, "I saw the image."),
        ],
        fixtures=((1, "responses_codex_view_image"),),
    ),
    "codex_patch": Scenario(
        "codex",
        "patch",
        "Add patched.txt saying hello.",
        lambda work: [
            qwen3_call("apply_patch", {"input": PATCH}, "I will add the file with a patch."),
            qwen3_answer(PATCHED, "The patch is applied."),
        ],
        fixtures=((0, "responses_codex_apply_patch"), (1, "responses_codex_custom_output")),
        model="gpt-5.5",
    ),
    "claude_user_image": Scenario(
        "claude",
        "uimg",
        "Describe the attached image.",
        lambda work: [qwen3_answer(DESCRIBED, "The user attached an image.")],
        fixtures=((0, "messages_claude_code_user_image"),),
        attach=True,
    ),
    "codex_user_image": Scenario(
        "codex",
        "uimg",
        "Describe the attached image.",
        lambda work: [qwen3_answer(DESCRIBED, "The user attached an image.")],
        fixtures=((0, "responses_codex_user_image"),),
        attach=True,
    ),
}
API_PATH = {"claude": "/v1/messages", "codex": "/v1/responses"}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A scenario's run: the CLI's exit and output, what it sent serve, the prompts the
    engine got, the proxy catcher's record, and the working directory."""

    run: Run
    sent: list[Captured]
    prompts: list[str]
    attempts: list[str]
    work: Path
    grammars: list[str] = dataclasses.field(default_factory=list)  # sent to the engine


class Stack:
    """The scripted engine, serve (Qwen3 template) and the recorder in front of it, and the
    proxy catcher; one per CLI (its scripts call its own tools), each scenario's requests
    told apart by its key."""

    def __init__(self, loop: LoopThread) -> None:
        template = qwen3_template()
        self.engine = ScriptedEngine()
        config = ServeConfig(loop.serve(self.engine.app()), template=template, model="qwen3")
        self.recorder = Recorder(loop.serve(create_app(config)))
        self.url = loop.serve(self.recorder.app())
        self.catcher = ProxyCatcher()
        self.proxy = self.catcher.start(loop)
        self.outcomes: dict[str, Outcome] = {}

    def outcome(self, name: str, tmp: pytest.TempPathFactory) -> Outcome:
        if name not in self.outcomes:
            self.outcomes[name] = self._run(name, tmp)
        return self.outcomes[name]

    def _run(self, name: str, tmp: pytest.TempPathFactory) -> Outcome:
        scenario = SCENARIOS[name]
        cli = require_cli(scenario.cli)
        home, work = tmp.mktemp(f"{name}-home"), tmp.mktemp(f"{name}-work")
        (work / "pixel.png").write_bytes(tiny_png())
        key = self.engine.script(scenario.key, scenario.replies(work))
        prompt = f"{scenario.prompt} {key}"
        sent_before = len(self.recorder.seen)
        prompts_before = len(self.engine.received)
        attempts_before = len(self.catcher.attempts)
        image, stdin = work / "pixel.png", ""
        if scenario.cli == "claude" and scenario.attach:
            command, stdin = claude_image_command(cli, image, prompt)
            env = claude_env(home, self.proxy, self.url)
        elif scenario.cli == "claude":
            command = claude_command(cli, prompt, *scenario.tools)
            env = claude_env(home, self.proxy, self.url)
        else:
            command = codex_command(cli, prompt, image if scenario.attach else None)
            env = codex_env(home, self.proxy, self.url, scenario.model)
        run = run_cli(command, work, env, stdin)
        sent = [
            c
            for c in self.recorder.seen[sent_before:]
            if c.path == API_PATH[scenario.cli] and key in str(c.body)
        ]
        prompts = [
            as_text(body["prompt"])
            for path, body in self.engine.received[prompts_before:]
            if path == "/completion"
        ]
        if CAPTURE:
            for index, fixture in scenario.fixtures:
                if index >= len(sent):
                    pytest.fail(f"{name}: request {index} to capture as {fixture} never came")
                save_fixture(fixture, sent[index], run_replacements(work, home))
        grammars = [
            str(body.get("grammar", ""))
            for path, body in self.engine.received[prompts_before:]
            if path == "/completion"
        ]
        attempts = self.catcher.attempts[attempts_before:]
        return Outcome(run, sent, prompts, attempts, work, grammars)


@pytest.fixture(scope="module")
def stacks(loop: LoopThread) -> Iterator[dict[str, Stack]]:
    made = {"claude": Stack(loop), "codex": Stack(loop)}
    yield made
    for stack in made.values():
        stack.catcher.stop(loop)


@pytest.fixture
def outcome(
    request: pytest.FixtureRequest,
    stacks: dict[str, Stack],
    tmp_path_factory: pytest.TempPathFactory,
) -> Outcome:
    name = request.param
    return stacks[SCENARIOS[name].cli].outcome(name, tmp_path_factory)


ALL = pytest.mark.parametrize("outcome", list(SCENARIOS), indirect=True)


def explain(outcome: Outcome) -> str:
    statuses = [(c.path, c.status) for c in outcome.sent]
    run = outcome.run
    return f"exit {run.returncode}; sent {statuses}\n{run.stdout[-1500:]}\n{run.stderr[-1500:]}"


@pytest.mark.parametrize(
    ("cli", "vendor"), [("claude", "api.anthropic.com:443"), ("codex", "api.openai.com:443")]
)
def test_the_catcher_sees_a_cli_reaching_out(
    cli: str, vendor: str, tmp_path: Path, loop: LoopThread
) -> None:
    """The check below can fail: pointed at its vendor's API instead of serve, each CLI
    goes through the proxy variables, and the catcher records where it went."""
    path = require_cli(cli)
    catcher = ProxyCatcher()
    proxy = catcher.start(loop)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    if cli == "claude":
        command = claude_command(path, "hello", "Write")
        env = claude_env(home, proxy, "https://" + vendor.split(":")[0])
    else:
        command = codex_command(path, "hello")
        env = codex_env(home, proxy, "https://" + vendor.split(":")[0])
    try:
        run_until(command, work, env, lambda: bool(catcher.attempts))
    finally:
        catcher.stop(loop)
    assert any(vendor in attempt for attempt in catcher.attempts), catcher.attempts


@ALL
def test_nothing_leaves_localhost(outcome: Outcome) -> None:
    """Whatever serve answers, the CLI reached no host but serve: the proxy catcher, where
    every proxy variable points, saw no attempt."""
    assert outcome.attempts == []
    assert outcome.sent, explain(outcome)


@pytest.mark.parametrize(
    "outcome",
    [
        "claude_write",
        "codex_write",
    ],
    indirect=True,
)
def test_tool_call_runs_and_the_answer_comes_back(outcome: Outcome) -> None:
    """The model's call ran (the file it wrote is there), its result went back to serve,
    and the final answer is what the CLI printed."""
    assert outcome.run.returncode == 0, explain(outcome)
    assert [c.status for c in outcome.sent] == [200] * len(outcome.sent)
    assert (outcome.work / "hello.txt").read_text() == GREETING
    assert len(outcome.sent) == 2
    assert outcome.sent[0].body["stream"] is True
    assert WROTE in outcome.run.stdout


@pytest.mark.parametrize(
    "outcome",
    [
        "claude_image",
        "codex_image",
    ],
    indirect=True,
)
def test_image_in_a_tool_result_keeps_the_session(outcome: Outcome) -> None:
    """The CLI read the image and sent it back in the tool result; serve took it (to the
    model or as a placeholder) and the session went on to its answer."""
    assert outcome.run.returncode == 0, explain(outcome)
    assert [c.status for c in outcome.sent] == [200, 200]
    assert "image" in str(outcome.sent[1].body)
    assert SAW in outcome.run.stdout


@pytest.mark.parametrize(
    "outcome",
    [
        "claude_user_image",
        "codex_user_image",
    ],
    indirect=True,
)
def test_image_from_the_user_keeps_the_session(outcome: Outcome) -> None:
    """The user attached an image; serve took it (to the model or as a placeholder) and
    the answer came back."""
    assert outcome.run.returncode == 0, explain(outcome)
    assert [c.status for c in outcome.sent] == [200]
    assert "image" in str(outcome.sent[0].body)
    assert DESCRIBED in outcome.run.stdout


@pytest.mark.parametrize("outcome", ["codex_write"], indirect=True)
def test_codex_items_in_any_order_make_one_assistant_turn(outcome: Outcome) -> None:
    """Codex sends items back in the order they finished (its follow-up here has the
    reasoning after the call when serve closes it last); whatever the order, the model sees
    its thinking and its call in one assistant turn, then the tool's response."""
    assert len(outcome.prompts) >= 2, explain(outcome)
    follow_up = outcome.prompts[-1]
    turn = follow_up[follow_up.rindex("[[write]]") :]
    assistant_turns = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", turn, re.S)
    assert len(assistant_turns) == 1, turn
    assert "I will write it." in assistant_turns[0]
    assert "<tool_call>" in assistant_turns[0]
    assert turn.index("<tool_call>") < turn.index("<tool_response>")


@pytest.mark.parametrize("outcome", ["codex_patch"], indirect=True)
def test_codex_apply_patch_as_a_freeform_tool_with_its_lark_grammar(outcome: Outcome) -> None:
    """Codex (configured with a model it sends ``apply_patch`` to as a ``custom`` tool with
    a Lark grammar) gets the model's patch back as a ``custom_tool_call``, applies it (the
    file appears), sends the result back and prints the answer; the engine's grammar held
    the tool's input to the Lark grammar."""
    assert outcome.run.returncode == 0, explain(outcome)
    assert [c.status for c in outcome.sent] == [200, 200]
    [tool] = [t for t in outcome.sent[0].body["tools"] if t.get("name") == "apply_patch"]
    assert (tool["type"], tool["format"]["syntax"]) == ("custom", "lark")
    assert (outcome.work / "patched.txt").read_text() == "hello from qwen3\n"
    items = {item.get("type") for item in outcome.sent[1].body["input"]}
    assert {"custom_tool_call", "custom_tool_call_output"} <= items
    assert PATCHED in outcome.run.stdout
    grammar = outcome.grammars[0]
    call = qwen3_call("apply_patch", {"input": PATCH}, "")
    call = call[call.index("<tool_call>") :]
    assert accepts(grammar, call)
    for broken in (PATCH.replace("+hello", "hello"), PATCH.replace("*** End Patch\n", "")):
        bad = qwen3_call("apply_patch", {"input": broken}, "")
        assert not accepts(grammar, bad[bad.index("<tool_call>") :]), broken
