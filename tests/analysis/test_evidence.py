"""``marker_evidence`` (which probe renders show each marker) and ``labelled_spans`` (what
each stretch of an output was parsed as): the two library functions the studio shows."""

from __future__ import annotations

import json
import warnings

import pytest
from helpers.paths import REPO_ROOT, analysed_own_templates

from autoparser import ChatTemplate
from autoparser.analysis.evidence import marker_evidence
from autoparser.stream.spans import MARKUP, UNPARSED, labelled_spans

EXAMPLES = REPO_ROOT / "src/autoparser/examples"
# Markers no probe pair shows, and why (the evidence says found=False for them).
NOT_SHOWN = {
    ("llama_like", "tools.format.call_prefix_token"): "a token the model writes, never rendered",
    ("nested_elements", "tools.arguments.value_item_name"): "an element name of array values "
    "only; the probe calls carry no array",
}


def _example() -> ChatTemplate:
    return ChatTemplate.from_file(EXAMPLES / "chatml_tools.jinja")


def test_each_marker_is_shown_by_the_difference_of_its_pair() -> None:
    template = _example()
    evidence = {e.field: e for e in marker_evidence(template.renderer, template.analyze())}
    call = evidence["tools.format.per_call_start"]
    assert call.marker == "<tool_call>\n" and call.found
    assert call.with_ is not None and call.without is not None
    assert call.with_.count(call.marker) == call.without.count(call.marker) + 1
    start = evidence["reasoning.start"]
    assert "reasoning" in start.question and start.with_ is not None
    assert "<think>" not in (start.without or "") and "<think>" in start.with_
    assert evidence["generation_prompt"].with_.endswith("<|im_start|>assistant\n")  # type: ignore[union-attr]
    assert json.loads(json.dumps([e.to_dict() for e in evidence.values()]))  # JSON-ready


def test_own_templates_every_marker_found_in_a_render() -> None:
    missing: set[tuple[str, str]] = set()
    for path in analysed_own_templates():
        template = ChatTemplate.from_file(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analysis = template.analyze()
        for item in marker_evidence(template.renderer, analysis):
            assert item.marker.strip() or item.marker, item
            if item.found:
                assert item.with_ is not None and item.marker in item.with_
            else:
                missing.add((path.stem, item.field))
    assert missing == set(NOT_SHOWN)


OUTPUT = (EXAMPLES / "model_output.txt").read_text(encoding="utf-8")
TOOLS = json.loads((EXAMPLES / "tools.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text",
    [OUTPUT, OUTPUT[:120], "just an answer", "", "<think>\nunclosed", OUTPUT + "\ntrailing"],
)
def test_spans_cover_the_output_and_agree_with_the_message(text: str) -> None:
    params = _example().apply([{"role": "user", "content": "hi"}], tools=TOOLS)
    spans = labelled_spans(params.parser, text)
    assert [s.start for s in spans[1:]] == [s.end for s in spans[:-1]]  # consecutive
    assert (spans[0].start if spans else 0) == 0 and (spans[-1].end if spans else 0) == len(text)
    message = params.parse(text)
    reasoning = "".join(text[s.start : s.end] for s in spans if s.kind == "reasoning").strip()
    assert reasoning == (message.reasoning_content or "")
    names = [text[s.start : s.end] for s in spans if s.kind == "tool-name"]
    assert names[: len(message.tool_calls)] == [c.name for c in message.tool_calls]
    kinds = {s.kind for s in spans}
    assert kinds <= {"reasoning", "content", "tool", "tool-name", "tool-id", "tool-args"} | {
        MARKUP,
        UNPARSED,
    }
