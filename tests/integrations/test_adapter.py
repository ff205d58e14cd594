"""The engine-neutral half of the plug-ins, no engine needed: the template lookup, the
reasoning split (the session API's, which the readers use), the request reader, the version
check (tests/integrations/test_adapter_contract.py runs the readers through both real engines)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.paths import OWN_TEMPLATES, REPO_ROOT, corpus_templates

from autoparser import ChatTemplate, ReasoningSplit, RequestOptions, Session
from autoparser.errors import IntegrationError
from autoparser.integrations import adapter
from autoparser.integrations import vllm as vllm_plugin

ROOT = REPO_ROOT


def _template(name: str) -> Path:
    """A corpus template by stem, or one of the project's own by name (with or without the
    own_ prefix, in any folder of tests/templates)."""
    plain = re.sub(r"^(own|fmt|tpl)_", "", name)
    paths = {p.stem: p for p in corpus_templates()}
    paths.update(
        {re.sub(r"^(own|fmt|tpl)_", "", p.stem): p for p in OWN_TEMPLATES.rglob("*.jinja")}
    )
    if plain not in paths:
        pytest.skip(f"template {name} not available")
    return paths[plain]


def _split_all(split: ReasoningSplit, pieces: list[str]) -> tuple[str, str]:
    reasoning, rest = [], []
    for piece in pieces:
        r, c = split.feed(piece)
        reasoning.append(r)
        rest.append(c)
    r, c = split.finish()
    return "".join(reasoning) + r, "".join(rest) + c


SPLIT_CASES = [
    # (the prompt opens the block, output, reasoning, text after it)
    (False, "<think>\n a b \n</think>\n\nHello", "a b", "\n\nHello"),
    (False, "Hello <think>x</think>", "", "Hello <think>x</think>"),
    (False, "  <thi", "", "  <thi"),
    (False, "<think>never closed  ", "never closed", ""),
    (False, "<think></think>answer", "", "answer"),
    (False, "\n</think>\n\nanswer", "", "\n\nanswer"),
    (False, "</thin", "", "</thin"),
    (True, "plan it</think>\n<tool_call>", "plan it", "\n<tool_call>"),
    (True, "<think>\nrepeated opener</think>ok", "repeated opener", "ok"),
    (True, "cut short by max_tokens </thi", "cut short by max_tokens </thi", ""),
]


def _pieces(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 6))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def _check_split(new: Callable[[], ReasoningSplit], text: str, expected: tuple[str, str]) -> None:
    """Whole or in random chunks, the split gives the same reasoning and remaining text."""
    assert _split_all(new(), [text]) == expected
    rng = random.Random(text)
    for _ in range(30):
        pieces = _pieces(text, rng)
        assert _split_all(new(), pieces) == expected, pieces


@pytest.mark.parametrize(("forced", "text", "reasoning", "rest"), SPLIT_CASES)
def test_reasoning_split_any_chunking(forced: bool, text: str, reasoning: str, rest: str) -> None:
    """The split is the library's parse of the response: its reasoning is the parse's, the
    rest the raw text from where the parse ended the reasoning."""
    name = "reasoning/forced_open.jinja" if forced else "reasoning/think_tag.jinja"
    session = _own(name)
    params = session.params({"messages": [{"role": "user", "content": "Hi"}]})
    assert params.thinking_forced_open is forced
    _check_split(lambda: session.reasoning_split(params.prompt, None), text, (reasoning, rest))
    assert (params.parse(text).reasoning_content or "") == reasoning


# Reasoning turned on, the prompt did not open the block: (output, reasoning, text after it).
UNOPENED_CASES = [
    ("plan it</think>\n\nHello", "plan it", "\n\nHello"),
    ("<think>opened</think>ok", "opened", "ok"),
    ("just an answer", "", "just an answer"),
    ("answer<|im_end|>late </think>", "", "answer<|im_end|>late </think>"),
    ("</think>\nanswer", "", "\nanswer"),
]
ON = {
    "messages": [{"role": "user", "content": "Hi"}],
    "chat_template_kwargs": {"enable_thinking": True},
}


@pytest.mark.parametrize(("text", "reasoning", "rest"), UNOPENED_CASES)
def test_reasoning_split_reads_a_block_whose_opener_was_left_out(
    text: str, reasoning: str, rest: str
) -> None:
    """As the library's lenient parser: text before the end marker is reasoning, unless
    the end of the turn comes first; held back, whatever the chunking."""
    session = _own("reasoning/think_tag.jinja")
    params = session.params(ON)
    assert not params.thinking_forced_open
    _check_split(lambda: session.reasoning_split(params.prompt, True), text, (reasoning, rest))
    assert (params.parse(text).reasoning_content or "") == reasoning


def test_a_call_before_the_end_marker_is_the_text_after_the_reasoning() -> None:
    """A template with a call format, the request's tools: a call written first is no
    reasoning, whatever end marker follows; the tool parser gets it all."""
    session = _own("reasoning/tools_only_reasoning.jinja")
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    params = session.params({**ON, "tools": [tool]})
    text = '<tool_call>{"name": "f", "arguments": {}}</tool_call> then </think>'
    _check_split(lambda: ReasoningSplit(params), text, ("", text))
    assert params.parse(text).reasoning_content is None


def test_finish_read_reads_what_only_the_end_decided_as_the_tool_parser_would() -> None:
    """Thinking on, the opener left out, no end marker: the split holds the text until the
    output ends (it may still be reasoning). An engine that gives its tool parser nothing
    after the end (vLLM) gets it read for the request: the library's content and calls;
    without the request, all of it as content (nothing lost)."""
    session = _own("reasoning/tools_only_reasoning.jinja")
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    request = {**ON, "tools": [tool]}
    params = session.params(request, reasoning=True)
    text = 'Sure.\n<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    parsed = params.parse(text)
    assert parsed.tool_calls  # the case reads a call
    for with_request in (True, False):
        reader = adapter.ReasoningReader(session, ON["chat_template_kwargs"])
        reader.prompt = params.prompt
        assert [reader.feed(piece) for piece in (text[:9], text[9:])] == [("", "")] * 2
        assert not reader.done
        reader.request = request if with_request else None
        delta = reader.finish_read()
        assert delta is not None and not delta.reasoning_content
        if with_request:
            calls = [(c.name, c.arguments) for c in delta.tool_calls]
            assert (delta.content, calls) == (
                parsed.content,
                [(c.name, c.arguments) for c in parsed.tool_calls],
            )
        else:
            assert (delta.content, delta.tool_calls) == (text, ())


def test_reasoning_split_matches_the_library_for_a_left_out_opener() -> None:
    """The split's rule is the library's: same reasoning as ChatParams.parse, thinking on."""
    path = _template("own_think_tag")
    chat = Session.for_source(path.read_text(encoding="utf-8"))
    params = ChatTemplate.from_file(path).apply(
        [{"role": "user", "content": "hi"}], None, enable_thinking=True
    )
    assert not params.thinking_forced_open
    text = "The user wants X.</think>The answer."
    split = chat.reasoning_split(params.prompt, True)
    reasoning, rest = _split_all(split, [text])
    parsed = params.parse(text)
    assert (reasoning, rest) == (parsed.reasoning_content, parsed.content)
    assert split.done


def test_reasoning_split_without_reasoning_passes_text_through() -> None:
    """A template without reasoning: the first piece the parse gives is the text after."""
    session = _own("formats/chatml_hermes.jinja")
    split = session.reasoning_split("", None)
    assert split.feed("<think>x</think>") == ("", "<think>x</think>")
    assert split.done
    assert split.feed(" more") == ("", " more")


def test_a_harmony_split_reads_the_reasoning_channel() -> None:
    """No block between two markers: the reasoning is harmony's analysis channel, the text
    after it the raw output from the final channel on (what the library's parse says)."""
    session = _own("handlers/harmony_like.jinja")
    params = session.params({"messages": [{"role": "user", "content": "Hi"}]})
    text = (
        "<|channel|>analysis<|message|>Think it over.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>The answer."
    )
    reasoning, rest = ReasoningSplit(params).split(text)
    assert reasoning == params.parse(text).reasoning_content == "Think it over."
    assert rest.endswith("The answer.") and "Think it over." not in rest
    _check_split(lambda: ReasoningSplit(params), text, (reasoning, rest))


def test_reasoning_closed_reads_the_turn_being_generated() -> None:
    """A closed block in the history does not close the new turn; thinking off does."""
    chat = Session.for_source(_template("Qwen-Qwen3-0.6B").read_text(encoding="utf-8"))
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "<think>\nx\n</think>\n\nb"},
        {"role": "user", "content": "c"},
    ]
    template = ChatTemplate(_template("Qwen-Qwen3-0.6B").read_text(encoding="utf-8"))
    on = template.render(history, enable_thinking=True)
    off = template.render(history, enable_thinking=False)
    assert not chat.reasoning_closed(on)
    assert chat.reasoning_closed(off)
    assert chat.reasoning_closed(on + "<think>\nhm\n</think>\n\n")


@pytest.mark.parametrize(("stem", "opens"), [("own_forced_open", True), ("own_think_tag", False)])
def test_prompt_opens_reasoning(stem: str, opens: bool) -> None:
    """Read from the rendered prompt: does the output start inside a reasoning block?"""
    template = ChatTemplate(
        _template(stem).read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>"
    )
    prompt = template.render([{"role": "user", "content": "Hi"}])
    chat = Session.for_source(template.source, bos_token="<s>", eos_token="</s>")
    assert chat.opens_reasoning(prompt, None) is opens
    assert template.apply([{"role": "user", "content": "Hi"}]).thinking_forced_open is opens
    assert chat.reasoning_closed(prompt) is False


def _tokenizer(chat_template: Any) -> Any:
    return SimpleNamespace(chat_template=chat_template, bos_token="<s>", eos_token="</s>")


def test_template_from_tokenizer_is_cached_by_hash() -> None:
    source = _template("Qwen-Qwen3-0.6B").read_text(encoding="utf-8")
    first = adapter.resolve_template(_tokenizer(source))
    again = adapter.resolve_template(_tokenizer(str(source)))
    assert first is again
    assert first.template.source == source


def test_template_precedence_request_then_env_then_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = _template("Qwen-Qwen3-0.6B").read_text(encoding="utf-8")
    other = _template("meta-llama-Llama-3.1-8B-Instruct").read_text(encoding="utf-8")
    file = tmp_path / "served.jinja"
    file.write_text(other, encoding="utf-8")
    monkeypatch.setenv(adapter.TEMPLATE_ENV, str(file))
    assert adapter.resolve_template(_tokenizer(own)).template.source == other
    assert adapter.resolve_template(_tokenizer(own), own).template.source == own
    monkeypatch.delenv(adapter.TEMPLATE_ENV)
    assert adapter.resolve_template(_tokenizer(own)).template.source == own


def test_missing_template_is_an_integration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(adapter.TEMPLATE_ENV, raising=False)
    with pytest.raises(IntegrationError, match="--chat-template"):
        adapter.resolve_template(_tokenizer(None))
    monkeypatch.setenv(adapter.TEMPLATE_ENV, str(tmp_path / "missing.jinja"))
    with pytest.raises(IntegrationError, match=r"missing\.jinja"):
        adapter.resolve_template(_tokenizer("x"))


def test_params_are_cached_per_request_content() -> None:
    template = adapter.resolve_template(
        _tokenizer(_template("Qwen-Qwen3-0.6B").read_text(encoding="utf-8"))
    )
    request = SimpleNamespace(
        messages=[{"role": "user", "content": "Hi"}],
        tools=None,
        tool_choice=None,
        parallel_tool_calls=True,
        add_generation_prompt=True,
        chat_template_kwargs={"enable_thinking": False},
    )
    options = adapter.request_options(request, None)
    first = template.params(options, reasoning=True)
    assert template.params(dict(options), reasoning=True) is first
    assert template.params(options, reasoning=False) is not first
    assert "</think>" in first.prompt  # enable_thinking reached the template


def _check() -> str:
    p = vllm_plugin
    return adapter.check_version("vllm", p.TESTED_MIN, p.TESTED_BELOW, p.ANY_VERSION_ENV)


@pytest.mark.parametrize(
    ("version", "ok"), [("0.33.0", True), ("0.33.5rc1", True), ("0.34.0", False), ("0.10.2", False)]
)
def test_version_range(version: str, ok: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter.metadata, "version", lambda name: version)
    monkeypatch.delenv(vllm_plugin.ANY_VERSION_ENV, raising=False)
    if ok:
        assert _check() == version
    else:
        with pytest.raises(IntegrationError, match=r"tested with vllm >=0\.33,<0\.34"):
            _check()
        monkeypatch.setenv(vllm_plugin.ANY_VERSION_ENV, "1")
        assert _check() == version


def test_missing_engine_is_an_integration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(adapter.metadata, "version", missing)
    with pytest.raises(IntegrationError, match="vllm is not installed"):
        _check()


def test_request_options_reads_a_vllm_request() -> None:
    """Pydantic fields become plain data; Responses-API flat tools take the chat shape."""
    flat = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    nested = SimpleNamespace(
        model_dump=lambda exclude_none: {"type": "function", "function": {"name": "g"}}
    )
    request = SimpleNamespace(
        messages=[{"role": "user", "content": "Hi"}],
        tools=[flat, nested],
        tool_choice=None,
        parallel_tool_calls=False,
        add_generation_prompt=True,
        chat_template_kwargs={"a": 1},
    )
    options = RequestOptions.from_openai(adapter.request_options(request, {"b": 2}))
    assert options.tools == (
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "g"}},
    )
    assert options.tool_choice == "auto"
    assert options.parallel_tool_calls is False
    assert options.template_kwargs == {"a": 1, "b": 2}


ADAPTERS = REPO_ROOT / "src" / "autoparser" / "integrations"


def _non_blank_lines(package: Path) -> int:
    return sum(
        1
        for path in package.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )


def test_each_engine_adapter_is_short() -> None:
    """An engine adapter only translates objects (issue 32): at most 150 non-blank lines per
    package; what is engine-neutral lives in the session API and adapter.py."""
    counts = {name: _non_blank_lines(ADAPTERS / name) for name in ("vllm", "sglang")}
    assert all(count <= 150 for count in counts.values()), counts
    assert all(count > 30 for count in counts.values()), counts  # the packages were read


def _own(name: str) -> Session:
    return Session.for_source((OWN_TEMPLATES / name).read_text(encoding="utf-8"), bos_token="<s>")


HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_tool_reader_reads_an_engine_request_object_whole_and_streamed() -> None:
    """An engine's request object (read by attribute) gives the library's message, whole or
    one delta per step, with one call when parallel calls are off."""
    reader = adapter.ToolReader(_own("formats/chatml_hermes.jinja"))
    request = SimpleNamespace(
        messages=[{"role": "user", "content": "Hi"}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
        parallel_tool_calls=False,
    )
    text = "Sure." + HERMES_CALL + HERMES_CALL
    whole = reader.parse(request, text)
    assert whole.content == "Sure."
    assert [c.name for c in whole.tool_calls] == ["get_weather"]
    streamed = adapter.ToolReader(reader.session)
    deltas = [streamed.feed(request, text[i : i + 5]) for i in range(0, len(text), 5)]
    deltas.append(streamed.finish())
    calls = [tc for d in deltas if d for tc in d.tool_calls]
    assert {tc.index for tc in calls} == {0}
    assert "".join(tc.arguments or "" for tc in calls) == whole.tool_calls[0].arguments
    assert streamed.feed(request, "") is None


def test_tool_reader_gives_a_grammar_only_for_a_forced_call() -> None:
    reader = adapter.ToolReader(_own("formats/chatml_hermes.jinja"))
    base = {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER_TOOL]}
    assert reader.forced_grammar({**base, "tool_choice": "auto"}) is None
    assert reader.forced_grammar({"messages": base["messages"], "tool_choice": "required"}) is None
    grammar = reader.forced_grammar({**base, "tool_choice": "required"})
    assert grammar is not None
    assert "get_weather" in grammar
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert reader.forced_grammar({**base, "tool_choice": named}) is not None
    assert reader.may_hold_calls()
    assert not adapter.ToolReader(_own("formats/plain.jinja")).may_hold_calls()


@pytest.mark.parametrize(
    ("name", "forced"),
    [("reasoning/forced_open.jinja", True), ("reasoning/think_tag.jinja", False)],
)
def test_reasoning_reader_without_a_prompt_asks_the_template(name: str, forced: bool) -> None:
    """No prompt from the engine (SGLang's case): where the output starts is the template's
    generation prompt for the request's switch; the split agrees with the library's parse."""
    session = _own(name)
    start, end = session.reasoning_markers
    reader = adapter.ReasoningReader(session, {"enable_thinking": True})
    output = ("" if forced else start) + "plan it" + end + "The answer."
    assert reader.split(output) == ("plan it", "The answer.")
    request = {"messages": [{"role": "user", "content": "Hi"}]}
    assert reader.split(output, request) == ("plan it", "The answer.")
    pieces = [reader.feed(output[i : i + 3]) for i in range(0, len(output), 3)]
    pieces.append(reader.finish())
    assert reader.done
    assert ("".join(r for r, _ in pieces), "".join(c for _, c in pieces)) == (
        "plan it",
        "The answer.",
    )


def test_reasoning_reader_tells_the_engine_where_reasoning_ends() -> None:
    session = _own("reasoning/think_tag.jinja")
    start, end = session.reasoning_markers
    reader = adapter.ReasoningReader(session)
    assert reader.content_ids([1, 7, 2, 7, 3], {end: 7}) == [3]
    assert reader.content_ids([1, 2], {end: 7}) == [1, 2]
    assert reader.ended_in(f"x{end}")
    assert not reader.ended_in("x")
    assert not reader.ended(f"{start}still thinking")
    assert reader.ended(f"{start}done{end}")
    assert adapter.ReasoningReader(session, {"enable_thinking": False}).ended("no block")
