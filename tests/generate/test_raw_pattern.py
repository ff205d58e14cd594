"""A string parameter's ``pattern`` in formats that write string values as raw text
(generate/raw_pattern.py, issue 31): the grammar writes exactly the texts the pattern
allows (a search, as JSON Schema's pattern is) that do not hold the value's closer, with
the template's padding around them. Oracles: Python's ``re`` for the pattern, llguidance
for the grammar, the format's own parser for the value read back."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.formats import model_output
from helpers.gbnf_oracle import accepts, assert_portable
from helpers.paths import TESTS_DIR, corpus_dir, own_path

from autoparser import ChatTemplate
from autoparser.errors import RequestError
from autoparser.generate.raw_pattern import pattern_text
from autoparser.peg import grammar
from autoparser.schema.lark_grammar import lark_to_regex

ENDS = ["<|im_end|>\n", "<|im_end|>", "<|user|>", "<|endoftext|>"]
USER = [{"role": "user", "content": "hi"}]


def _templates() -> list[Any]:
    own = [own_path("formats/qwen3coder_like.jinja"), own_path("formats/glm_like.jinja")]
    corpus = corpus_dir()
    real = corpus / "Qwen3-Coder.jinja" if corpus else None
    found: list[Any] = [pytest.param(p, id=p.stem) for p in own]
    if real is not None and real.is_file():
        found.append(pytest.param(real, id=real.stem))
    return found


TEMPLATES = _templates()


def _tool(schema: dict[str, Any]) -> list[dict[str, Any]]:
    parameters = {"type": "object", "properties": {"input": schema}, "required": ["input"]}
    return [{"type": "function", "function": {"name": "edit", "parameters": parameters}}]


def _call(value: str) -> dict[str, Any]:
    arguments = json.dumps({"input": value})
    call = {"id": "c1", "type": "function", "function": {"name": "edit", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _closer(template: ChatTemplate) -> str:
    """The text that ends the value as the template writes it (found by rendering)."""
    text = model_output(template, _call("VALUE"), _tool({"type": "string"}), ENDS)
    after = text[text.index("VALUE") + len("VALUE") :].lstrip("\n")
    return after[: after.index(">") + 1]


APPLY_PATCH = next(
    t
    for t in json.loads((TESTS_DIR / "data/agent_shapes/codex_responses.json").read_text())["tools"]
    if t.get("name") == "apply_patch"
)
PATCH_PATTERN = f"^(?:{lark_to_regex(APPLY_PATCH['format']['definition'])})$"
PATCH = (
    "*** Begin Patch\n*** Add File: hi.txt\n+hi\n"
    "*** Update File: a.py\n@@ def f():\n-x\n+y\n*** End Patch\n"
)


@pytest.mark.parametrize("path", TEMPLATES)
def test_apply_patch_is_enforced_over_raw_text(path: Path) -> None:
    """Codex's apply_patch grammar, as the raw value of a tagged call: valid patches in,
    invalid ones out, the patch read back as written."""
    template = ChatTemplate.from_file(path)
    tools = _tool({"type": "string", "pattern": PATCH_PATTERN})
    params = template.apply(USER, tools=tools, tool_choice="required")
    assert_portable(params.grammar)
    free = _tool({"type": "string"})
    closer = _closer(template)
    near = PATCH.replace("+hi\n", f"+hi {closer[:-1]}\n")  # the closer but its last char
    for patch in (PATCH, near):
        assert re.search(PATCH_PATTERN, patch)
        text = model_output(template, _call(patch), free, ENDS)
        assert accepts(params.grammar, text), patch
        [call] = params.parse(text).tool_calls
        assert json.loads(call.arguments) == {"input": patch}
    holding = PATCH.replace("+hi\n", f"+hi {closer}\n")
    bad = ("*** Begin Patch\n*** End Patch\n", PATCH.replace("+hi", "hi"), PATCH + "x", holding)
    for patch in bad:
        assert not accepts(params.grammar, model_output(template, _call(patch), free, ENDS)), patch
    assert re.search(PATCH_PATTERN, holding)  # refused for its closer alone


PATTERNS = ["ab", "^ab", "ab$", "^a(b|cd)*$", "^[^x]+$", "^\\d{2,3}$", "^.?$", ""]
VALUES = ["ab", "xaby", "aby", "xab", "a", "abcdb", "acdcd", "12", "1234", "x", "", "é", "a\nb"]


@pytest.mark.parametrize("path", TEMPLATES[:2])
def test_pattern_is_a_search_as_in_json_schema(path: Path) -> None:
    """Each pattern takes exactly the values ``re.search`` finds it in (unanchored ends
    allow any text there, anchored ones none)."""
    template = ChatTemplate.from_file(path)
    free = _tool({"type": "string"})
    for pattern in PATTERNS:
        tools = _tool({"type": "string", "pattern": pattern})
        gbnf = template.apply(USER, tools=tools, tool_choice="required").grammar
        for value in VALUES:
            text = model_output(template, _call(value), free, ENDS)
            wanted = re.search(pattern, value) is not None
            assert accepts(gbnf, text) == wanted, (pattern, value)


def _gbnf(pattern: str, ends: list[str], padding: tuple[str, str] = ("", "")) -> str:
    parser = pattern_text(pattern, ends, padding, "test")
    assert parser is not None
    return str(grammar(parser))


def test_an_end_that_overlaps_itself_is_never_found_early() -> None:
    """With ``aa`` ending the value, a value ending in ``a`` would be cut short: left out,
    as is any value holding the end; the others stay."""
    gbnf = _gbnf("^[ab]*$", ["aa"])
    for value in ["", "a", "b", "ab", "ba", "bab", "aab", "abba", "abab"]:
        readable = (value + "aa").find("aa") == len(value)
        assert accepts(gbnf, value) == readable, value


def test_several_ends_are_all_left_out() -> None:
    gbnf = _gbnf("^[a-z<>/]*$", ["</x>", "<y>"])
    for value in ["ab", "a</x", "a<y", "a</x>b", "<y>", "</y>", "x>"]:
        assert accepts(gbnf, value) == ("</x>" not in value and "<y>" not in value), value


def test_padding_stays_outside_the_pattern() -> None:
    gbnf = _gbnf("^a+$", ["</p>"], ("\n", "\n"))
    assert accepts(gbnf, "\naa\n")
    assert not accepts(gbnf, "aa")
    assert not accepts(gbnf, "\n\naa\n")


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("^(a)\\1$", "backreference"), ("^(?=a)a$", "lookaround"), ("^.*</p>.*$", "leaves out")],
)
def test_a_pattern_that_cannot_be_enforced_is_logged_and_left_free(
    pattern: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="autoparser.generate.raw_pattern"):
        assert pattern_text(pattern, ["</p>"], ("", ""), "tools[0]") is None
    assert "tools[0]: the pattern is not enforced" in caplog.text
    assert why in caplog.text


def test_the_value_stays_free_where_the_pattern_leaves_nothing_readable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pattern whose every text holds the closer: the grammar cannot write one readable
    value, so the value stays free text (logged) rather than the call unwritable."""
    template = ChatTemplate.from_file(own_path("formats/glm_like.jinja"))
    closer = _closer(template)
    tools = _tool({"type": "string", "pattern": f"^x{re.escape(closer)}$"})
    with caplog.at_level(logging.WARNING, logger="autoparser.generate.raw_pattern"):
        gbnf = template.apply(USER, tools=tools, tool_choice="required").grammar
    assert "leaves out" in caplog.text
    free = _tool({"type": "string"})
    assert accepts(gbnf, model_output(template, _call("any text"), free, ENDS))


def test_a_pattern_no_grammar_can_express_is_refused_naming_it() -> None:
    """As for JSON arguments: the request names the tool's schema and the construct."""
    template = ChatTemplate.from_file(own_path("formats/glm_like.jinja"))
    with pytest.raises(RequestError, match=r"tools\[0\].*backreference"):
        template.apply(USER, tools=_tool({"type": "string", "pattern": "^(a)\\1$"}))
