"""The analysis checks itself: the parser it builds must read back the template's own renders.

Above ``analysis`` and ``generate`` (it needs both): for each probe conversation (content;
reasoning; one call; two parallel calls; typed and nested arguments; content then a call)
the template renders the assistant turn, the parser built from the analysis parses it, and
the message must come back as rendered (content and reasoning whitespace-normalised, calls
by name and arguments as JSON values). One more check: no probe placeholder appears in a
marker, a trigger or a preserved token. A conversation the template cannot express (it
refuses it, or drops the part under test) is skipped with the reason; when every one is
skipped, that is a failure (``some_conversation_checked``): nothing was verified.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autoparser.analysis.model import (
    AnalysisVerification,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    VerificationFailure,
)
from autoparser.cache import CACHES, Store
from autoparser.errors import AutoparserError, Cancelled, TemplateLimitError
from autoparser.formats import format_of
from autoparser.generate import Request, normalize_request
from autoparser.message import ChatMessage
from autoparser.params import ChatParams, params_for_request
from autoparser.template import Renderer, detect_caps, detect_quirks, render_as_apply
from autoparser.template.probe import (
    ARG_FIRST,
    ARG_SECOND,
    ASSISTANT_MSG,
    CALL_ID,
    CALL_ID_SECOND,
    FUN_FIRST,
    FUN_SECOND,
    THINKING,
    USER_MSG,
    VALUE_FIRST,
    VALUE_NUMBER,
    VALUE_SECOND,
    needle_in,
)
from autoparser.template.switches import ThinkingSwitch

NEEDLE_CHECK = "no_needle_in_markers"
ANY_CHECK = "some_conversation_checked"
SCENARIOS = (
    "content",
    "reasoning",
    "one_call",
    "parallel_calls",
    "typed_nested_args",
    "content_then_call",
)
_REASONING_SCENARIOS = frozenset({"reasoning"})
_CALL_SCENARIOS = frozenset(SCENARIOS[2:])

_STRINGS = {
    "type": "object",
    "properties": {ARG_FIRST: {"type": "string"}, ARG_SECOND: {"type": "string"}},
    "required": [],
}
_TYPED = {
    "type": "object",
    "properties": {ARG_FIRST: {"type": "integer"}, ARG_SECOND: {"type": "object"}},
    "required": [],
}
TOOLS: tuple[dict[str, object], ...] = (
    {
        "type": "function",
        "function": {
            "name": FUN_FIRST,
            "description": "First test function",
            "parameters": _STRINGS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": FUN_SECOND,
            "description": "Second test function",
            "parameters": _TYPED,
        },
    },
)
_NESTED = {VALUE_FIRST: [True, None, 1.5, VALUE_SECOND], "inner": {"key": VALUE_SECOND}}


def _call(call_id: str, name: str, arguments: Mapping[str, object]) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def scenario_message(scenario: str) -> dict[str, object]:
    """The assistant message of one probe conversation (OpenAI shape)."""
    strings = {ARG_FIRST: VALUE_FIRST, ARG_SECOND: VALUE_SECOND}
    if scenario == "content":
        return {"role": "assistant", "content": ASSISTANT_MSG}
    if scenario == "reasoning":
        return {"role": "assistant", "content": ASSISTANT_MSG, "reasoning_content": THINKING}
    content: str | None = None
    if scenario == "one_call":
        calls = [_call(CALL_ID, FUN_FIRST, strings)]
    elif scenario == "parallel_calls":
        swapped = {ARG_FIRST: VALUE_SECOND, ARG_SECOND: VALUE_FIRST}
        calls = [_call(CALL_ID, FUN_FIRST, strings), _call(CALL_ID_SECOND, FUN_FIRST, swapped)]
    elif scenario == "typed_nested_args":
        calls = [_call(CALL_ID, FUN_SECOND, {ARG_FIRST: VALUE_NUMBER, ARG_SECOND: _NESTED})]
    elif scenario == "content_then_call":
        content = ASSISTANT_MSG
        calls = [_call(CALL_ID, FUN_FIRST, strings)]
    else:  # pragma: no cover - the tuple above is closed
        raise ValueError(scenario)
    return {"role": "assistant", "content": content, "tool_calls": calls}


# ------------------------------------------------------------------------ the needle check


def _marker_strings(value: object, path: str) -> list[tuple[str, str]]:
    """Every (field path, string) in an analysis, markers and preserved tokens alike."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found: list[tuple[str, str]] = []
        for f in dataclasses.fields(value):
            if f.name in ("verification", "workarounds", "handler"):
                continue
            found += _marker_strings(getattr(value, f.name), f"{path}.{f.name}".lstrip("."))
        return found
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, tuple):
        return [s for i, v in enumerate(value) for s in _marker_strings(v, f"{path}[{i}]")]
    return []


def leaked_needles(analysis: TemplateAnalysis, triggers: Sequence[str] = ()) -> list[str]:
    """The fields (and triggers) of an analysis that hold a probe placeholder."""
    leaks = [path for path, text in _marker_strings(analysis, "") if needle_in(text)]
    return leaks + [f"trigger {t!r}" for t in triggers if needle_in(t)]


# ------------------------------------------------------------------- rendering and cutting


class _Renders:
    """Renders conversations as ``ChatTemplate.apply`` does (polyfills on, the request's
    ``enable_thinking`` mapped onto the template's switch)."""

    def __init__(self, renderer: Renderer, switch: ThinkingSwitch | None = None) -> None:
        self.renderer = renderer
        self.switch = switch
        self.caps = detect_caps(renderer)
        self.quirks = detect_quirks(renderer)
        self._params: dict[tuple[str, bool, bool | None], ChatParams] = {}
        self._request: Request | None = None
        # Renders by conversation: most scenarios share their generation prompt.
        self._renders: dict[str, str | AutoparserError] = {}

    def render(
        self,
        messages: list[dict[str, object]],
        tools: Sequence[Mapping[str, object]] | None,
        gen: bool,
        kwargs: Mapping[str, object],
    ) -> str:
        """The render, or the template's refusal raised (both remembered)."""
        key = json.dumps([messages, tools, gen, kwargs], sort_keys=True)
        found = self._renders.get(key)
        if found is None:
            try:
                found = self._render(messages, tools, gen, kwargs)
            except TemplateLimitError:
                raise
            except AutoparserError as exc:
                found = exc
            self._renders[key] = found
        if isinstance(found, AutoparserError):
            raise found.with_traceback(None)
        return found

    def _render(
        self,
        messages: list[dict[str, object]],
        tools: Sequence[Mapping[str, object]] | None,
        gen: bool,
        kwargs: Mapping[str, object],
    ) -> str:
        variables = dict(kwargs)
        if self.switch is not None and "enable_thinking" in kwargs:
            # As apply maps enable_thinking: the switch's variable, or its directive in the
            # system message (/think, /no_think).
            enabled = bool(kwargs["enable_thinking"])
            messages = [dict(m) for m in self.switch.switch(messages, variables, enabled)]
        # As apply renders (the same rule, the sparse-tools retry included).
        return render_as_apply(
            self.renderer, self.caps, self.quirks, messages, tools, gen, now=None, **variables
        )

    def request(self, analysis: TemplateAnalysis) -> Request:
        """The verification request, validated once (schema checks cost); varied by replace."""
        if self._request is None:
            self._request = normalize_request(
                tools=list(TOOLS) if self.caps.supports_tool_calls else None,
                tool_choice="auto",
                parallel_tool_calls=None,
                response_format=None,
                enable_thinking=None,
                reasoning_format="auto",
                template_supports_parallel=analysis.tools.parallel_calls,
            )
        return self._request

    def params(
        self, analysis: TemplateAnalysis, prompt: str, scenario: str, thinking: bool | None
    ) -> ChatParams:
        """The request's parameters, built once per prompt and request (grammars cost)."""
        parallel = scenario == "parallel_calls"
        key = (prompt, parallel, thinking)
        found = self._params.get(key)
        if found is None:
            request = self.request(analysis)
            if parallel:
                request = dataclasses.replace(request, parallel_tool_calls=True)
            request = dataclasses.replace(request, enable_thinking=thinking)
            found = self._params[key] = params_for_request(
                analysis, request, prompt=prompt, call_id_seed=0, with_grammar=False
            )
        return found


def _strip_trailing(text: str, markers: Sequence[str]) -> tuple[str, list[str]]:
    """Remove the markers (whitespace between them allowed) that end ``text``."""
    removed: list[str] = []
    while True:
        stripped = text.rstrip()
        marker = next((m for m in markers if m and stripped.endswith(m)), None)
        if marker is None:
            return text, removed[::-1]
        removed.append(marker)
        text = stripped[: -len(marker)]


def end_of_same_text(prompt: str, full: str) -> int | None:
    """Where ``full`` has shown all of ``prompt`` when the two differ only in whitespace (a
    template that writes its headers with other spacing in a history turn than in the
    generation prompt); None when they differ in anything else."""
    text = re.sub(r"\s+", "", prompt)
    if not text or not re.sub(r"\s+", "", full).startswith(text):
        return None
    found = re.match(rf"\s*(?:\S\s*){{{len(text) - 1}}}\S", full)
    return found.end() if found else None


def cut_turn(prompt: str, full: str, analysis: TemplateAnalysis, eos: str) -> str | None:
    """The assistant turn: what the full render adds after the generation prompt, without
    its end-of-turn markers. None when the render does not extend the prompt.

    A prompt may end with reasoning markers (``<think>\\n``) that the history render writes
    again or not at all: those are cut from the prompt and, when repeated, from the turn. A
    prompt the history render writes with other whitespace is found in it all the same.
    """
    r = analysis.reasoning
    markers = [r.start.strip(), r.end.strip()]
    if r.mode == ReasoningMode.DELIMITER:
        # The generation prompt may end with a preamble the model continues with reasoning
        # (Apriel: "Here are my reasoning steps:"), which the history render drops.
        markers.append(analysis.generation_prompt.strip().rsplit("\n", 1)[-1])
    if full.startswith(prompt):
        turn = full[len(prompt) :]
    else:
        shorter, removed = _strip_trailing(prompt, [m for m in markers if m])
        if not removed or not full.startswith(shorter.rstrip()):
            at = end_of_same_text(prompt, full)
            if at is None:
                return None
            removed, shorter = [], full[:at]
        turn = full[len(shorter.rstrip()) :]
        # The turn may repeat the last k markers the prompt ended with: cut that repeat.
        for k in range(len(removed), 0, -1):
            rest = turn
            for marker in removed[-k:]:
                rest = rest.lstrip()
                if not rest.startswith(marker):
                    break
                rest = rest[len(marker) :]
            else:
                turn = rest
                break
    ends = [m.strip() for m in (*analysis.end_of_turn, eos) if m.strip()]
    opener = analysis.generation_prompt.strip()
    while True:
        body = turn.rstrip()
        cut = -1
        for marker in ends:
            at = body.rfind(marker)
            tail = body[at + len(marker) :].strip() if at >= 0 else ""
            # After the last marker: nothing, or (templates that always add one) the opener
            # of the next assistant turn.
            if at > cut and (
                not tail or (opener and (opener.startswith(tail) or opener.endswith(tail)))
            ):
                cut = at
        if cut < 0:
            return turn.rstrip() if turn is not None else None
        turn = body[:cut]


def _second_turn(turn: str, analysis: TemplateAnalysis, eos: str) -> bool:
    """Does an end-of-turn marker inside the turn open another assistant turn?"""
    opener = analysis.generation_prompt.strip()[:8]
    if not opener:
        return False
    for marker in {m.strip() for m in (*analysis.end_of_turn, eos) if m.strip()}:
        at = turn.find(marker)
        while at >= 0:
            if turn[at + len(marker) :].lstrip().startswith(opener):
                return True
            at = turn.find(marker, at + 1)
    return False


def content_as_reasoning(turn: str, content: str, reasoning_start: str) -> bool:
    """Whether the turn writes ``content`` right after the reasoning opener (gpt-oss puts
    a call turn's content in its analysis channel): then the model, trained on such turns,
    writes that text as reasoning, and the message is not what the turn shows."""
    start = reasoning_start.strip()
    return (
        bool(start) and re.search(re.escape(start) + r"\s*" + re.escape(content), turn) is not None
    )


def _missing(message: Mapping[str, object], turn: str, reasoning_start: str = "") -> str:
    """Why the rendered turn cannot show the message (a part dropped), or ""."""
    if message.get("reasoning_content") and THINKING not in turn:
        return "template drops the reasoning of the last assistant turn"
    if message.get("content") and ASSISTANT_MSG not in turn:
        return "template drops the assistant content" + (
            " of a turn with tool calls" if message.get("tool_calls") else ""
        )
    if message.get("tool_calls") and content_as_reasoning(turn, ASSISTANT_MSG, reasoning_start):
        return "template writes the content of a turn with tool calls as reasoning"
    calls = _tool_calls(message)
    for call in calls:
        if call["function"]["name"] not in turn:
            return "template does not render the assistant's tool calls"
    if message.get("tool_calls") and VALUE_FIRST not in turn and str(VALUE_NUMBER) not in turn:
        return "template drops the arguments of the assistant's tool calls"
    # Text glued to a value, other than the next argument (a template that writes no
    # separator between arguments glues the next name: a different, parseable flaw).
    names = f"{re.escape(ARG_FIRST)}|{re.escape(ARG_SECOND)}"
    glued = f"(?:{re.escape(VALUE_FIRST)}|{VALUE_NUMBER})(?!{names})[A-Za-z0-9]"
    if message.get("tool_calls") and re.search(glued, turn):
        return "template alters the argument values (text glued to each value)"
    if len(calls) > 1 and turn.count(VALUE_FIRST) < 2:
        return "template renders only one tool call per turn"
    return ""


# ----------------------------------------------------------------------------- comparing


def _tool_calls(message: Mapping[str, object]) -> list[Any]:
    """The message's ``tool_calls`` (its entries are this module's own, see ``_call``)."""
    calls = message.get("tool_calls", [])
    return calls if isinstance(calls, list) else []


def _text(message: Mapping[str, object], key: str) -> str | None:
    value = message.get(key)
    return value if isinstance(value, str) else None


def _norm(text: str | None) -> str | None:
    return " ".join(text.split()) or None if text is not None else None


def _args(arguments: str | Mapping[str, object]) -> str:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return f"<invalid JSON {arguments!r}>"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def difference(expected: Mapping[str, object], parsed: ChatMessage) -> str:
    """How the parsed message differs from the rendered one ("" = the same)."""
    want = [
        (c["function"]["name"], _args(c["function"]["arguments"])) for c in _tool_calls(expected)
    ]
    got = [(c.name, _args(c.arguments)) for c in parsed.tool_calls]
    if len(got) != len(want):
        return (
            f"{len(got)} tool call(s) instead of {len(want)} "
            f"(content {_short(parsed.content)}, reasoning {_short(parsed.reasoning_content)})"
        )
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        if g[0] != w[0]:
            return f"call {index} named {g[0]!r} instead of {w[0]!r}"
        if g[1] != w[1]:
            return f"call {index} arguments {_short(g[1])} instead of {_short(w[1])}"
    content, reasoning = _text(expected, "content"), _text(expected, "reasoning_content")
    if _norm(parsed.content) != _norm(content):
        return f"content {_short(parsed.content)} instead of {_short(content)}"
    if _norm(parsed.reasoning_content) != _norm(reasoning):
        return f"reasoning {_short(parsed.reasoning_content)} instead of {_short(reasoning)}"
    return ""


def _short(text: str | None, limit: int = 60) -> str:
    if text is None:
        return "None"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# ------------------------------------------------------------------------------ the checks


def _thinking_variants(scenario: str) -> tuple[bool | None, ...]:
    return (True, None) if scenario in _REASONING_SCENARIOS else (None, False)


def _check_scenario(
    renders: _Renders, analysis: TemplateAnalysis, scenario: str, eos: str
) -> tuple[str, str]:
    """("", "") when the message comes back; ("fail", reason) or ("skip", reason)."""
    message = scenario_message(scenario)
    supports_tools = renders.caps.supports_tool_calls
    tool_options: list[Sequence[Mapping[str, object]] | None] = (
        [TOOLS, None] if supports_tools else [None]
    )
    reasons: list[str] = []
    for tools in tool_options:
        for thinking in _thinking_variants(scenario):
            kwargs = {} if thinking is None else {"enable_thinking": thinking}
            user: dict[str, object] = {"role": "user", "content": USER_MSG}
            try:
                prompt = renders.render([user], tools, True, kwargs)
                full = renders.render([user, dict(message)], tools, False, kwargs)
            except TemplateLimitError:
                raise
            except AutoparserError as exc:
                reasons.append(f"template refuses the conversation: {str(exc)[:80]}")
                continue
            turn = cut_turn(prompt, full, analysis, eos)
            if turn is None:
                reasons.append("the rendered turn does not extend the generation prompt")
                continue
            if _second_turn(turn, analysis, eos):
                reasons.append("the template renders part of the turn as a second assistant turn")
                continue
            missing = _missing(message, turn, analysis.reasoning.start)
            if missing:
                reasons.append(missing)
                continue
            opener, closer = analysis.reasoning.start.strip(), analysis.reasoning.end.strip()
            if opener and prompt.rstrip().endswith(opener) and closer not in turn:
                reasons.append(
                    "the generation prompt opens a reasoning block the turn never closes"
                )
                continue
            try:
                params = renders.params(analysis, prompt, scenario, thinking)
                parsed = params.parse(turn)
            except Cancelled:
                raise  # the caller stopped the work: no verdict on the analysis
            except AutoparserError as exc:
                return "fail", f"building or running the parser failed: {exc}"
            diff = difference(message, parsed)
            return ("fail", diff) if diff else ("", "")
    telling = [r for r in reasons if r.startswith("template drops") or "does not render" in r]
    return "skip", (telling or reasons or ["no render"])[0]


def verify_analysis(renderer: Renderer, analysis: TemplateAnalysis) -> AnalysisVerification:
    """Run every self-check of ``analysis`` against the template it was made from."""
    checks: list[str] = []
    failures: list[VerificationFailure] = []
    skipped: list[tuple[str, str]] = []
    renders = _Renders(renderer, analysis.reasoning.switch)
    for scenario in SCENARIOS:
        if scenario in _CALL_SCENARIOS and not renders.caps.supports_tool_calls:
            skipped.append((scenario, "template does not render tool calls"))
            continue
        outcome, reason = _check_scenario(renders, analysis, scenario, renderer.eos_token)
        if outcome == "skip":
            skipped.append((scenario, reason))
            continue
        checks.append(scenario)
        if outcome == "fail":
            failures.append(VerificationFailure(scenario, reason))
    if not checks:
        # Nothing read back is nothing verified: say so rather than pass vacuously.
        why = next((r for _, r in skipped if "tool calls" not in r), skipped[0][1])
        checks.append(ANY_CHECK)
        failures.append(VerificationFailure(ANY_CHECK, f"no probe conversation checkable: {why}"))
    checks.append(NEEDLE_CHECK)
    leaks = leaked_needles(analysis, _triggers(analysis, renders))
    if leaks:
        failures.append(
            VerificationFailure(NEEDLE_CHECK, "probe placeholder in " + ", ".join(leaks))
        )
    return AnalysisVerification(tuple(checks), tuple(failures), tuple(skipped))


# Stands for a tool's own name in a trigger (``>>>get_weather``), which is no leak.
_TOOL_NAME = "<tool name>"


def _triggers(analysis: TemplateAnalysis, renders: _Renders) -> list[str]:
    """What the grammar triggers of the verification request are made of: the format's
    declared triggers, else the trigger markers (the lazy grammar's triggers are their
    leading words), read off the parser definition (the calls checks' own, built once; the
    grammar itself would cost more than the rest of the check). The request's tool names
    are taken out: a trigger may hold them, while a name the analysis rendered into a
    marker shows in the marker itself."""
    fmt = analysis.tools.format
    if not renders.caps.supports_tool_calls or (
        fmt.mode == ToolFormat.NONE and format_of(analysis).calls_analysed
    ):
        return []
    request = renders.request(analysis)
    try:
        definition = params_for_request(analysis, request, with_grammar=False).definition
    except Cancelled:
        raise
    except AutoparserError:
        return []  # a failure to build shows in the call checks
    if definition.grammar_parser is None or not definition.grammar_lazy:
        return []  # the grammar applies from the start: no triggers
    values = [t.value for t in definition.grammar_triggers] or list(definition.trigger_markers)
    for name in sorted({tool.name for tool in request.tools}, key=len, reverse=True):
        values = [value.replace(name, _TOOL_NAME) for value in values]
    return values


_VERIFIED: Store[TemplateAnalysis] = CACHES.store("verification", 512)


def verified(renderer: Renderer, analysis: TemplateAnalysis) -> TemplateAnalysis:
    """``analysis`` with its verification filled in, cached per (source, bos, eos, date).

    The same analysis object in gives the same verified object out, so the facade's
    cached analysis stays one object.
    """
    key = (renderer.source, renderer.bos_token, renderer.eos_token, renderer.now, renderer.clock)
    return _VERIFIED.get_or_build(
        key,
        lambda: dataclasses.replace(analysis, verification=verify_analysis(renderer, analysis)),
        owner=analysis,
    )


def remember_verified(
    renderer: Renderer, analysis: TemplateAnalysis, checked: TemplateAnalysis
) -> TemplateAnalysis:
    """Store ``checked`` (``analysis`` with its verification, e.g. read back from a saved
    file) as what :func:`verified` answers for ``analysis`` of this template."""
    key = (renderer.source, renderer.bos_token, renderer.eos_token, renderer.now, renderer.clock)
    return _VERIFIED.put(key, checked, owner=analysis)
