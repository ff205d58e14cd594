"""Property tests: malformed model output built from a format's own fragments keeps every character.

For every template (the project's own in tests/templates, and the corpus when present),
Hypothesis joins fragments of the template's format -- the markers the analysis found
(reasoning, content, section, per-call, name, argument and id markers, end of turn,
preserved tokens), tool names, pieces of JSON arguments and random text -- in any order,
cuts the result at any point, and checks:

* ``parse`` never raises;
* streaming the text in random splits accumulates to exactly what ``parse`` returns;
* no text is lost. Precisely: the message ends at the first end-of-turn marker (the engine
  stops there; what follows is not the model's message). In the text before it, remove
  every recognised marker (each marker -- the analysis' and the parser's call openers --,
  its whitespace-trimmed form, and a proper prefix of one at the very end, where the model
  stopped on it), a call's position written as its id (``:0``), and the quoted JSON field names of
  the call objects (``"name"``, ``"arguments"``, ...); the multiset of the remaining
  characters -- without whitespace and without the structural punctuation of call syntax
  (``{}[]():,="'``), which a parser consumes when it turns text into a call -- must be
  contained in the multiset of the characters of the output fields: content, reasoning,
  each call's id and name, its arguments as JSON text, and the arguments decoded (strings
  and keys as text, and their Python ``repr``, since Python-literal formats write
  ``True``/``None``), plus, per returned call, the format's own call syntax: what a
  well-formed render of the template holds beyond its message (attributes such as
  ``type="number"``, call indices, escapes of string-encoded arguments).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import string
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from helpers.generate_cases import TOOLS, accumulate, message_dict
from helpers.paths import corpus_templates, own_templates
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatParams, ChatTemplate, TemplateAnalysis
from autoparser.analysis.model import TOOL_MARKER_FIELDS, ArgumentsAnalysis
from autoparser.errors import AutoparserError
from autoparser.params import build_params

# Deterministic and modest: the same examples on every run, in CI too.
PROPS = settings(
    max_examples=10,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SYNTAX = set("{}[]():,=\"'")
ALPHABET = st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Zs"), include_characters='<>/{}"\\:=|\n'
)
ARGUMENT_PIECES = [
    '{"city": "Paris"}',
    '{"city": "Paris", "unit": "celsius"}',
    '{"query": "a \\"b\\" c", "limit": 3}',
    '"city"',
    "city",
    "Paris",
    '"arguments": ',
    '"name": "get_weather"',
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    "=",
    "\n",
    " ",
]
TOOL_NAMES = [t["function"]["name"] for t in TOOLS]
CALLS = [
    {
        "id": "call_a1b2c3d4e",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
    },
    {
        "id": "call_f5g6h7i8j",
        "type": "function",
        "function": {"name": "search", "arguments": {"query": "rain", "tags": ["a", "b"]}},
    },
]

# Malformed or cut calls once lost their text (repaired into a call, or returned with `{}`
# arguments): each now keeps its text in content. Regression cases, one per shape found.
_REPAIRED = "malformed call arguments"
_CUT = "a call cut off by the end of output"
LOSS_CASES: list[tuple[str, str, str]] = [
    (
        "functionary_v3_2_like",
        'all\nSure.>>>get_weather\n{"city": "Paris", "days": all3}>>>search\n{"query": "rain"}',
        _REPAIRED,
    ),
    ("llama_like", '{"name": "get_weather", "parameter', _CUT),
    ("string_args", "get_weatherget_weather", _CUT),
    (
        "alnum_ids",
        '[CALLS]{"name": "get_weather", "arguments": {get_weather"city": "Paris"}, "id": "yxtG"}',
        _REPAIRED,
    ),
    ("Mistral-Small-3.2-24B-Instruct-2506", "[TOOL_CALLS]get_weatherget_weather", _CUT),
    (
        "mistralai-Mistral-Small-3.1-24B-Instruct-2503",
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4',
        _CUT,
    ),
    (
        "vllm-tool_chat_template_deepseekr1",
        "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```jsonget_weather\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        _REPAIRED,
    ),
    (
        "Qwen-QwQ-32B",
        'Sure.\n<tool_call>\n{"name": "get_weather", "argum',
        _CUT,
    ),
    ("vllm-tool_chat_template_toolace", "[get_weather(city=Parisr, days=3r)]", _REPAIRED),
]


def _template_paths() -> list[Any]:
    paths = own_templates() + corpus_templates()
    return [pytest.param(p, id=p.stem) for p in paths]


def _paths_by_stem() -> dict[str, Path]:
    return {p.stem: p for p in [*own_templates(), *corpus_templates()]}


def _item_markup(a: ArgumentsAnalysis) -> list[str]:
    """The opening and closing markup of an array item element, if the format has one."""
    item = a.value_item_name
    if not item:
        return []
    close = a.value_suffix + item + a.value_suffix_after_name if a.value_suffix_after_name else ""
    return [a.name_prefix + item + a.name_suffix + a.value_prefix, close]


def _markers(a: TemplateAnalysis, params: ChatParams) -> list[str]:
    """Every marker string the analysis and the parser recognise, as written and trimmed:
    with the parser definition's call openers (e.g. harmony's ``<|channel|>commentary``,
    whose header the parser consumes) and an argument's name suffix for each value type
    (``" type="array"<|sep|>``)."""
    t = a.tools
    found = [
        a.reasoning.start,
        a.reasoning.end,
        a.content.start,
        a.content.end,
        *(
            getattr(getattr(t, part), name)
            for part, names in TOOL_MARKER_FIELDS.items()
            for name in names
        ),
        t.call_separator,
        *a.end_of_turn,
        *a.preserved_tokens,
        *params.definition.call_openers,
        *(suffix for _, suffix in t.arguments.name_suffix_by_type),
        # An array written as nested elements names each item (MiniMax-M3's ``<item>``):
        # markup per item, which the per-call syntax budget cannot count.
        *_item_markup(t.arguments),
    ]
    markers = {m for m in found if m.strip()} | {m.strip() for m in found if m.strip()}
    return sorted(markers, key=len, reverse=True)


def _field_names(a: TemplateAnalysis) -> list[str]:
    """JSON keys of the call objects: syntax a parser consumes, quoted either way."""
    f = a.tools.format
    names = {f.function_field, f.name_field, f.args_field, f.id_field, f.gen_id_field}
    names |= {key for key, _ in f.constant_fields} | {value for _, value in f.constant_fields}
    names |= {"name", "arguments", "parameters", "type", "function"}
    return [f"{q}{n}{q}" for n in names if n for q in ('"', "'")]


@cache
def _rendered_calls(tpl: ChatTemplate, prompt: str, ends: tuple[str, ...]) -> tuple[str, ...]:
    """Well-formed outputs of the format: assistant turns with calls, as the template writes
    them (the render minus the prompt, cut before the end of turn)."""
    user = [{"role": "user", "content": "Hi"}]
    outputs = []
    for calls in (CALLS[:1], CALLS):
        message = {"role": "assistant", "content": "Sure.", "tool_calls": calls}
        try:
            full = tpl.render([*user, message], tools=TOOLS, add_generation_prompt=False)
        except AutoparserError:
            continue
        # Templates that rewrite the prompt (e.g. drop reasoning) share only a prefix.
        text = full[len(os.path.commonprefix([full, prompt])) :]  # noqa: RUF071 (a string prefix)
        if text:
            cuts = [text.find(m) for m in ends if m in text]
            outputs.append(text[: min(cuts)] if cuts else text)
    return tuple(outputs)


@cache
def _params(path: Path) -> tuple[ChatParams, Markers] | None:
    """Params for a request with tools, or None for a template that cannot be used."""
    try:
        tpl = ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")
        analysis = tpl.analyze()
        user = [{"role": "user", "content": "Hi"}]
    except AutoparserError:
        return None
    try:
        prompt = tpl.render(user, tools=TOOLS, add_generation_prompt=True)
    except AutoparserError:  # the template cannot render tools: parse with an empty prompt
        prompt = ""
    params = build_params(analysis, prompt=prompt, tools=TOOLS, call_id_seed=3)
    ends = tuple(m.strip() for m in analysis.end_of_turn if m.strip())
    ids = analysis.tools.call_id
    known = Markers(
        tuple(_markers(analysis, params)),
        tuple(_field_names(analysis)),
        ends,
        _rendered_calls(tpl, prompt, ends),
        (ids.prefix, ids.suffix) if ids.generated else None,
    )
    for text in known.rendered:
        parsed = message_dict(params.parse(text))
        bare = dataclasses.replace(known, syntax=Counter())
        residue = _significant(_strip_recognised(text, known)) - _allowed(parsed, bare)
        per_call = Counter(
            {c: -(-n // max(1, len(parsed["tool_calls"]))) for c, n in residue.items()}
        )
        known.syntax.update(per_call - known.syntax)
    return params, known


def _outputs(known: Markers) -> st.SearchStrategy[str]:
    """Fragment soup, or a well-formed rendered output with fragments spliced in and parts
    cut out; either cut at any point."""
    fragment = st.one_of(
        st.sampled_from(known.markers) if known.markers else st.just("<"),
        st.sampled_from(TOOL_NAMES),
        st.sampled_from(ARGUMENT_PIECES),
        st.text(ALPHABET, max_size=12),
    )
    soup = st.lists(fragment, max_size=12).map("".join)
    texts = soup
    if known.rendered:
        edits = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 8), fragment), max_size=3)
        texts = st.one_of(
            st.tuples(st.sampled_from(known.rendered), edits).map(lambda p: _edited(*p)),
            soup,
        )
    cut = st.one_of(st.just(1.0), st.floats(0, 1))
    return st.tuples(texts, cut).map(lambda p: p[0][: round(len(p[0]) * p[1])])


def _edited(text: str, edits: list[tuple[float, int, str]]) -> str:
    """Text with, at each relative position, `drop` characters replaced by `insert`."""
    for where, drop, insert in edits:
        at = round(len(text) * where)
        text = text[:at] + insert + text[at + drop :]
    return text


@dataclasses.dataclass(frozen=True)
class Markers:
    """What a format recognises: markers, quoted call-object keys, end-of-turn markers."""

    markers: tuple[str, ...]
    fields: tuple[str, ...]
    end_of_turn: tuple[str, ...]
    rendered: tuple[str, ...]  # well-formed outputs with calls, as the template renders them
    # Where the template writes a call's position in place of its id (Kimi-K2 ``:0``,
    # Kimi-K3 ``index="1"``): the id's prefix and suffix. The parser consumes the position
    # (call syntax, like a marker) and generates an id.
    call_index: tuple[str, str] | None = None
    # Per call: characters a well-formed render holds beyond its message (attribute syntax
    # such as `type="number"`, call indices, escapes of string-encoded arguments).
    syntax: Counter[str] = dataclasses.field(default_factory=Counter)


def _strip_recognised(text: str, known: Markers) -> str:
    cuts = [text.find(m) for m in known.end_of_turn if m in text]
    if cuts:
        text = text[: min(cuts)]
    if known.call_index:
        prefix, suffix = known.call_index
        text = re.sub(f"{re.escape(prefix)}[0-9]+{re.escape(suffix)}", prefix + suffix, text)
    markers, fields = known.markers, known.fields
    for marker in markers:
        text = text.replace(marker, "")
    for field in fields:
        text = text.replace(field, "")
    for marker in markers:  # the model stopped on a marker
        for n in range(len(marker) - 1, 0, -1):
            if text.endswith(marker[:n]):
                text = text[:-n]
                break
    return text


def _decoded(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return ""
    parts: list[str] = [repr(value)]
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            parts.extend(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            parts.append(item)
    return "".join(parts)


def _significant(text: str) -> Counter[str]:
    return Counter(c for c in text if not c.isspace() and c not in SYNTAX)


def _fields_text(parsed: dict[str, Any]) -> str:
    # A cut call's text is neither content nor a call: the message keeps it apart.
    out = [
        parsed["content"] or "",
        parsed["reasoning_content"] or "",
        parsed.get("truncated_call") or "",
    ]
    for call in parsed["tool_calls"]:
        out += [
            call["id"] or "",
            call["name"] or "",
            call["arguments"],
            _decoded(call["arguments"]),
        ]
    return "".join(out)


def _allowed(parsed: dict[str, Any], known: Markers) -> Counter[str]:
    """The characters the output fields and the returned calls' syntax account for."""
    allowed = _significant(_fields_text(parsed))
    for _ in parsed["tool_calls"]:
        allowed.update(known.syntax)
    return allowed


def _covered(text: str, parsed: dict[str, Any], known: Markers) -> None:
    missing = _significant(_strip_recognised(text, known)) - _allowed(parsed, known)
    assert not missing, f"characters lost: {dict(missing)} of {text!r} -> {parsed!r}"


@pytest.mark.parametrize("path", _template_paths())
@PROPS
@given(data=st.data())
def test_malformed_output_keeps_every_character(path: Path, data: st.DataObject) -> None:
    built = _params(path)
    if built is None:
        pytest.skip("template cannot render a request with tools (pinned in test_analysis)")
    params, known = built
    text = data.draw(_outputs(known), label="output")
    message = params.parse(text)
    parsed = message_dict(message)

    rng = random.Random(data.draw(st.integers(0, 2**16), label="split seed"))
    stream = params.stream()
    deltas: list[dict[str, Any]] = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 9)
        deltas += stream.feed(text[i : i + n])
        i += n
    deltas += stream.finish()
    assert accumulate(deltas) == parsed, text
    assert stream.dropped_calls == ()
    # Incremental deltas: the message is parse()'s; the deltas are too, but for the calls
    # announced and then dropped.
    incremental = params.stream(tool_call_deltas="incremental")
    deltas = []
    for i in range(0, len(text), 5):
        deltas += incremental.feed(text[i : i + 5])
    deltas += incremental.finish()
    assert message_dict(incremental.message) == parsed, text
    folded = accumulate(deltas)
    kept = [c for i, c in enumerate(folded["tool_calls"]) if i not in incremental.dropped_calls]
    assert {**folded, "tool_calls": kept} == parsed, text
    _covered(text, {**parsed, "truncated_call": message.truncated_call}, known)
    # With calls returned, the per-call allowance for call syntax (``Markers.syntax``) is
    # approximate: malformed and cut calls, where text was lost, are checked on the
    # LOSS_CASES below instead.


def _loss_params() -> list[Any]:
    stems = _paths_by_stem()
    return [
        pytest.param(
            stems.get(stem),
            text,
            id=f"{stem}-{'cut' if why == _CUT else 'malformed'}",
            marks=[] if stem in stems else [pytest.mark.skip(reason="template corpus not found")],
        )
        for stem, text, why in LOSS_CASES
    ]


@pytest.mark.parametrize(("path", "text"), _loss_params())
def test_malformed_calls_keep_their_text(path: Path, text: str) -> None:
    """Each once lost text; now the call is no call and its text is content (a malformed
    call) or the message's truncated_call (a cut one), in parse() and in any stream of it."""
    built = _params(path)
    assert built is not None
    params, known = built
    message = params.parse(text)
    parsed = message_dict(message)
    # Only a well-formed call stays a call (the functionary case has one after the bad one).
    assert [c["name"] for c in parsed["tool_calls"]] == (["search"] if ">>>search" in text else [])
    _covered(text, {**parsed, "truncated_call": message.truncated_call}, known)
    for seed in range(3):
        rng = random.Random(seed)
        stream = params.stream()
        deltas: list[dict[str, Any]] = []
        i = 0
        while i < len(text):
            n = 1 if seed == 0 else rng.randint(1, 9)
            deltas += stream.feed(text[i : i + n])
            i += n
        deltas += stream.finish()
        assert accumulate(deltas) == parsed


def test_structural_punctuation_is_only_call_syntax() -> None:
    """The exempt characters are JSON/Python call syntax, never letters, digits or markers."""
    assert not SYNTAX & set(string.ascii_letters + string.digits + "<>|/")


def test_loss_check_catches_dropped_text() -> None:
    """The no-text-lost check fails on a parse that drops text, and passes when a marker
    or call syntax is all that is missing."""
    known = Markers(("<tool_call>", "</tool_call>"), ('"name"',), ("<|im_end|>",), ())
    empty = {"content": None, "reasoning_content": None, "tool_calls": []}
    with pytest.raises(AssertionError, match="characters lost"):
        _covered("hello", empty, known)
    call = {"id": "c1", "name": "f", "arguments": '{"a": 1}'}
    _covered(
        '<tool_call>{"name": "f", "a": 1}</tool_call><|im_end|>lost after the turn',
        {**empty, "tool_calls": [call]},
        known,
    )
    with pytest.raises(AssertionError, match="characters lost"):
        _covered(
            '<tool_call>{"name": "f", "a": 12}</tool_call>', {**empty, "tool_calls": [call]}, known
        )


def test_call_cut_after_its_header_keeps_its_text() -> None:
    """Found by the property test with more examples: output cut right after a call's
    header (functionary v3.2 ``>>>NAME\\n``, before its ``{``) was dropped as a call that
    stopped on its opener; the name is the model's text: a call was under way, so it is
    the message's truncated_call (truncated), not dropped."""
    path = _paths_by_stem().get("functionary_v3_2_like")
    assert path is not None
    built = _params(path)
    assert built is not None
    params, known = built
    text = "Sure.>>>search\n"
    message = params.parse(text)
    _covered(text, {**message_dict(message), "truncated_call": message.truncated_call}, known)
    assert message.truncated and message.content == "Sure."
    assert message.truncated_call == ">>>search"
    # After a complete call, the same cut keeps the call and the name as content.
    text = 'Sure.>>>get_weather\n{"city": "Paris"}>>>search\n'
    message = params.parse(text)
    _covered(text, {**message_dict(message), "truncated_call": message.truncated_call}, known)
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    # Stopped on the segment opener alone: the opener is dropped, the message truncated.
    message = params.parse("Sure.>>>")
    assert message.content == "Sure." and message.truncated
