"""The contract every format passes, generated or hand-written: one parametrised suite.

For each built-in format (``autoparser.formats.BUILTIN_FORMATS``) a fixture template of its
family under tests/templates/ is analysed into that format; then for every scenario of
``helpers.formats.scenarios`` the template's own render of the assistant turn (the model
output it was trained to write) parses back into the message, a stream of it under many
splits ends in the same message (a family that renders no reasoning drops it from the
turn, so it is not expected back), and the lazy grammar accepts it from its trigger (by
llguidance, the oracle). A new format is one file in formats/, one line of the list, and
one fixture row here.
"""

from __future__ import annotations

import zlib

import pytest
from helpers.formats import (
    USER,
    check_streaming,
    expected,
    lazy_start,
    model_output,
    normalized,
    own_template,
    scenarios,
)
from helpers.gbnf_oracle import accepts
from helpers.generate_cases import TOOLS

from autoparser.analysis.model import ReasoningMode
from autoparser.formats import BUILTIN_FORMATS, STANDARD

# format -> its fixture template (tests/templates/...)
FIXTURES = {
    STANDARD: "formats/chatml_hermes.jinja",
    "harmony": "handlers/harmony_like.jinja",
    "functionary_v3_2": "handlers/functionary_v3_2_like.jinja",
    "gemma4": "handlers/gemma4_like.jinja",
}
SCENARIOS = list(scenarios("<marker>"))
CASES = [(f, s) for f in FIXTURES for s in SCENARIOS]


def test_every_built_in_format_has_a_fixture() -> None:
    assert set(FIXTURES) == set(BUILTIN_FORMATS)


@pytest.mark.parametrize(
    ("fmt", "scenario"), CASES, ids=[f"{f or 'standard'}-{s}" for f, s in CASES]
)
def test_format_contract(fmt: str, scenario: str) -> None:
    template = own_template(FIXTURES[fmt])
    analysis = template.analyze()
    assert analysis.handler == fmt
    params = template.apply(USER, tools=TOOLS, parallel_tool_calls=True, call_id_seed=3)
    marker = params.definition.trigger_markers[0] if params.definition.trigger_markers else "<m>"
    message = scenarios(marker)[scenario]
    ends = (*analysis.end_of_turn, *params.additional_stops)
    text = model_output(template, message, TOOLS, ends)
    if analysis.reasoning.mode == ReasoningMode.NONE:
        # A family without reasoning renders none: the model writes the rest of the turn.
        message = {k: v for k, v in message.items() if k != "reasoning_content"}
    assert normalized(params.parse(text)) == expected(message), text
    check_streaming(params, text, count=8, seed=zlib.crc32(f"{fmt}{scenario}".encode()))
    if message.get("tool_calls") and params.grammar is not None:
        start = lazy_start(params, text) if params.grammar_lazy else 0
        assert accepts(params.grammar, text[start:]), text[start:]
