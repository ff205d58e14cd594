"""The one tree -> message walk (``stream.mapper.walk_tree``) and the one reader of values.

``walk_tree`` holds the rules a stream (``Mapper.advance``) and a one-shot parse
(``stream.whole.whole_message``) share: these tests pin the rules on hand-built trees and
check that both paths give the same message from them. The value readers: every literal
word comes from one table (``peg.python_literal.WORD_VALUES``), and values a template
prints with Python's str() are read by the one Python-literal reader.
"""

from __future__ import annotations

import ast
import json

import pytest
from helpers.paths import REPO_ROOT

from autoparser import tags
from autoparser.message import ChatMessage
from autoparser.peg import Node
from autoparser.peg.python_literal import WORD_VALUES, literal_json, to_python
from autoparser.stream.mapper import CallIdPolicy, CallIds, Mapper, walk_tree
from autoparser.stream.repair import python_dict_json, python_value_json
from autoparser.stream.whole import whole_message

SRC = REPO_ROOT / "src" / "autoparser"


def _call(start: int, end: int, name: tuple[int, int], args: tuple[int, int]) -> Node:
    return Node(
        tags.TOOL,
        start,
        end,
        True,
        (
            Node(tags.TOOL_NAME, name[0], name[1], True),
            Node(tags.TOOL_ARGS, args[0], args[1], True),
        ),
    )


def _mapper() -> Mapper:
    return Mapper(CallIdPolicy(call_ids=CallIds(7)), {}, openers=("<call>",))


def _both(tree: Node, text: str) -> tuple[ChatMessage, ChatMessage]:
    """The message of ``tree`` as the stream's end of output and as a one-shot parse."""
    streamed = _mapper()
    streamed.advance(tree, text, final=True)
    streamed.close(tree)
    return streamed.message(), whole_message(_mapper(), tree, text)


def test_a_call_that_is_not_one_joins_the_field_around_it_with_its_markers() -> None:
    text = "<think>hm<call>f {x</call>"
    #       0      7 9    15  17 20
    tree = Node(
        None,
        0,
        len(text),
        True,
        (
            Node(tags.REASONING, 7, 9, True),
            _call(9, len(text), (15, 16), (17, 19)),
        ),
    )
    walked = walk_tree(tree, lambda node: False)
    assert walked.reasoning == [(7, 9), (9, len(text))]
    assert walked.content == [] and walked.pending is None
    streamed, whole = _both(tree, text)
    assert streamed == whole
    assert whole.reasoning_content == "hm<call>f {x</call>" and whole.tool_calls == []


def test_a_section_end_after_a_call_that_is_content_is_content() -> None:
    text = "Hi <call>f [1]</call></calls> ok"
    tree = Node(
        None,
        0,
        len(text),
        True,
        (
            Node(tags.CONTENT, 0, 3, True),
            _call(3, 21, (9, 10), (11, 14)),
            Node(tags.TOOL_SECTION_END, 21, 29, True),
            Node(tags.CONTENT, 29, len(text), True),
        ),
    )
    streamed, whole = _both(tree, text)
    assert streamed == whole
    assert whole.content == text and whole.tool_calls == []


def test_a_valid_call_is_read_once_by_both_paths() -> None:
    text = 'Hi <call>f {"a": 1}</call>'
    tree = Node(
        None,
        0,
        len(text),
        True,
        (Node(tags.CONTENT, 0, 3, True), _call(3, len(text), (9, 10), (11, 19))),
    )
    seen: list[int] = []
    walked = walk_tree(tree, lambda node: seen.append(node.start) is None)
    assert seen == [3] and walked.end == len(text)
    streamed, whole = _both(tree, text)
    assert streamed == whole
    assert [(c.name, c.arguments) for c in whole.tool_calls] == [("f", '{"a": 1}')]
    assert whole.content == "Hi"


def test_the_walk_stops_at_a_call_the_tree_ends_inside() -> None:
    text = 'Hi <call>f {"a'
    pending = Node(tags.TOOL, 3, len(text), False, (Node(tags.TOOL_NAME, 9, 10, True),))
    tree = Node(None, 0, len(text), False, (Node(tags.CONTENT, 0, 3, True), pending))
    walked = walk_tree(tree, lambda node: pytest.fail("an incomplete call is not settled"))
    assert walked.pending is pending and walked.lead == 3
    assert walked.pending_spans is walked.content
    streamed, whole = _both(tree, text)
    assert streamed == whole
    assert whole.truncated and whole.truncated_call == '<call>f {"a' and whole.content == "Hi"


def test_openers_alone_after_the_last_node_truncate_the_message() -> None:
    text = "Hi <call> "
    tree = Node(None, 0, len(text), True, (Node(tags.CONTENT, 0, 3, True),))
    streamed, whole = _both(tree, text)
    assert streamed == whole
    assert whole.truncated and whole.content == "Hi" and whole.truncated_call is None


# ----------------------------------------------------------------- the value readers


def test_each_literal_word_has_one_value() -> None:
    for word, value in WORD_VALUES.items():
        assert json.loads(json.dumps(value)) is value
        assert word in (json.dumps(value), repr(value))
    assert to_python("[true, None, False, null]") == [True, None, False, None]


def test_no_other_module_keeps_a_table_of_the_literal_words() -> None:
    """A dict display keyed by a literal word anywhere in src/ but the one table is a
    second table of them (issue 20 §3)."""
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                # keyed by a literal word with its value (not, e.g., JSON type names)
                pairs = {
                    (k.value, v.value)
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                }
                if pairs & set(WORD_VALUES.items()):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == ["peg/python_literal.py:" + str(_table_line())]


def _table_line() -> int:
    source = (SRC / "peg" / "python_literal.py").read_text(encoding="utf-8")
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith('{"True": True'):
            return number
    raise AssertionError("the table of literal words is not in peg/python_literal.py")


@pytest.mark.parametrize(
    ("printed", "expected"),
    [
        ("{'a': 1, 'b': None, 'c': [True, False]}", {"a": 1, "b": None, "c": [True, False]}),
        # str() of a string holding a quote picks double quotes, escapes are Python's.
        ("{'s': \"it's\", 't': '\\x41\\n'}", {"s": "it's", "t": "A\n"}),
        ('{"json": true, "n": null}', {"json": True, "n": None}),
        ("{'emoji': '\\U0001f600'}", {"emoji": "\U0001f600"}),
    ],
)
def test_str_printed_dicts_are_read_as_python_literals(printed: str, expected: object) -> None:
    found = python_dict_json(printed)
    assert found is not None and json.loads(found) == expected
    assert python_value_json(printed) == found == literal_json(printed)


@pytest.mark.parametrize("text", ["[1, 2]", "None", "'x'", "{1, 2}", "f(1)", "", "{'a': }"])
def test_what_is_not_a_dict_is_not_read_as_one(text: str) -> None:
    assert python_dict_json(text) is None


def test_str_printed_values() -> None:
    assert python_value_json(" True ") == "true"
    assert python_value_json("None") == "null"
    assert python_value_json("'a\\'b'") == json.dumps("a'b")
    assert python_value_json("NaN") == "NaN"  # JSON as json.loads reads it, first
    assert python_value_json("hello world") is None
    assert python_value_json("  ") is None


def test_events_become_typed_deltas_joined_per_field() -> None:
    """``take_deltas``: consecutive pieces of one field are one delta; a call's
    announcement carries the argument text that follows it; another call's pieces, or
    another field, start a new delta; the events are consumed."""
    from autoparser.stream.delta import StreamDelta, ToolCallDelta
    from autoparser.stream.mapper import _Call

    mapper = Mapper(CallIdPolicy(call_ids=CallIds(seed=1)), {})
    for index, name in enumerate(("f", "g")):
        call = _Call(index * 10, mapper.events)
        call.index, call.id, call.name = index, f"id{index}", name
        mapper.announced.append(call)
    mapper.events += [
        ("reasoning_content", -1, "Th"),
        ("reasoning_content", -1, "ink."),
        ("content", -1, "Go."),
        ("call", 0, ""),
        ("args", 0, '{"a"'),
        ("args", 0, ": 1}"),
        ("call", 1, ""),
        ("args", 0, ""),
        ("content", -1, "Done."),
    ]
    assert mapper.take_deltas() == [
        StreamDelta(reasoning_content="Think."),
        StreamDelta(content="Go."),
        StreamDelta(tool_calls=(ToolCallDelta(0, '{"a": 1}', "id0", "f"),)),
        StreamDelta(tool_calls=(ToolCallDelta(1, "", "id1", "g"),)),
        StreamDelta(tool_calls=(ToolCallDelta(0, ""),)),
        StreamDelta(content="Done."),
    ]
    assert mapper.events == [] and mapper.take_deltas() == []
    mapper.events.append(("call", 1, ""))  # one event alone: the same delta
    assert mapper.take_deltas() == [StreamDelta(tool_calls=(ToolCallDelta(1, "", "id1", "g"),))]
