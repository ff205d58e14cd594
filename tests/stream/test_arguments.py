"""One streamer per argument encoding (JSON as written, a JSON string holding the object,
a Python dict, one tag per argument): streamed fragment by fragment, the arguments are
always a prefix of the call's final arguments, and join into exactly them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.formats import TOOLS, USER, model_output, own_template, scenarios
from helpers.paths import OWN_TEMPLATES

from autoparser import tags
from autoparser.errors import TemplateError
from autoparser.peg import Node
from autoparser.stream import arguments, mapper

ENCODINGS = ("JsonArguments", "EncodedArguments", "PythonArguments", "TaggedArguments")


@pytest.fixture
def used(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The streamer classes the streams below build (the mapper's table and the tagged one)."""
    seen: set[str] = set()

    def spy(cls: type) -> type:
        class Spy(cls):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any) -> None:
                seen.add(cls.__name__)
                super().__init__(*args)

        return Spy

    table = {kind: spy(cls) for kind, cls in mapper._STREAMERS.items()}
    monkeypatch.setattr(mapper, "_STREAMERS", table)
    monkeypatch.setattr(mapper, "TaggedArguments", spy(arguments.TaggedArguments))
    yield seen


FORMATS = sorted(
    f"{folder}/{p.name}"
    for folder in ("formats", "quirks", "handlers")
    for p in (OWN_TEMPLATES / folder).glob("*.jinja")
)
# Values the template writes in double quotes without escaping them: a quote inside a value
# reads as its end until what follows settles it, and the incremental stream does not yet
# hold a quote back that long (the whole-call stream and parse() read it right).
AMBIGUOUS_QUOTES = {
    "formats/pythonic_quoted.jinja": "an unescaped quote in a value is streamed before the text "
    "after it shows it closes the value (incremental deltas only)"
}


def _outputs(name: str) -> Iterator[str]:
    template = own_template(name)
    ends = template.analyze().end_of_turn
    for scenario in ("complex_args", "one_call", "two_calls"):
        try:
            yield model_output(template, scenarios("x")[scenario], TOOLS, ends)
        except (AssertionError, TemplateError):
            continue  # a scenario this template does not render


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=AMBIGUOUS_QUOTES[n]))
        if n in AMBIGUOUS_QUOTES
        else n
        for n in FORMATS
    ],
)
def test_streamed_arguments_grow_into_the_final_ones(name: str, used: set[str]) -> None:
    params = own_template(name).apply(USER, tools=TOOLS)
    checked = 0
    for text in _outputs(name):
        final = params.parse(text)
        if not final.tool_calls:
            continue
        stream = params.stream(tool_call_deltas="incremental")
        sent: dict[int, str] = {}
        for ch in text:
            for delta in stream.feed_deltas(ch):
                for call in delta.tool_calls:
                    sent[call.index] = sent.get(call.index, "") + (call.arguments or "")
                    whole = final.tool_calls[call.index].arguments
                    assert whole.startswith(sent[call.index]), sent[call.index]
        for delta in stream.finish_deltas():
            for call in delta.tool_calls:
                sent[call.index] = sent.get(call.index, "") + (call.arguments or "")
        assert [sent[i] for i in sorted(sent)] == [c.arguments for c in final.tool_calls]
        assert all(isinstance(json.loads(c.arguments), dict) for c in final.tool_calls)
        checked += 1
    if not checked:
        pytest.skip(f"{name}: no call scenario renders")
    USED.update(used)


USED: set[str] = set()


def test_every_encoding_the_own_formats_write_was_streamed() -> None:
    """Runs after the streams above (file order). The own templates write arguments as JSON
    or one tag per argument; the other two encodings are what models write instead, below."""
    if not USED:
        pytest.skip("run with the streams above")
    assert {"JsonArguments", "TaggedArguments"} <= USED, USED


def test_arguments_written_as_a_json_string_stream_decoded(used: set[str]) -> None:
    """A model that writes the arguments as a JSON string holding the object (a common
    slip in JSON formats): streamed decoded, an escape never split, a surrogate pair whole."""
    params = own_template("formats/chatml_hermes.jinja").apply(USER, tools=TOOLS)
    inner = {"city": 'Pa"ris \\ \u00e9 \U0001f600', "unit": "celsius"}  # json.dumps: \ud83d\ude00
    encoded = json.dumps(json.dumps(inner))
    text = f'<tool_call>\n{{"name": "get_weather", "arguments": {encoded}}}\n</tool_call>'
    final = params.parse(text)
    assert [json.loads(c.arguments) for c in final.tool_calls] == [inner]
    stream = params.stream(tool_call_deltas="incremental")
    pieces: list[str] = []
    for ch in text:
        for delta in stream.feed_deltas(ch):
            pieces += [c.arguments or "" for c in delta.tool_calls]
            assert final.tool_calls[0].arguments.startswith("".join(pieces))
    for delta in stream.finish_deltas():
        pieces += [c.arguments or "" for c in delta.tool_calls]
    assert "".join(pieces) == final.tool_calls[0].arguments
    assert not any(0xD800 <= ord(c) <= 0xDFFF for piece in pieces for c in piece)
    assert "EncodedArguments" in used


def test_the_argument_text_keeps_what_was_emitted() -> None:
    pieces: list[str] = []
    out = arguments.ArgumentText(pieces.append)
    out.emit('{"a": ')
    out.emit("1}")
    assert out.text() == '{"a": 1}' and pieces == ['{"a": ', "1}"]


def _tagged_call(values: list[tuple[str, str, str]]) -> tuple[str, list[Node]]:
    """Output text and complete ``tool-arg`` nodes for (name, value tag, raw value) each
    written ``<p=NAME>VALUE</p>`` (an empty tag: no value node)."""
    text, nodes = "", []
    for name, tag, raw in values:
        start = len(text)
        text += f"<p={name}>"
        name_node = Node(tags.TOOL_ARG_NAME, start + 3, start + 3 + len(name), True)
        children = [name_node]
        if tag:
            children.append(Node(tag, len(text), len(text) + len(raw), True))
        text += raw + "</p>"
        nodes.append(Node(tags.TOOL_ARG, start, len(text), True, tuple(children)))
    return text, nodes


@pytest.mark.parametrize("tag", [*sorted(tags.VALUE_SPECS), ""])
@pytest.mark.parametrize(
    "raw", ["\nParis \n", "\n\n", "", "  x\t", '"q"\\\n', "[1, 2]", "{'a': 1}"]
)
def test_a_complete_tagged_call_reads_at_once_as_its_streamer_writes_it(tag: str, raw: str) -> None:
    text, nodes = _tagged_call([("city", tag, raw), ("unit", tags.TOOL_ARG_STRING, "c")])
    out = arguments.ArgumentText(None)
    streamer = arguments.TaggedArguments(out, {})
    streamer.advance(nodes, text)
    assert not streamer.invalid
    read = arguments.tagged_object(nodes, text, {})
    assert read.arguments == out.text() + streamer.complete()
    assert (read.names, read.undeclared) == (["city", "unit"], None)
    assert read.mistyped == streamer.mistyped


def test_a_complete_tagged_call_names_its_undeclared_arguments() -> None:
    text, nodes = _tagged_call([("a", tags.TOOL_ARG_JSON, "1"), ("b", tags.TOOL_ARG_JSON, "2")])
    name = nodes[1].children[0]
    undeclared = Node(
        name.tag,
        name.start,
        name.end,
        True,
        (Node(tags.TOOL_ARG_UNDECLARED, name.start, name.end, True),),
    )
    nodes[1] = nodes[1]._replace(children=(undeclared, nodes[1].children[1]))
    read = arguments.tagged_object(nodes, text, {})
    assert (read.arguments, read.undeclared, read.mistyped) == ('{"a": 1, "b": 2}', ["b"], None)

    # A value its converter refuses: kept as the text written, named as not of its type.
    def refuse(raw: str) -> None:
        return None

    read = arguments.tagged_object(nodes, text, {tags.TOOL_ARG_JSON: refuse})
    assert (read.arguments, read.mistyped) == ('{"a": "1", "b": "2"}', ["a", "b"])
