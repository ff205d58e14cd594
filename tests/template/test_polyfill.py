"""Each polyfill: applied only where the probed caps say so, switchable off, tested here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers.paths import own_path

from autoparser import ChatTemplate
from autoparser.errors import TemplateError
from autoparser.template.polyfill import alnum9_id

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def own(name: str, **kwargs: Any) -> ChatTemplate:
    return ChatTemplate.from_file(own_path(name), **kwargs)


def call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        out["id"] = call_id
    return out


def tool_conversation(
    *calls: dict[str, Any], results: list[str | None] | None = None
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": list(calls)},
    ]
    ids = results if results is not None else [c.get("id") for c in calls]
    for index, call_id in enumerate(ids):
        message = {"role": "tool", "content": f"result {index}"}
        if call_id is not None:
            message["tool_call_id"] = call_id
        messages.append(message)
    return messages


def test_system_folded_into_first_user_turn() -> None:
    template = own("no_system")
    assert not template.caps.supports_system_role
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ]
    rendered = template.render(messages)
    assert rendered.startswith("<user>Be brief.\n\nHi</user>\n<assistant>Hello</assistant>\n")
    assert rendered.count("Be brief.") == 1
    with pytest.raises(TemplateError, match="System role not supported"):
        template.render(messages, polyfills=False)


def test_system_only_becomes_user_turn() -> None:
    rendered = own("no_system").render([{"role": "system", "content": "Only me"}])
    assert rendered == "<user>Only me</user>\n<assistant>"


def test_tool_call_ids_reshaped_consistently() -> None:
    template = own("alnum_ids")
    messages = tool_conversation(
        call("call_abc", "get_weather", {"city": "Paris"}),
        call("call_def", "get_weather", {"city": "Rome"}),
    )
    rendered = template.render(messages, tools=[WEATHER])
    call_ids = re.findall(r'"id": "([^"]*)"', rendered)
    result_ids = re.findall(r"\[RESULT id=([^\]]*)\]", rendered)
    assert len(call_ids) == 2 and len(set(call_ids)) == 2
    assert all(re.fullmatch(r"[0-9A-Za-z]{9}", i) for i in call_ids)
    assert result_ids == call_ids
    assert template.render(messages, tools=[WEATHER]) == rendered  # deterministic
    assert call_ids[0] == alnum9_id("call_abc")
    with pytest.raises(TemplateError, match="length 9"):
        template.render(messages, tools=[WEATHER], polyfills=False)


# Writes each call's id where its name goes (Kimi-K2-Thinking's layout).
ID_FOR_NAME = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}"
    "<call>{{ tc.id }}<args>{{ tc.function.arguments | tojson }}</call>{% endfor %}"
    "{% elif m.role == 'tool' %}<result of {{ m.tool_call_id }}>{{ m.content }}"
    "{% else %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}"
)


def test_call_ids_name_their_calls_where_the_template_writes_the_id_as_the_name() -> None:
    template = ChatTemplate(ID_FOR_NAME)
    assert template.quirks.tool_call_id_names_call
    assert template.caps.supports_tool_calls and template.caps.supports_parallel_tool_calls
    messages = tool_conversation(
        call("call_abc", "get_weather", {"city": "Paris"}),
        call("functions.get_time:7", "get_time", {}),
    )
    rendered = template.render(messages, tools=[WEATHER])
    assert re.findall(r"<call>([^<]*)<args>", rendered) == [
        "functions.get_weather:0",
        "functions.get_time:7",  # already of that shape: kept
    ]
    assert re.findall(r"<result of ([^>]*)>", rendered) == [
        "functions.get_weather:0",
        "functions.get_time:7",
    ]
    assert "<call>call_abc<args>" in template.render(messages, tools=[WEATHER], polyfills=False)


def test_tool_call_ids_invented_when_missing_and_kept_when_valid() -> None:
    template = own("alnum_ids")
    missing = tool_conversation(call(None, "get_weather", {}), results=[None])
    rendered = template.render(missing)
    (call_id,) = re.findall(r'"id": "([^"]*)"', rendered)
    assert re.findall(r"\[RESULT id=([^\]]*)\]", rendered) == [call_id]
    valid = tool_conversation(call("abcDEF123", "get_weather", {}))
    assert '"id": "abcDEF123"' in template.render(valid)


def test_string_arguments_parsed_for_templates_needing_objects() -> None:
    template = own("items_args")
    assert template.caps.requires_object_arguments
    openai = tool_conversation(call("c1", "get_weather", json.dumps({"city": "Paris", "n": 2})))
    native = tool_conversation(call("c1", "get_weather", {"city": "Paris", "n": 2}))
    rendered = template.render(openai)
    assert '<arg name="city">Paris</arg><arg name="n">2</arg>' in rendered
    assert rendered == template.render(native)
    with pytest.raises(TemplateError):
        template.render(openai, polyfills=False)


def test_object_arguments_serialised_for_templates_needing_strings() -> None:
    template = own("string_args")
    assert template.quirks.arguments_as_json_string
    native = tool_conversation(call("c1", "get_weather", {"city": "Zürich"}))
    openai = tool_conversation(call("c1", "get_weather", '{"city": "Zürich"}'))
    assert '>>>get_weather\n{"city": "Zürich"}' in template.render(native)
    assert template.render(native) == template.render(openai)
    with pytest.raises(TemplateError, match="concatenate"):
        template.render(native, polyfills=False)


def test_tools_described_in_system_turn_when_template_ignores_them() -> None:
    template = own("nonnull_content")
    assert template.caps.supports_system_role and not template.caps.supports_tools
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    rendered = template.render(messages, tools=[WEATHER])
    system = rendered.split("</system>")[0]
    assert system.startswith("<system>Be brief.\n\n")
    assert json.dumps(WEATHER) in system
    assert "get_weather" not in template.render(messages, tools=[WEATHER], polyfills=False)
    no_system = template.render([messages[1]], tools=[WEATHER])
    assert no_system.startswith("<system>") and "get_weather" in no_system


def test_tools_description_folded_when_no_system_role() -> None:
    rendered = own("no_system").render([{"role": "user", "content": "Hi"}], tools=[WEATHER])
    assert rendered.startswith("<user>") and "get_weather" in rendered
    assert rendered.endswith("\n\nHi</user>\n<assistant>")


def test_tools_left_alone_when_template_renders_them() -> None:
    template = own("alnum_ids")
    messages = [{"role": "user", "content": "Hi"}]
    assert template.render(messages, tools=[WEATHER]) == template.render(
        messages, tools=[WEATHER], polyfills=False
    )


def test_null_content_becomes_empty_string_where_required() -> None:
    template = own("nonnull_content")
    assert template.caps.requires_non_null_content
    messages = tool_conversation(call("c1", "get_weather", "{}"))
    assert "<assistant><call>get_weather</call></assistant>" in template.render(messages)
    with pytest.raises(TemplateError, match="content"):
        template.render(messages, polyfills=False)


def test_string_content_becomes_typed_parts_where_required() -> None:
    template = own("typed_content")
    assert template.caps.requires_typed_content
    messages = [{"role": "user", "content": "Hi there"}]
    assert template.render(messages) == "<user>Hi there</user>\n"
    assert template.render(messages, polyfills=False) == "<user></user>\n"


def test_reasoning_also_passed_as_reasoning_key() -> None:
    template = own("reasoning_key")
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "adding"},
    ]
    assert "<reasoning>adding</reasoning>" in template.render(messages)
    assert "adding" not in template.render(messages, polyfills=False)


def test_constructor_switch_turns_polyfills_off() -> None:
    template = own("no_system", polyfills=False)
    with pytest.raises(TemplateError):
        template.render([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    assert "x\n\ny" in template.render(
        [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}], polyfills=True
    )


def test_polyfills_do_not_mutate_inputs() -> None:
    messages = tool_conversation(call("call_1", "get_weather", '{"city": "Paris"}'))
    snapshot = json.loads(json.dumps(messages))
    own("alnum_ids").render(messages, tools=[WEATHER])
    own("items_args").render(messages)
    assert messages == snapshot


def test_reasoning_passed_as_thinking_part() -> None:
    template = own("thinking_blocks")
    assert template.quirks.reasoning_as_thinking_block and template.caps.renders_reasoning
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "adding"},
    ]
    assert template.render(messages).endswith("[assistant][THINK]adding[/THINK]4")
    assert template.render(messages, polyfills=False).endswith("[assistant]4")
    plain = [messages[0], {"role": "assistant", "content": "4"}]
    assert template.render(plain) == template.render(plain, polyfills=False)


# Reads the tool's description field by field (fails without one) and dumps the parameters.
_READS_DESCRIPTION = (
    "{%- for t in tools %}{{ t.function.name }}: {{ t.function.description.strip() }} "
    "{{ t.function.parameters | tojson }}\n{% endfor -%}"
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}"
)


def test_tool_fields_are_filled_only_where_the_template_fails_without() -> None:
    template = ChatTemplate(_READS_DESCRIPTION, name="reads_description")
    assert template.quirks.requires_tool_fields
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    described = [
        {
            "type": "function",
            "function": {"name": "f", "description": "Does f.", "parameters": params},
        }
    ]
    messages = [{"role": "user", "content": "hi"}]
    # The caller's tools suffice: the render is the template's own (no empty descriptions).
    assert template.render(messages, described) == template.render(
        messages, described, polyfills=False
    )
    assert '"description"' not in template.render(messages, described)
    # Without a description the template fails: the polyfill fills it in.
    bare = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    with pytest.raises(TemplateError):
        template.render(messages, bare, polyfills=False)
    assert "f:  {" in template.render(messages, bare)
