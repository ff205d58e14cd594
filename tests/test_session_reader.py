"""The one road: ``RequestOptions.from_openai`` (the one reader every face uses), what
``Session.params`` passes on, and the one single-call rule and call-id owner (``Reply``).

serve (tests/serve/test_chat_completions_reader.py), the studio, the CLI and the vLLM plug-in
read requests with this reader; tests/project/test_architecture.py checks that they reach
params through ``Session`` only.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.formats import TOOLS, USER, WEATHER
from helpers.paths import own_path

from autoparser import ChatTemplate, Reply, RequestError, RequestOptions, Session
from autoparser.session import RESERVED_TEMPLATE_KWARGS, default_tool_choice, max_calls

HERMES = own_path("chatml_hermes").read_text(encoding="utf-8")
THINK = own_path("reasoning/think_tag.jinja").read_text(encoding="utf-8")
EFFORT = own_path("reasoning/switch_reasoning_effort.jinja").read_text(encoding="utf-8")


def _call(name: str, arguments: dict[str, Any]) -> str:
    body = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{body}\n</tool_call>"


TWO_CALLS = _call("get_weather", {"city": "Paris"}) + "\n" + _call("get_weather", {"city": "Rome"})


# ------------------------------------------------------------------------- the reader
@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"messages": USER}, "none"),
        ({"messages": USER, "tools": TOOLS}, "auto"),
        ({"messages": USER, "tools": []}, "none"),
        ({"messages": USER, "tools": TOOLS, "tool_choice": "required"}, "required"),
        # One the client gave is kept, so the template can name a choice it cannot honour.
        ({"messages": USER, "tool_choice": "required"}, "required"),
    ],
)
def test_tool_choice_defaults_as_openai_does(request_: dict[str, Any], expected: str) -> None:
    assert RequestOptions.from_openai(request_).tool_choice == expected
    assert default_tool_choice(request_.get("tools")) == (
        "auto" if request_.get("tools") else "none"
    )


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("messages", "hi", "messages"),
        ("messages", [USER[0], 3], "messages[1]"),
        ("tools", "x", "tools"),
        ("tools", [WEATHER, "f"], "tools[1]"),
        ("tool_choice", 3, "tool_choice"),
        ("parallel_tool_calls", "yes", "parallel_tool_calls"),
        ("response_format", [], "response_format"),
        ("add_generation_prompt", "no", "add_generation_prompt"),
        ("chat_template_kwargs", [1], "chat_template_kwargs"),
        ("chat_template_kwargs", {"tools": []}, "chat_template_kwargs"),
        ("reasoning_budget", "5", "reasoning_budget"),
        ("reasoning_budget", True, "reasoning_budget"),
        ("reasoning_effort", 3, "reasoning_effort"),
        ("reasoning_format", ["none"], "reasoning_format"),
    ],
)
def test_a_bad_field_is_a_request_error_that_starts_with_its_name(
    field: str, value: object, named: str
) -> None:
    """The text starts with the field (``field: ...``): serve answers it as a 400 naming it
    (``param``), the other faces show it as it is; a value's Python repr never shows."""
    with pytest.raises(RequestError) as info:
        RequestOptions.from_openai({"messages": USER, field: value})
    text = str(info.value)
    assert text.startswith(f"{named}: "), text
    assert "<class" not in text and "'str'" not in text


def test_chat_template_kwargs_may_not_set_what_the_request_has_fields_for() -> None:
    assert {"tools", "tool_choice", "provenance", "call_id_seed"} <= RESERVED_TEMPLATE_KWARGS
    with pytest.raises(
        RequestError,
        match=r"^chat_template_kwargs: tool_choice, tools must be given as request fields$",
    ):
        RequestOptions.from_openai(
            {"messages": USER, "chat_template_kwargs": {"tool_choice": "x", "tools": []}}
        )


def test_the_reader_keeps_what_the_template_decides_by() -> None:
    options = RequestOptions.from_openai(
        {
            "messages": USER,
            "tools": [WEATHER["function"]],  # the Responses API's flat shape
            "parallel_tool_calls": False,
            "reasoning_format": "none",
            "reasoning_effort": "low",
            "reasoning_budget": 40,
            "add_generation_prompt": False,
            "chat_template_kwargs": {"enable_thinking": True, "x": 1},
            "temperature": 0.3,  # a sampling field: not the reader's
        }
    )
    assert options.tools == (WEATHER,)
    assert options.parallel_tool_calls is False
    assert (options.reasoning_format, options.reasoning_effort) == ("none", "low")
    assert options.reasoning_budget == 40
    assert options.add_generation_prompt is False
    assert options.enable_thinking is True
    assert options.template_kwargs == {"enable_thinking": True, "x": 1}


# ------------------------------------------------------------------- what params get
def test_reasoning_format_none_leaves_reasoning_in_the_content() -> None:
    session = Session.for_source(THINK)
    text = "<think>pondering</think>Answer."
    auto = session.params({"messages": USER}).parse(text)
    kept = session.params({"messages": USER, "reasoning_format": "none"}).parse(text)
    assert (auto.reasoning_content, auto.content) == ("pondering", "Answer.")
    assert kept.reasoning_content is None
    assert kept.content is not None and "pondering" in kept.content


def test_reasoning_effort_reaches_the_template() -> None:
    session = Session.for_source(EFFORT)
    low = session.params({"messages": USER, "reasoning_effort": "low"}).prompt
    high = session.params({"messages": USER, "reasoning_effort": "high"}).prompt
    assert low != high
    assert "low" in low and "high" in high


def test_provenance_and_call_id_seed_are_part_of_the_cache_key() -> None:
    session = Session.for_source(HERMES)
    request = {"messages": USER, "tools": TOOLS}
    plain = session.params(request)
    spans = session.params(request, provenance=True)
    assert plain.caller_spans is None and spans.caller_spans
    assert session.params(request, provenance=True) is spans  # cached
    seeded = session.params(request, call_id_seed=7)
    again = Session.for_template(ChatTemplate(HERMES)).params(request, call_id_seed=7)
    text = _call("get_weather", {"city": "Paris"})
    assert seeded.parse(text).tool_calls[0].id == again.parse(text).tool_calls[0].id


def test_a_session_of_a_template_object_never_shares_cached_params() -> None:
    template = ChatTemplate(HERMES)
    one, two = Session.for_template(template), Session.for_template(template)
    assert one.key != two.key and one.template is two.template is template
    assert one.params({"messages": USER}) is not two.params({"messages": USER})


def test_a_file_session_saves_its_analysis(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text(HERMES + "{# saved #}", encoding="utf-8")
    cache = tmp_path / "cache"
    session = Session.for_file(path, analysis_cache=cache)
    session.analysis  # noqa: B018 - analysed, and saved
    assert Session.for_file(path, analysis_cache=cache) is session
    assert any(cache.iterdir())


# -------------------------------------------------------------- the one single-call rule
def test_max_calls_is_the_one_rule() -> None:
    assert max_calls(False) == 1
    assert max_calls(True) is None and max_calls(None) is None


@pytest.mark.parametrize("parallel", [False, None])
def test_a_whole_reply_holds_one_call_when_asked(parallel: bool | None) -> None:
    params = Session.for_source(HERMES).params({"messages": USER, "tools": TOOLS})
    reply = Reply(params, parallel_tool_calls=parallel)
    message = reply.parse(TWO_CALLS)
    assert len(message.tool_calls) == (1 if parallel is False else 2)
    assert reply.rejected_calls == (1 if parallel is False else 0)
    assert message.tool_calls[0].arguments == json.dumps({"city": "Paris"})


@pytest.mark.parametrize("policy", ["whole", "incremental"])
def test_a_streamed_reply_holds_one_call_and_owns_its_ids(policy: str) -> None:
    params = Session.for_source(HERMES).params({"messages": USER, "tools": TOOLS})
    reply = Reply(params, parallel_tool_calls=False, tool_call_deltas=policy)
    deltas = [d for i in range(0, len(TWO_CALLS), 7) for d in reply.feed(TWO_CALLS[i : i + 7])]
    deltas += reply.finish()
    pieces = [c for d in deltas for c in d.tool_calls]
    assert pieces and {c.index for c in pieces} == {0}
    assert reply.rejected_calls == 1  # the second call, counted once however many pieces
    message = reply.message
    assert len(message.tool_calls) == 1
    ids = {c.id for c in pieces if c.id}
    assert ids == {message.tool_calls[0].id}
    # Fresh per reply: cached params are shared by responses, their ids are not.
    other = Reply(params, parallel_tool_calls=False)
    assert other.parse(TWO_CALLS).tool_calls[0].id != message.tool_calls[0].id


def test_options_are_plain_data() -> None:
    options = RequestOptions.from_openai({"messages": USER})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.tools = ()  # type: ignore[misc]


def test_the_params_key_is_the_content() -> None:
    """Equal options, equal keys; any difference (a value, a type that renders otherwise),
    another key; an object pickle refuses still gets one."""
    base = {"messages": USER, "tools": TOOLS}
    key = RequestOptions.from_openai(base).key()
    assert RequestOptions.from_openai(json.loads(json.dumps(base))).key() == key
    for other in (
        {**base, "tool_choice": "required"},
        {**base, "chat_template_kwargs": {"x": 1}},
        {**base, "chat_template_kwargs": {"x": 1.0}},
        {**base, "chat_template_kwargs": {"x": True}},
        {"messages": [{"role": "user", "content": "Hi!"}], "tools": TOOLS},
    ):
        assert RequestOptions.from_openai(other).key() != key
    odd = RequestOptions.from_openai({**base, "chat_template_kwargs": {"f": lambda: 1}})
    assert len(odd.key()) == 64


def test_a_value_that_holds_itself_is_a_request_error() -> None:
    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises(RequestError, match=r"^request: "):
        RequestOptions((), template_kwargs={"x": loop}).key()


def test_a_streamed_reply_keeps_the_models_own_call_id() -> None:
    """The model's id, written in the output, is kept, in the deltas and the message (the
    output is joined only when an id is asked: a long stream is not copied per chunk)."""
    source = own_path("bracket_callid").read_text(encoding="utf-8")
    params = Session.for_source(source).params({"messages": USER, "tools": TOOLS})
    text = '[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Paris"}'
    reply = Reply(params)
    deltas = [d for i in range(0, len(text), 3) for d in reply.feed(text[i : i + 3])]
    deltas += reply.finish()
    assert [c.id for d in deltas for c in d.tool_calls if c.id] == ["abc123XYZ"]
    assert [c.id for c in reply.message.tool_calls] == ["abc123XYZ"]
    assert [c.id for c in Reply(params).parse(text).tool_calls] == ["abc123XYZ"]
