"""Capabilities found by probing, checked against rows written from reading each template."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import (
    OWN_TEMPLATES,
    TESTS_DIR,
    corpus_dir,
    corpus_params,
    corpus_templates,
    own_path,
)

from autoparser import ChatTemplate
from autoparser.errors import TemplateError
from autoparser.examples import example_path
from autoparser.template import TemplateCaps
from autoparser.template.caps import detect_caps

DATA = TESTS_DIR / "data" / "template_caps_expectations.json"
EXPECTED: dict[str, dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))
FIELDS = {f.name for f in dataclasses.fields(TemplateCaps) if f.type in ("bool", bool)}


def true_fields(obj: object) -> set[str]:
    """The boolean fields that are set (the switch is pinned on its own)."""
    return {k for k, v in dataclasses.asdict(obj).items() if v is True}  # type: ignore[call-overload]


def test_expectations_name_only_known_fields() -> None:
    for name, row in EXPECTED.items():
        assert set(row.get("caps", [])) <= FIELDS, name
        assert set(row.get("xfail", {}).get("detected", [])) <= FIELDS, name


def _caps_params() -> list[Any]:
    """Corpus templates; a row with ``xfail`` (detection known wrong: ``caps`` holds the
    correct value, ``xfail.detected`` today's) is a strict xfail with its reason."""
    params: list[Any] = []
    for p in corpus_params():
        path = p.values[0]  # type: ignore[attr-defined]
        xfail = EXPECTED.get(path.stem, {}).get("xfail") if path is not None else None
        if xfail:
            mark = pytest.mark.xfail(reason=xfail["reason"], strict=True)
            p = pytest.param(path, marks=mark, id=path.stem)
        params.append(p)
    return params


@pytest.mark.parametrize("path", _caps_params())
def test_corpus_caps(path: Path) -> None:
    """Caps equal the row written from reading the template (an uncompilable template is
    pinned as the error it raises)."""
    assert path.stem in EXPECTED, f"no caps row for {path.stem} in {DATA.name}"
    row = EXPECTED[path.stem]
    if "error" in row:
        # Either the template does not compile, or it compiles and no probe renders.
        with pytest.raises(TemplateError, match=re.escape(row["error"])):
            ChatTemplate.from_file(path).caps  # noqa: B018
        return
    template = ChatTemplate.from_file(path)
    assert true_fields(template.caps) == set(row["caps"])
    assert true_fields(template.quirks) == set(row.get("quirks", []))
    assert switch_row(template.caps) == row.get("thinking_switch")


def switch_row(caps: TemplateCaps) -> list[Any] | None:
    """The reasoning switch as pinned in a row: [variable, on value, off value], or
    ["system_directive", on directive, off directive] for a switch in the system message."""
    switch = caps.thinking_switch
    return None if switch is None else [switch.variable or switch.kind, switch.on, switch.off]


@pytest.mark.parametrize(
    "name", sorted(name for name, row in EXPECTED.items() if "xfail" in row) or ["none"]
)
def test_known_wrong_caps_stay_as_detected(name: str) -> None:
    """Where detection is known wrong, today's output is pinned too, so a change shows."""
    if name == "none":
        pytest.skip("no known-wrong caps rows")
    root = corpus_dir()
    if root is None:
        pytest.skip("template corpus not found")
    template = ChatTemplate.from_file(root / f"{name}.jinja")
    assert true_fields(template.caps) == set(EXPECTED[name]["xfail"]["detected"])


def test_every_row_has_a_corpus_template() -> None:
    names = {p.stem for p in corpus_templates()}
    if not names:
        pytest.skip("template corpus not found")
    assert set(EXPECTED) == names


# Own templates: rows written from the template text in tests/templates.
OWN_EXPECTED = {
    "no_system": set(),
    "alnum_ids": {
        "supports_system_role",
        "supports_tools",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_call_id",
        "supports_tool_responses",
        "requires_object_arguments",
    },
    "items_args": {
        "supports_system_role",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_responses",
        "requires_object_arguments",
    },
    "string_args": {
        "supports_system_role",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_responses",
    },
    "nonnull_content": {
        "supports_system_role",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_responses",
        "requires_non_null_content",
    },
    "typed_content": {"supports_system_role", "requires_typed_content"},
    "reasoning_key": {"supports_system_role", "renders_reasoning"},
    "thinking_blocks": {"supports_system_role", "renders_reasoning"},
    "mutates_list": {"supports_system_role"},
    # Tools read as bare function objects: found by passing them in that shape too.
    "bare_function_tools": {
        "supports_system_role",
        "supports_tools",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_responses",
        "requires_object_arguments",
    },
    # Reads the tools only as `functions` text and the date as `datetime`, unguarded: it
    # renders (and its caps are probed) with the conventional values supplied.
    "conventional_variables": {
        "supports_system_role",
        "supports_tools",
        "supports_tool_calls",
        "supports_parallel_tool_calls",
        "supports_tool_responses",
        "requires_object_arguments",
    },
    # Lists only tools with a description (the probe tools have one); renders no calls.
    "described_tools": {"supports_system_role", "supports_tools", "supports_tool_responses"},
}


@pytest.mark.parametrize("name", sorted(OWN_EXPECTED))
def test_own_template_caps(name: str) -> None:
    assert true_fields(ChatTemplate.from_file(own_path(name)).caps) == OWN_EXPECTED[name]


def test_tools_read_as_bare_functions_are_passed_in_that_shape() -> None:
    template = ChatTemplate.from_file(OWN_TEMPLATES / "quirks/bare_function_tools.jinja")
    assert template.quirks.tools_as_functions
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    user = [{"role": "user", "content": "Weather?"}]
    prompt = template.render(user, [tool])
    assert '- get_weather: Current weather. {"type": "object"' in prompt
    # Polyfills off: the template sees the OpenAI shape and cannot read it.
    with pytest.raises(TemplateError):
        template.render(user, [tool], polyfills=False)
    assert template.analyze().tools.format.mode.value == "json_native"


def test_example_template_caps() -> None:
    caps = ChatTemplate.from_file(example_path()).caps
    assert true_fields(caps) == FIELDS - {
        "supports_tool_call_id",
        "requires_object_arguments",
        "requires_non_null_content",
        "requires_typed_content",
    }


def test_caps_probed_once_per_template_text() -> None:
    source = (OWN_TEMPLATES / "quirks/items_args.jinja").read_text(encoding="utf-8")
    first = ChatTemplate(source, name="a")
    second = ChatTemplate(source, name="b")
    assert first.caps is first.caps
    assert detect_caps(first.renderer) is detect_caps(second.renderer)


def test_tool_use_variant_supplies_tool_caps(tmp_path: Path) -> None:
    plain = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    tool_use = (OWN_TEMPLATES / "quirks/alnum_ids.jinja").read_text(encoding="utf-8")
    config = {
        "chat_template": [
            {"name": "default", "template": plain},
            {"name": "tool_use", "template": tool_use},
        ]
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    template = ChatTemplate.from_file(tmp_path)
    assert not detect_caps(template.renderer).supports_tools
    assert template.caps.supports_tools and template.caps.supports_tool_call_id
    assert template.caps.supports_system_role == detect_caps(template.renderer).supports_system_role


# Templates that list every tool in the system turn but show fewer assistant calls.
TOOLS_LIST = "{% for t in tools or [] %}tool {{ t.function.name }}\n{% endfor %}"
TURNS = (
    "{% for m in messages %}{{ m.role }}: {{ m.content or '' }}"
    "{% if m.role == 'assistant' %}{CALLS}{% endif %}\n{% endfor %}"
)
NO_CALLS = TOOLS_LIST + TURNS.replace("{CALLS}", "")
FIRST_CALL = TOOLS_LIST + TURNS.replace(
    "{CALLS}",
    "{% if m.tool_calls %}{% set c = m.tool_calls[0].function %}"
    "[{{ c.name }} {{ c.arguments | tojson }}]{% endif %}",
)
ALL_CALLS = TOOLS_LIST + TURNS.replace(
    "{CALLS}",
    "{% for tc in m.tool_calls or [] %}[{{ tc.function.name }} "
    "{{ tc.function.arguments | tojson }}]{% endfor %}",
)


def repro_render(source: str) -> str:
    """Two calls, `zz_one` and `zz_two`, offered only a third tool: what the turn shows."""
    calls = [
        {"type": "function", "function": {"name": name, "arguments": {"x": name + "_arg"}}}
        for name in ("zz_one", "zz_two")
    ]
    tools = [{"type": "function", "function": {"name": "other", "parameters": {}}}]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    return ChatTemplate(source).render(messages, tools, polyfills=False)


@pytest.mark.parametrize(
    ("source", "shown", "calls", "parallel"),
    [
        (NO_CALLS, (), False, False),
        (FIRST_CALL, ("zz_one",), True, False),
        (ALL_CALLS, ("zz_one", "zz_two"), True, True),
    ],
    ids=["no-calls", "first-call-only", "all-calls"],
)
def test_call_caps_follow_the_assistant_turn_not_the_tools_list(
    source: str, shown: tuple[str, ...], calls: bool, parallel: bool
) -> None:
    text = repro_render(source)
    assert {n for n in ("zz_one", "zz_two") if n in text} == set(shown)
    caps = ChatTemplate(source).caps
    assert caps.supports_tools
    assert (caps.supports_tool_calls, caps.supports_parallel_tool_calls) == (calls, parallel)
