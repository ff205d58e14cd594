"""Render parity with transformers over the template corpus.

Every corpus template renders a set of conversations through our renderer and through
transformers' own ``render_jinja_template`` (the engine behind ``apply_chat_template``).
With polyfills off the two must agree byte for byte wherever transformers renders at all.
With polyfills on (the default) every difference must be listed, with its reason, in
``tests/data/template_parity_expectations.json``, as must every case transformers fails on.
A template that renders only with conventional variables nobody passes (``functions``,
``datetime``: see ``template/conventions.py``) is compared with transformers given the
same variables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.parity import (
    CONVERSATIONS,
    WEATHER,
    _call,
    _FixedDatetime,
    chat_template_utils,
    our_clock,
    with_conventional_variables,
)
from helpers.paths import CORPUS_SKIP_REASON, TESTS_DIR, corpus_params, corpus_templates
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser import ChatTemplate
from autoparser.errors import TemplateError

EXPECTATIONS = TESTS_DIR / "data" / "template_parity_expectations.json"
BOS, EOS = "<|bos|>", "<|eos|>"


def oracle(source: str, case: dict[str, Any]) -> str:
    """transformers' rendering, with the preprocessing apply_chat_template does first."""
    messages = [{k: v for k, v in m.items() if v is not None} for m in case["messages"]]
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[messages],
        tools=case.get("tools"),
        chat_template=source,
        add_generation_prompt=case.get("add_generation_prompt", True),
        bos_token=BOS,
        eos_token=EOS,
        **case.get("kwargs", {}),
    )
    return str(rendered[0])


def ours(template: ChatTemplate, case: dict[str, Any], polyfills: bool) -> str:
    return template.render(
        case["messages"],
        case.get("tools"),
        case.get("add_generation_prompt", True),
        polyfills=polyfills,
        **case.get("kwargs", {}),
    )


def _outcome(fn: Any) -> tuple[str | None, str | None]:
    try:
        return fn(), None
    except TemplateError as exc:
        return None, str(exc)
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@pytest.mark.usefixtures("fixed_clock")
def test_render_parity(capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.loads(EXPECTATIONS.read_text(encoding="utf-8"))
    listed_differ: dict[str, str] = expected["differ"]
    listed_fails: dict[str, dict[str, str]] = expected["transformers_fails"]
    identical = differ = fails = raw_identical = conventional = 0
    problems: list[str] = []
    seen_differ: set[str] = set()
    seen_fails: set[str] = set()
    for path in corpus_templates():
        source = path.read_text(encoding="utf-8")
        loaded, load_error = _outcome(
            lambda: ChatTemplate(
                source,  # noqa: B023
                bos_token=BOS,
                eos_token=EOS,
                name=path.stem,  # noqa: B023
                clock=our_clock,
            )
        )
        for conv_name, case in CONVERSATIONS.items():
            key = f"{path.stem}/{conv_name}"
            want, want_error = _outcome(lambda: oracle(source, case))  # noqa: B023
            if loaded is None:  # does not compile: no render of ours either
                raw = got = None
                raw_error = got_error = load_error
            else:
                raw, raw_error = _outcome(lambda: ours(loaded, case, False))  # noqa: B023
                got, got_error = _outcome(lambda: ours(loaded, case, True))  # noqa: B023
                if want_error is not None and loaded.renderer.conventional_variables:
                    passed = with_conventional_variables(loaded, case)
                    want, want_error = _outcome(lambda: oracle(source, passed))  # noqa: B023
                    conventional += want_error is None
            if want_error is not None:
                fails += 1
                seen_fails.add(key)
                entry = listed_fails.get(key)
                if entry is None:
                    problems.append(f"{key}: transformers fails, not listed: {want_error}")
                    continue
                for label, result, error in (("raw", raw, raw_error), ("ours", got, got_error)):
                    outcome = "renders" if result is not None else "fails"
                    if entry[label] != outcome:
                        problems.append(
                            f"{key}: {label} {outcome}, expected {entry[label]} {error}"
                        )
                continue
            if raw != want:
                problems.append(f"{key}: polyfills=False differs from transformers ({raw_error})")
            else:
                raw_identical += 1
            if got == want:
                identical += 1
                continue
            differ += 1
            seen_differ.add(key)
            if key not in listed_differ:
                problems.append(f"{key}: differs from transformers, not listed ({got_error})")
    problems += [
        f"{k}: listed as differing but identical now" for k in listed_differ.keys() - seen_differ
    ]
    problems += [
        f"{k}: listed as transformers-fail but it renders" for k in listed_fails.keys() - seen_fails
    ]
    # Every listed difference is a deliberate polyfill (with polyfills off the render is
    # identical, checked above): counted by polyfill, apart from the identical renders.
    by_polyfill: dict[str, int] = {}
    for key in seen_differ:
        reason = listed_differ.get(key, "")
        if not reason.startswith("polyfill"):
            problems.append(f"{key}: a difference that is no polyfill: {reason!r}")
        label = reason.removeprefix("polyfill").lstrip(" :")[:110]
        by_polyfill[label] = by_polyfill.get(label, 0) + 1
    renders = identical + differ
    with capsys.disabled():
        print(
            f"\nrender parity where transformers renders ({renders} conversations): "
            f"polyfills off {raw_identical} identical ({100.0 * raw_identical / renders:.1f}%); "
            f"polyfills on {identical} identical ({100.0 * identical / renders:.1f}%) + "
            f"{differ} deliberate polyfill differences ({100.0 * differ / renders:.1f}%); "
            f"{fails} conversations transformers fails on; {conventional} rendered by both "
            "with the conventional variables passed"
        )
        for label, count in sorted(by_polyfill.items()):
            print(f"  {count:3d}  {label}")
    assert not problems, "\n".join(problems)


def _with_string_arguments(case: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(case))
    for message in copied["messages"]:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    return copied


@pytest.mark.parametrize("path", corpus_params())
@pytest.mark.parametrize("conv_name", ["tool_call", "parallel_calls"])
@pytest.mark.usefixtures("fixed_clock")
def test_openai_string_arguments_render_like_objects(path: Path, conv_name: str) -> None:
    """OpenAI-shaped input (arguments as a JSON string) gives the prompt objects give."""
    source = path.read_text(encoding="utf-8")
    loaded, load_error = _outcome(lambda: ChatTemplate(source, name=path.stem, clock=our_clock))
    if loaded is None:
        # A template jinja2 cannot compile renders neither shape (listed in the parity file).
        assert load_error is not None and "syntax error" in load_error
        return
    template: ChatTemplate = loaded
    case = CONVERSATIONS[conv_name]
    native, native_error = _outcome(lambda: ours(template, case, True))
    openai, openai_error = _outcome(lambda: ours(template, _with_string_arguments(case), True))
    assert openai == native, (native_error, openai_error)


_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=30
)
_JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), _TEXT)
_ARGS = st.dictionaries(st.text("abcdefgh_", min_size=1, max_size=8), _JSON_SCALAR, max_size=3)


@pytest.mark.skipif(not corpus_templates(), reason=CORPUS_SKIP_REASON)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(corpus_templates() or [Path("none")]),
    texts=st.lists(_TEXT, min_size=3, max_size=3),
    args=_ARGS,
    with_call=st.booleans(),
    add_generation_prompt=st.booleans(),
)
def test_random_conversations_match_transformers(
    path: Path, texts: list[str], args: dict[str, Any], with_call: bool, add_generation_prompt: bool
) -> None:
    """Any text and arguments render as transformers does (polyfills off) where it renders."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": texts[0]},
        {"role": "user", "content": texts[1]},
    ]
    if with_call:
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_call("abcDEF123", "get_weather", args)],
            },
            {"role": "tool", "tool_call_id": "abcDEF123", "content": texts[2]},
        ]
    case = {
        "messages": messages,
        "tools": [WEATHER],
        "add_generation_prompt": add_generation_prompt,
    }
    source = path.read_text(encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:  # both engines see the same date
        patch.setattr(chat_template_utils, "datetime", _FixedDatetime)
        want, _ = _outcome(lambda: oracle(source, case))
        if want is None:
            return  # transformers cannot render this one; covered by the expectations above
        template = ChatTemplate(
            source, bos_token=BOS, eos_token=EOS, name=path.stem, clock=our_clock
        )
        got, error = _outcome(lambda: ours(template, case, False))
    assert got == want, error
