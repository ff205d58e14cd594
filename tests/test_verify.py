"""The analysis verifies itself: the parser it builds reads back the template's own renders.

Unit tests on a small template of our own (verifies; a hand-broken analysis of it fails
with a reason and makes ``apply`` warn once), the CLI, and the corpus: every template
verifies or is a listed, reasoned, strict xfail in tests/data/verification_xfail.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from pathlib import Path

import pytest
from helpers.paths import TESTS_DIR, corpus_templates

import autoparser.chat
from autoparser import AnalysisWarning, ChatTemplate, TemplateAnalysis
from autoparser.analysis import analyze_template
from autoparser.analysis.model import AnalysisVerification, VerificationFailure
from autoparser.cli import main
from autoparser.errors import AutoparserError
from autoparser.template.probe import FUN_FIRST
from autoparser.verify import NEEDLE_CHECK, SCENARIOS, leaked_needles, verify_analysis

XFAIL_FILE = TESTS_DIR / "data" / "verification_xfail.json"

# ChatML with <think> reasoning and <tool_call>{json}</tool_call> calls.
SMALL = """{%- for m in messages -%}
<|im_start|>{{ m.role }}
{% if m.role == 'assistant' -%}
{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>
{% endif -%}
{%- if m.content %}{{ m.content }}{% endif -%}
{%- for c in m.tool_calls or [] %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>
{%- endfor -%}
{%- else -%}
{{ m.content }}
{%- endif %}<|im_end|>
{% endfor -%}
{%- if tools %}<|im_start|>tools
{{ tools | tojson }}<|im_end|>
{% endif -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}"""


def small_template(tag: str = "") -> ChatTemplate:
    """The small template; ``tag`` makes a distinct source (the caches are per source)."""
    return ChatTemplate(SMALL + (f"{{# {tag} #}}" if tag else ""), name=f"small{tag}")


def test_a_correct_analysis_verifies_every_probe_conversation() -> None:
    check = small_template().analyze().verification
    assert check is not None
    assert check.failures == ()
    assert check.verified
    assert set(check.checks) == {*SCENARIOS, NEEDLE_CHECK}
    assert check.skipped == ()


def _broken(analysis: TemplateAnalysis) -> TemplateAnalysis:
    """The small template's analysis with a wrong call opener (what a mis-analysis looks like)."""
    tools = analysis.tools
    fmt = dataclasses.replace(tools.format, per_call_start="<call>\n", section_start="")
    return dataclasses.replace(analysis, tools=dataclasses.replace(tools, format=fmt))


def test_a_broken_analysis_fails_with_a_reason_per_check() -> None:
    template = small_template()
    good = analyze_template(template.renderer)
    assert good.tools.format.per_call_start.strip() == "<tool_call>"  # what we break
    check = verify_analysis(template.renderer, _broken(good))
    assert not check.verified
    failed = {f.check: f.reason for f in check.failures}
    assert set(failed) == {"one_call", "parallel_calls", "typed_nested_args", "content_then_call"}
    assert failed["one_call"].startswith("0 tool call(s) instead of 1")
    assert "<tool_call>" in failed["one_call"]  # the reason shows what stayed in content
    assert "content" in check.checks and "content" not in failed


def test_a_probe_needle_in_a_marker_fails_the_needle_check() -> None:
    template = small_template()
    good = analyze_template(template.renderer)
    leaky = dataclasses.replace(good, preserved_tokens=(*good.preserved_tokens, f"<{FUN_FIRST}>"))
    assert leaked_needles(leaky) == [f"preserved_tokens[{len(good.preserved_tokens)}]"]
    check = verify_analysis(template.renderer, leaky)
    (failure,) = [f for f in check.failures if f.check == NEEDLE_CHECK]
    assert "preserved_tokens" in failure.reason


def test_apply_warns_once_per_template_when_the_analysis_does_not_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = small_template("broken")
    good = analyze_template(template.renderer)
    monkeypatch.setattr(autoparser.chat, "analyze_template", lambda renderer: _broken(good))
    messages = [{"role": "user", "content": "hi"}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        template.apply(messages)
        template.apply(messages)
    found = [w for w in caught if issubclass(w.category, AnalysisWarning)]
    assert len(found) == 1
    assert "did not verify" in str(found[0].message)
    assert "one_call: 0 tool call(s)" in str(found[0].message)


def test_apply_is_silent_when_the_analysis_verifies() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AnalysisWarning)
        small_template().apply([{"role": "user", "content": "hi"}])


def test_verification_survives_to_dict_and_from_dict() -> None:
    check = AnalysisVerification(
        checks=("content", NEEDLE_CHECK),
        failures=(VerificationFailure("content", "content None instead of 'x'"),),
        skipped=(("reasoning", "template drops the reasoning"),),
    )
    analysis = dataclasses.replace(TemplateAnalysis(), verification=check)
    data = json.loads(analysis.to_json())
    assert data["verification"]["failures"] == [
        {"check": "content", "reason": "content None instead of 'x'"}
    ]
    assert TemplateAnalysis.from_dict(data) == analysis
    # An unverified analysis (the analysis stage alone) serialises without the field.
    assert "verification" not in TemplateAnalysis().to_dict()
    assert TemplateAnalysis.from_dict(TemplateAnalysis().to_dict()).verification is None


def test_cli_analyze_shows_the_verification(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "small.jinja"
    path.write_text(SMALL, encoding="utf-8")
    assert main(["analyze", str(path)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("verification:"))
    assert line.startswith("verification: verified (content, reasoning, one_call")
    assert main(["analyze", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verification"]["failures"] == []
    assert NEEDLE_CHECK in data["verification"]["checks"]


def test_cli_analyze_shows_failed_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "small_broken.jinja"
    path.write_text(SMALL + "{# cli-broken #}", encoding="utf-8")
    good = analyze_template(ChatTemplate(path.read_text(encoding="utf-8")).renderer)
    monkeypatch.setattr(autoparser.chat, "analyze_template", lambda renderer: _broken(good))
    assert main(["analyze", str(path)]) == 0
    text = capsys.readouterr().out
    assert "verification: FAILED 4 of 7 checks" in text
    assert "  failed one_call: 0 tool call(s) instead of 1" in text


# ------------------------------------------------------------------------------ the corpus


def _xfails() -> dict[str, str]:
    entries = json.loads(XFAIL_FILE.read_text(encoding="utf-8"))
    assert all(e["reason"].strip() for e in entries), "every xfail needs its reason"
    return {e["template"]: e["reason"] for e in entries}


def _corpus_params() -> list[object]:
    xfails = _xfails()
    return [
        pytest.param(
            path,
            id=path.stem,
            marks=[pytest.mark.xfail(reason=xfails[path.stem], strict=True)]
            if path.stem in xfails
            else [],
        )
        for path in corpus_templates()
    ]


def _verification(path: Path) -> AnalysisVerification:
    template = ChatTemplate(
        path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>", name=path.stem
    )
    check = template.analyze().verification
    assert check is not None
    return check


@pytest.mark.parametrize("path", _corpus_params())
def test_corpus_template_verifies(path: Path) -> None:
    check = _verification(path)
    assert check.verified, check.summary()


def test_corpus_verification_count() -> None:
    paths = corpus_templates()
    if not paths:
        pytest.skip("no template corpus (../shared/templates)")
    xfails = _xfails()
    assert set(xfails) <= {p.stem for p in paths}, "xfail entries name corpus templates"
    verified = 0
    for path in paths:
        with contextlib.suppress(AutoparserError):
            verified += _verification(path).verified
    print(f"\n{verified} of {len(paths)} corpus templates verify")
    assert verified == len(paths) - len(xfails)


def test_nothing_checkable_is_no_verification() -> None:
    """A template whose every probe turn is skipped must not pass vacuously."""
    source = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}" + (
        "{% if add_generation_prompt %}assistant says: {% endif %}"
    )
    template = ChatTemplate(source, name="no-extend")
    check = template.analyze().verification
    assert check is not None
    assert not check.verified
    (failure,) = check.failures
    assert failure.check == "some_conversation_checked"
    assert "does not extend the generation prompt" in failure.reason


# Reasoning on unless the template's own `reasoning` variable is false (as Cohere2MoE): with
# only enable_thinking passed, every generation prompt would open a block no turn closes.
DEFAULT_ON = """{%- for m in messages -%}
<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif -%}
{{ m.content or '' }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if reasoning is not defined or reasoning %}<think>{% endif %}{% endif -%}"""


def test_verification_switches_reasoning_as_apply_does() -> None:
    """enable_thinking is mapped onto the template's switch variable (here ``reasoning``),
    so the content turn (reasoning off) is checked, not skipped."""
    template = ChatTemplate(DEFAULT_ON, name="default-on")
    switch = template.analyze().reasoning.switch
    assert switch is not None and switch.variable == "reasoning"
    check = template.analyze().verification
    assert check is not None and check.verified
    assert {"content", "reasoning"} <= set(check.checks)


def test_a_history_turn_spaced_otherwise_is_still_checked() -> None:
    """A template that writes the assistant header with other whitespace in a history turn
    than in the generation prompt: the turn is found after the same text all the same."""
    source = "{% for m in messages %}{{ m.role }}:  {{ m.content }}\n{% endfor %}" + (
        "{% if add_generation_prompt %}assistant:\n{% endif %}"
    )
    check = ChatTemplate(source, name="spaced").analyze().verification
    assert check is not None and check.verified
    assert "content" in check.checks
