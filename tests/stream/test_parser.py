"""Streaming: deltas only append, markers never leak, any split equals parse(full text)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from typing import Any

import pytest
from helpers.gbnf_oracle import accepts
from helpers.generate_cases import (
    CASE_BY_NAME,
    CASES,
    SCENARIOS,
    TOOLS,
    Case,
    accumulate,
    call,
    message_dict,
    scenarios,
)
from helpers.paths import OWN_TEMPLATES
from helpers.streaming import run_stream, splits

from autoparser import ChatTemplate
from autoparser.errors import RequestError
from autoparser.params import ChatParams


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_one_char_stream_equals_parse(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    run_stream(case.params(tools), list(text))


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_random_splits_equal_parse(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    rng = random.Random(f"{case.name}-{scenario}")
    for _ in range(20):
        run_stream(params, splits(text, rng))


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_markers_never_leak(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    a = case.analysis
    markers = [
        m
        for m in (
            a.reasoning.start,
            a.reasoning.end,
            a.tools.format.section_start,
            a.tools.format.per_call_start,
            a.tools.format.per_call_end,
            *a.end_of_turn,
        )
        if len(m.strip()) > 1
    ]
    stream = params.stream()
    seen = {"content": "", "reasoning_content": ""}
    for ch in text + (a.end_of_turn[0] if a.end_of_turn else ""):
        for delta in stream.feed(ch):
            for key in seen:
                seen[key] += delta.get(key, "")
        for key, value in seen.items():
            for marker in markers:
                for k in range(1, len(marker) + 1):
                    # No marker, nor the start of one, at the end of what was emitted.
                    assert not value.endswith(marker[:k]) or marker[:k].isspace(), (
                        key,
                        value,
                        marker,
                    )


# ------------------------------------------------------------------ tool-call delta policy


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_whole_policy_sends_each_call_in_one_delta(
    case: Case, scenario: str, message: dict[str, Any]
) -> None:
    """The default: one delta per call (id, name, all its arguments), once it is complete."""
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    deltas = run_stream(params, splits(text, random.Random(scenario)))
    call_deltas = [tc for d in deltas for tc in d.get("tool_calls", [])]
    expected = params.parse(text).tool_calls
    assert [(tc["index"], tc["id"], tc["function"]["name"]) for tc in call_deltas] == [
        (i, c.id, c.name) for i, c in enumerate(expected)
    ]
    assert [tc["function"]["arguments"] for tc in call_deltas] == [c.arguments for c in expected]


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_incremental_policy_equals_parse_on_well_formed_output(
    case: Case, scenario: str, message: dict[str, Any]
) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    full = message_dict(params.parse(text))
    rng = random.Random(f"inc-{scenario}")
    for chunks in [list(text), *(splits(text, rng) for _ in range(3))]:
        deltas, stream = incremental_run(params, chunks)
        assert stream.dropped_calls == ()
        assert accumulate(deltas) == message_dict(stream.message) == full


def test_unknown_delta_policy_is_a_request_error() -> None:
    from autoparser import StreamParser

    params = CASE_BY_NAME["hermes"].params(TOOLS)
    for bad in ("partial", "", None, 1):
        with pytest.raises(RequestError, match="tool_call_deltas"):
            params.stream(tool_call_deltas=bad)  # type: ignore[arg-type]
        with pytest.raises(RequestError, match="tool_call_deltas"):
            StreamParser(params.definition, params.call_ids, tool_call_deltas=bad)  # type: ignore[arg-type]
    assert params.stream().tool_call_deltas == "whole"


# ------------------------------------------------------------------ truncation / malformed


@pytest.mark.parametrize("name", ["hermes", "qwen3coder", "glm", "mistral", "bracket_callid"])
def test_every_prefix_streams_like_it_parses(name: str) -> None:
    case = CASE_BY_NAME[name]
    key = "two_calls" if case.parallel else "complex_args"
    text = case.output(scenarios(case)[key], TOOLS)
    params = case.params(TOOLS)
    rng = random.Random(name)
    for cut in range(1, len(text), 3):
        prefix = text[:cut]
        deltas = run_stream(params, splits(prefix, rng))
        message = params.parse(prefix)
        for c in message.tool_calls:
            assert isinstance(json.loads(c.arguments), dict), (prefix, c.arguments)
        assert accumulate(deltas)["tool_calls"] == message_dict(message)["tool_calls"]
        deltas, stream = incremental_run(params, splits(prefix, rng))
        assert stream.message == message
        assert without_dropped(accumulate(deltas), stream.dropped_calls) == message_dict(message)


def incremental_run(params: ChatParams, chunks: list[str]) -> tuple[list[dict[str, Any]], Any]:
    """Feed the chunks under the incremental policy; return the deltas and the stream."""
    stream = params.stream(tool_call_deltas="incremental")
    deltas: list[dict[str, Any]] = []
    for chunk in chunks:
        deltas += stream.feed(chunk)
    deltas += stream.finish()
    return deltas, stream


def without_dropped(folded: dict[str, Any], dropped: tuple[int, ...]) -> dict[str, Any]:
    """A folded stream without the calls it announced and dropped."""
    calls = [c for i, c in enumerate(folded["tool_calls"]) if i not in dropped]
    return {**folded, "tool_calls": calls}


def test_truncated_call_is_neither_call_nor_content() -> None:
    """Output cut inside a call: no call, its text not content but the message's
    truncated_call, the message truncated; a whole stream never sends any of it."""
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    head = "Let me look.\n"
    text = head + '<tool_call>\n{"name": "search", "arguments": {"query": "a\\"b", "tags": ["x", "y'
    message = params.parse(text)
    assert message.tool_calls == [] and message.truncated
    assert message.content == head.strip()
    assert message.truncated_call == text[len(head) :]
    deltas = run_stream(params, list(text))  # whole: never announced, never content
    assert not any("tool_calls" in d for d in deltas)
    assert "".join(d.get("content", "") for d in deltas).strip() == head.strip()
    deltas, stream = incremental_run(params, list(text))
    assert stream.dropped_calls == (0,)  # announced, then dropped
    assert stream.message == message
    assert without_dropped(accumulate(deltas), stream.dropped_calls) == message_dict(message)


@pytest.mark.parametrize(
    ("name", "text", "content"),
    [
        ("hermes", "Checking.\n<tool_call>", "Checking."),
        ("hermes", "Checking.\n<tool_call>\n  ", "Checking."),
        ("qwen3coder", "Checking.\n<tool_call>\n<function=", "Checking."),
        ("mistral", "Checking. [TOOL_CALLS]", "Checking."),
        ("glm", "<tool_call>", None),
        ("hermes", "Checking <tool_ca", "Checking <tool_ca"),  # a piece of one: text
        ("llama", "Checking {", "Checking {"),  # a lone brace is text, not markup
    ],
)
def test_dangling_call_opener_at_the_end_is_dropped(
    name: str, text: str, content: str | None
) -> None:
    params = CASE_BY_NAME[name].params(TOOLS)
    message = params.parse(text)
    assert (message.content, message.tool_calls) == (content, [])
    assert message.truncated is (content != text)
    for chunks in (list(text), [text]):
        run_stream(params, chunks)


def test_call_complete_before_a_cut_one_is_kept() -> None:
    case = CASE_BY_NAME["hermes"]
    text = case.output(scenarios(case)["two_calls"], TOOLS)
    cut = text[: text.rindex('"') - 2]
    message = case.params(TOOLS).parse(cut)
    assert len(message.tool_calls) == 1 and message.truncated
    second = cut[cut.index("</tool_call>") + len("</tool_call>") :].strip()
    assert message.content is None and message.truncated_call == second
    rng = random.Random(4)
    for chunks in [list(cut), *(splits(cut, rng) for _ in range(5))]:
        run_stream(case.params(TOOLS), chunks)


@pytest.mark.parametrize(
    "text",
    [
        "Use <tool_call> like this, or <tool_c",
        '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call> and more',
        "<tool_call>\n[1, 2]\n</tool_call>",
        "a < b and <tool_call",
    ],
)
def test_malformed_output_streams_as_content(text: str) -> None:
    params = CASE_BY_NAME["hermes"].params(TOOLS)
    for chunks in (list(text), [text]):
        deltas = run_stream(params, chunks)
        assert accumulate(deltas) == {
            "content": text.strip(),
            "reasoning_content": None,
            "tool_calls": [],
        }


def test_feed_after_finish_raises() -> None:
    stream = CASE_BY_NAME["plain"].params(None).stream()
    stream.feed("hi")
    stream.finish()
    with pytest.raises(RequestError):
        stream.feed("more")


def test_generated_ids_are_stable_and_differ_between_requests() -> None:
    case = CASE_BY_NAME["hermes"]
    text = case.output(scenarios(case)["two_calls"], TOOLS)
    params = case.params(TOOLS, call_id_seed=None)
    ids = [c.id for c in params.parse(text).tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert [c.id for c in params.parse(text).tool_calls] == ids
    other = case.params(TOOLS, call_id_seed=None)
    assert [c.id for c in other.parse(text).tool_calls] != ids


def test_model_ids_are_kept() -> None:
    for name in ("mistral", "bracket_callid", "nested"):
        case = CASE_BY_NAME[name]
        text = case.output(scenarios(case)["one_call"], TOOLS)
        assert [c.id for c in case.params(TOOLS).parse(text).tool_calls] == ["abcdefghi"]


# ------------------------------------------------------------------ needles (seed 003)


def _needles(tag: str, count: int) -> list[str]:
    return [f"$N{i}{tag}$" for i in range(1, count + 1)]


def _check_needles(history: list[str], needles: list[str]) -> None:
    """Every needle appears, in order, and a needle once seen never disappears."""
    found_at: list[int] = []
    for needle in needles:
        step = next((i for i, text in enumerate(history) if needle in text), None)
        assert step is not None, f"needle {needle} never appeared"
        found_at.append(step)
    assert found_at == sorted(found_at), f"needles out of order: {found_at}"
    for earlier, later in itertools.pairwise(history):
        assert later.startswith(earlier), "a field regressed while streaming"


NEEDLE_CASES = [c for c in CASES if c.calls or c.reasoning]


@pytest.mark.parametrize("case", NEEDLE_CASES, ids=[c.name for c in NEEDLE_CASES])
def test_needles_stream_in_order(case: Case) -> None:
    r = _needles("R", 3)
    c = _needles("C", 3)
    a = _needles("A", 3)
    message: dict[str, Any] = {"role": "assistant"}
    if case.reasoning:
        message["reasoning_content"] = f"Thinking {r[0]} deeply {r[1]} and {r[2]}."
    if not case.calls or case.content_with_calls:
        message["content"] = f"Content {c[0]} here {c[1]} and {c[2]}."
    if case.calls:
        args = {"query": f"find {a[0]} then {a[1]}", "tags": [a[2]]}
        message["tool_calls"] = [call("search", args, "abcdefghi" if case.ids else "")]
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.params(tools)
    stream = params.stream(tool_call_deltas="incremental")  # arguments as they are written
    history: dict[str, list[str]] = {"content": [], "reasoning_content": [], "arguments": []}
    for ch in text:
        stream.feed(ch)
        m = stream.message
        history["content"].append(m.content or "")
        history["reasoning_content"].append(m.reasoning_content or "")
        history["arguments"].append(m.tool_calls[0].arguments if m.tool_calls else "")
    stream.finish()
    if "reasoning_content" in message:
        _check_needles(history["reasoning_content"], r)
    if "content" in message:
        _check_needles(history["content"], c)
    if case.calls:
        _check_needles(history["arguments"], a)
        assert json.loads(stream.message.tool_calls[0].arguments) == args


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_stream_with_analysed_template(case: Case, scenario: str, message: dict[str, Any]) -> None:
    tools = case.request_tools
    text = case.output(message, tools)
    params = case.load().apply([{"role": "user", "content": "Hi"}], tools=tools)
    run_stream(params, list(text))
    run_stream(params, splits(text, random.Random(scenario)))


def test_string_encoded_arguments_stream_decoded() -> None:
    case = CASE_BY_NAME["nested"]
    args = {"query": 'say "hi" \\ 🌧 東京\n', "tags": ["a"], "limit": 2}
    message = {"role": "assistant", "content": None, "tool_calls": [call("search", args, "id1")]}
    text = case.output(message, TOOLS)
    assert '\\"' in text  # the arguments really are a JSON string inside the call
    params = case.params(TOOLS)
    deltas = run_stream(params, list(text))
    fragments = [tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", [])]
    assert len([f for f in fragments if f]) == 1  # whole: the call in one delta
    deltas, stream = incremental_run(params, list(text))
    fragments = [tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", [])]
    assert len([f for f in fragments if f]) > 5  # incremental: in pieces, not at the end
    assert accumulate(deltas) == message_dict(stream.message) == message_dict(params.parse(text))
    assert json.loads(params.parse(text).tool_calls[0].arguments) == args
    cut = text[: text.find("\\ud83c") + 3 if "\\ud83c" in text else text.find("🌧") + 1]
    truncated = params.parse(cut)
    assert truncated.truncated and truncated.tool_calls == []
    assert truncated.content is None and truncated.truncated_call == cut.strip()


def test_string_encoded_arguments_with_escaped_surrogates() -> None:
    args = {"query": "rain 🌧 \\ done", "n": 1}
    encoded = json.dumps(json.dumps(args, ensure_ascii=True))  # \\ud83c\\udf27 escapes
    assert "\\\\ud83c\\\\udf27" in encoded
    body = '{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '
    text = "<tool_calls>[" + body + encoded + "}}]</tool_calls>"
    params = CASE_BY_NAME["nested"].params(TOOLS)
    assert json.loads(params.parse(text).tool_calls[0].arguments) == args
    rng = random.Random(3)
    for chunks in [list(text), *(splits(text, rng) for _ in range(10))]:
        deltas = run_stream(params, chunks)
        assert json.loads(accumulate(deltas)["tool_calls"][0]["arguments"]) == args


def test_python_style_dicts() -> None:
    base = CASE_BY_NAME["hermes"]
    fmt = dataclasses.replace(base.analysis.tools.format, uses_python_dicts=True)
    tools_analysis = dataclasses.replace(base.analysis.tools, format=fmt)
    case = dataclasses.replace(
        base, analysis=dataclasses.replace(base.analysis, tools=tools_analysis)
    )
    params = case.params(TOOLS)
    args = "{'query': 'it\\'s \"q\"', 'tags': ['a'], 'exact': true, 'cursor': null}"
    text = f"<tool_call>\n{{'name': 'search', 'arguments': {args}}}\n</tool_call>"
    message = params.parse(text)
    assert json.loads(message.tool_calls[0].arguments) == {
        "query": 'it\'s "q"',
        "tags": ["a"],
        "exact": True,
        "cursor": None,
    }
    run_stream(params, list(text))
    assert params.grammar is not None and accepts(params.grammar, text)


def test_call_failing_after_its_name_is_content() -> None:
    """Broken arguments after a complete name: no call, its text stays content; the
    whole policy never announced it, the incremental one lists it as dropped."""
    cases = {
        "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": oops}}\n'
        "</tool_call>\nAfter.",
        "functionary": '<function=get_weather>{"city": "Paris", 7}</function>After.',
        "bracket_callid": '[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": ]]',
    }
    for name, text in cases.items():
        params = CASE_BY_NAME[name].params(TOOLS)
        message = params.parse(text)
        assert message.tool_calls == [] and not message.truncated, name
        assert message.content == text, name
        rng = random.Random(name)
        for chunks in [list(text), [text], *(splits(text, rng) for _ in range(10))]:
            run_stream(params, chunks)
            deltas, stream = incremental_run(params, chunks)
            assert stream.message == message
            assert without_dropped(accumulate(deltas), stream.dropped_calls) == message_dict(
                message
            )
        assert incremental_run(params, list(text))[1].dropped_calls == (0,), name


def test_tagged_values_printed_as_python_literals() -> None:
    """Templates that print values with str(): False, None, {'a': 1} become JSON."""
    params = CASE_BY_NAME["qwen3coder"].params(TOOLS)
    text = (
        "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n"
        "<parameter=exact>\nFalse\n</parameter>\n<parameter=cursor>\nNone\n</parameter>\n"
        "<parameter=filters>\n{'a': None, 'b': [True, 'it\\'s']}\n</parameter>\n"
        "<parameter=limit>\n7\n</parameter>\n</function>\n</tool_call>"
    )
    args = json.loads(params.parse(text).tool_calls[0].arguments)
    assert args == {
        "query": "x",
        "exact": False,
        "cursor": None,
        "filters": {"a": None, "b": [True, "it's"]},
        "limit": 7,
    }
    rng = random.Random(5)
    for chunks in [list(text), *(splits(text, rng) for _ in range(10))]:
        run_stream(params, chunks)
    # The grammar allows what the template taught the model, and nothing looser: this one
    # prints objects with tojson, so a Python-literal object is parsed (above) but not
    # generated; scalars are allowed either way.
    strict = CASE_BY_NAME["qwen3coder"].params(TOOLS, tool_choice="required")
    assert strict.grammar is not None and not accepts(strict.grammar, text)
    text = text.replace("{'a': None, 'b': [True, 'it\\'s']}", '{"a": null, "b": [true, "it\'s"]}')
    assert accepts(strict.grammar, text)
    assert accepts(strict.grammar, text.replace("\nFalse\n", "\nfalse\n"))
    assert not accepts(strict.grammar, text.replace("\n7\n", "\nseven\n"))
    assert not accepts(strict.grammar, text.replace("null,", "nil,"))
    # A required parameter (query) cannot be left out, nor written twice.
    assert not accepts(strict.grammar, text.replace("<parameter=query>\nx\n</parameter>\n", ""))
    twice = text.replace(
        "<parameter=query>\nx\n</parameter>\n", "<parameter=query>\nx\n</parameter>\n" * 2
    )
    assert not accepts(strict.grammar, twice)


@pytest.mark.parametrize(
    "prefix",
    [
        "{",
        '{"a',
        '{"a"',
        '{"a":',
        '{"a": "x',
        '{"a": "x\\\\',
        '{"a": "x\\\\\\\\',
        '{"a": "x\\\\"',
        '{"a": [1, {"b": "}]',
        '{"a": {"b": [',
        '{"a": "q", "b',
    ],
)
def test_json_closer_makes_valid_json(prefix: str) -> None:
    from autoparser.stream import json_closer

    closed = prefix + json_closer(prefix)
    assert isinstance(json.loads(closed), dict), closed
    assert closed.startswith(prefix)


def test_pythonic_calls() -> None:
    """f(query='text', limit=3, exact=False): quoted raw strings, other values bare."""
    from autoparser.analysis.model import (
        ArgumentsAnalysis,
        TemplateAnalysis,
        ToolFormat,
        ToolFormatAnalysis,
        ToolsAnalysis,
    )

    analysis = TemplateAnalysis(
        tools=ToolsAnalysis(
            format=ToolFormatAnalysis(
                mode=ToolFormat.TAG_WITH_TAGGED,
                section_start="<|tool_call_start|>[",
                section_end="]<|tool_call_end|>",
            ),
            arguments=ArgumentsAnalysis(
                start="(", end=")", name_suffix="='", value_suffix="'", separator=", "
            ),
            call_separator=", ",
            parallel_calls=True,
        ),
        end_of_turn=("<|im_end|>",),
    )
    from autoparser.params import build_params

    params = build_params(analysis, tools=TOOLS, call_id_seed=1)
    text = (
        "<|tool_call_start|>[search(query='two words', limit=3, exact=False, "
        'tags=[\'a\', "b\'c"], filters={"k": [1, None]}), ping()]<|tool_call_end|>'
    )
    message = params.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        (
            "search",
            {
                "query": "two words",
                "limit": 3,
                "exact": False,
                "tags": ["a", "b'c"],
                "filters": {"k": [1, None]},
            },
        ),
        ("ping", {}),
    ]
    rng = random.Random(9)
    for chunks in [list(text), *(splits(text, rng) for _ in range(10))]:
        run_stream(params, chunks)
    required = build_params(analysis, tools=TOOLS, tool_choice="required")
    assert required.grammar is not None and accepts(required.grammar, text)


def _python_dicts_case() -> Case:
    base = CASE_BY_NAME["hermes"]
    fmt = dataclasses.replace(base.analysis.tools.format, uses_python_dicts=True)
    tools_analysis = dataclasses.replace(base.analysis.tools, format=fmt)
    return dataclasses.replace(
        base, analysis=dataclasses.replace(base.analysis, tools=tools_analysis)
    )


_BROKEN_ARGS = {"query": 'x "q" \\ {b}', "filters": {"k": [1, None, True]}, "limit": 3}


def _broken_args_outputs() -> list[Any]:
    """(case, text, where the arguments start, where they end) for one call per format
    family: JSON text, a JSON string holding the JSON, a Python-literal dict."""
    out = []
    message = {"role": "assistant", "content": None, "tool_calls": [call("search", _BROKEN_ARGS)]}
    for case in (CASE_BY_NAME["hermes"], CASE_BY_NAME["nested"]):
        if case.ids:
            message["tool_calls"][0]["id"] = "abcdefghi"
        text = case.output(message, TOOLS)
        start = text.index('"arguments": ') + len('"arguments": ')
        out.append(pytest.param(case, text, start, text.rindex("}"), id=case.name))
    # The Python way, as str() writes the call object.
    python = str({"name": "search", "arguments": _BROKEN_ARGS})
    text = f"<tool_call>\n{python}\n</tool_call>"
    start = text.index("'arguments': ") + len("'arguments': ")
    out.append(pytest.param(_python_dicts_case(), text, start, text.rindex("}"), id="python"))
    return out


@pytest.mark.parametrize(("case", "text", "start", "stop"), _broken_args_outputs())
def test_arguments_breaking_after_the_name_stream_like_they_parse(
    case: Case, text: str, start: int, stop: int
) -> None:
    """Arguments that break mid-way (a stray character, an invalid escape) after the call's
    name: parse() returns no call and keeps every character as content, never a repaired
    call; any split streams to the same message."""
    params = case.params(TOOLS)
    rng = random.Random(f"broken-{case.name}")
    positions = sorted(rng.sample(range(start, stop), min(24, stop - start)))
    for at in positions:
        broken = text[:at] + "@\\q" + text[at:] + "\nThen text."
        message = params.parse(broken)
        assert message.tool_calls == [], broken
        assert not message.truncated, broken
        assert message.content is not None and message.content.endswith("Then text.")
        assert "@\\q" in message.content
        for chunks in [list(broken), *(splits(broken, rng) for _ in range(3))]:
            run_stream(params, chunks)


@pytest.mark.parametrize(
    "encoded",
    [
        "not json",  # the string holds no JSON object at all
        '{"city": "Paris"',  # the string ends before its JSON does
        '{"city": "Paris"} trailing',  # ... or after it
        '{"days": tr',  # a literal cut short
        "[1, 2]",  # JSON, not an object
    ],
)
def test_string_encoded_arguments_holding_broken_json(encoded: str) -> None:
    """A complete argument string whose JSON is not an object: no call, its text is
    content, in parse() and in any stream alike."""
    case = CASE_BY_NAME["nested"]
    params = case.params(TOOLS)
    good = case.output(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("get_weather", {"city": "X"}, "abcdefghi")],
        },
        TOOLS,
    )
    marker = json.dumps(json.dumps({"city": "X"}))
    assert marker in good
    text = good.replace(marker, json.dumps(encoded))
    message = params.parse(text)
    assert message.tool_calls == [] and not message.truncated
    assert message.content is not None and json.dumps(encoded) in message.content
    rng = random.Random(encoded)
    for chunks in [list(text), *(splits(text, rng) for _ in range(5))]:
        run_stream(params, chunks)
        deltas, stream = incremental_run(params, chunks)
        assert stream.message == message
        assert without_dropped(accumulate(deltas), stream.dropped_calls) == message_dict(message)


def test_cli_parse_stream_takes_the_delta_policy(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``parse --stream --tool-call-deltas``: whole sends no broken call; incremental
    announces it, drops it and says so on stderr."""
    import io
    import sys

    from helpers.generate_cases import TEMPLATES

    from autoparser.cli import main

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": oops}}\n</tool_call>'
    template = str(TEMPLATES / "formats" / "chatml_hermes.jinja")
    for policy, calls in (("whole", 0), ("incremental", 1)):
        monkeypatch.setattr(sys, "stdin", io.StringIO(broken))
        argv = ["parse", template, "--tools", str(tools), "--stream"]
        assert main([*argv, "--tool-call-deltas", policy]) == 0
        out, err = capsys.readouterr()
        deltas = [json.loads(line) for line in out.splitlines()]
        assert sum("tool_calls" in d for d in deltas) >= calls
        assert any("tool_calls" in d for d in deltas) is bool(calls)
        assert "".join(d.get("content", "") for d in deltas) == broken
        assert ("dropped" in err) is bool(calls)


def test_reasoning_end_is_after_the_end_marker_once_it_is_complete() -> None:
    """``StreamParser.reasoning_end``: None while reasoning may go on (the end marker only
    partly written included), then where the text after the block starts; an output with
    no reasoning ends it at 0 once the output ended."""
    template = ChatTemplate.from_file(OWN_TEMPLATES / "reasoning" / "think_tag.jinja")
    params = template.apply([{"role": "user", "content": "hi"}], None, enable_thinking=True)
    text = "<think>Plan it.</think>The answer."
    after = text.index("</think>") + len("</think>")
    stream = params.stream()
    for end in range(1, len(text) + 1):
        stream.feed_deltas(text[end - 1 : end])
        assert stream.reasoning_end() == (after if end >= after else None), text[:end]
    plain = params.stream()
    plain.feed_deltas("Hello")
    plain.finish_deltas()
    assert plain.reasoning_end() == 0
