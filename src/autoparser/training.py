"""Assistant spans for training: which characters of a rendered conversation the model wrote.

Fine-tuning on assistant turns only needs, for every assistant message, the part of the
prompt the model generated. A template knows where that part starts and ends only through
its renders, so the spans are found by rendering prefixes of the conversation, with the
same options as the full render:

* a turn **starts** where the prompt the model was given for it ends: the render of the
  messages before it with the generation prompt (``add_generation_prompt=True``). Whatever
  that prompt holds (the role header, a reasoning opener the template forces open, DeepSeek's
  ``<｜tool▁outputs▁end｜>``) the model did not write;
* a turn **ends** where the template's render of the conversation up to and including it
  ends: reasoning as the template renders it, content, tool calls, and the closing text the
  template prints after them (``<|im_end|>\\n``, ``</assistant>\\n``, the end-of-sentence token).
  When the end-of-turn marker the analysis found is a special token the template prints at
  the start of the next message instead (GLM's ``<|user|>``/``<|observation|>``), it is
  included too: it is what the model emits to end its turn.

Templates that render earlier turns differently once later messages follow (reasoning kept
only after the last user message, or only for the last assistant turn) are aligned: the
prefix render's tail is located in the full render, so a turn dropped or rewritten in the
full conversation is reported as it was actually rendered there. A partly matched prefix is
cut back to a marker boundary (never half a ``<think>``); a template whose renders move too
much to locate a turn gets a TemplateError naming the message, never a guessed span.

The same algorithm is written in Jinja by :func:`training_template`, which wraps a template
so that transformers' ``{% generation %}`` blocks mark exactly these spans. Every step uses
only ``str.startswith``/``str.find`` with binary searches, so both versions agree and no
Python loop runs per character.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autoparser.errors import ExportError, RequestError, TemplateError

# Renders messages (with or without the generation prompt) exactly as the full render does.
RenderFn = Callable[[Sequence[Mapping[str, object]], bool], str]
Span = tuple[int, int]

# An end-of-turn marker that is a special token (``<|user|>``, ``<|end|>``, ``[/INST]``) may
# be printed by the next message; plain text (``USER:``) is then the next message's header.
_SPECIAL_TOKEN = re.compile(r"<[^<>\s]{1,64}>|\[[^\[\]\s]{1,64}\]|<\|[^\n]{1,64}?\|>")


@dataclasses.dataclass(frozen=True)
class RenderedPrompt:
    """A rendered conversation and the character spans of what the model generated in it.

    ``text`` is exactly what ``ChatTemplate.render`` returns for the same arguments;
    ``assistant_spans`` holds one ``(start, end)`` per assistant turn that rendered anything,
    in order, never overlapping (see the module docstring for what a span covers).
    """

    text: str
    assistant_spans: list[Span]

    def assistant_text(self) -> list[str]:
        """The text of each span, in order (what the model is trained to write)."""
        return [self.text[s:e] for s, e in self.assistant_spans]


# ----------------------------------------------------------------- string primitives


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search on startswith)."""
    if b.startswith(a):
        return len(a)
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if b.startswith(a[:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _longest_suffix_found(needle: str, text: str, start: int, end: int) -> int:
    """Length of the longest suffix of ``needle`` occurring in ``text[start:end]``.

    Monotone (a suffix found means every shorter one is found), hence a binary search.
    """
    lo, hi = 0, min(len(needle), max(0, end - start))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text.find(needle[len(needle) - mid :], start, end) >= 0:
            lo = mid
        else:
            hi = mid - 1
    return lo


# How much of the render before a turn must be found in the full render to locate the turn
# when the template renders history differently (less is a coincidence, not an alignment).
_MIN_TAIL = 32
_BOUNDARY = re.compile(r"[ \t\n\r\f\v>\]]|[<\[]")
_BOUNDARY_WINDOW = 64


def boundary_at_or_before(s: str, k: int) -> int:
    """The last marker boundary of ``s`` at or before ``k`` (within 64 characters): after
    whitespace, ``>`` or ``]``, or before ``<`` or ``[``; -1 when there is none.

    A common prefix can end inside a marker (the ``<`` of ``<think>`` matched against the
    ``<`` of ``<tool_call>``); cutting it back to a boundary keeps markers whole.
    """
    cut = -1
    for found in _BOUNDARY.finditer(s, max(0, k - _BOUNDARY_WINDOW), k + 1):
        position = found.start() if found.group() in "<[" else found.end()
        if position <= k:
            cut = position
    return cut


def header_match(header: str, text: str) -> int:
    """How much of the generation prompt ``header`` starts ``text``: all of it, or a part of
    it cut at a marker boundary (a forced ``<think>`` the history lacks must not leave its
    ``<`` matched against the next marker's)."""
    matched = common_prefix(header, text)
    if matched == len(header):
        return matched
    return max(0, boundary_at_or_before(header, matched))


def _special_markers(end_of_turn: Sequence[str]) -> tuple[str, ...]:
    return tuple(m for m in end_of_turn if _SPECIAL_TOKEN.fullmatch(m.strip()))


def _extend_over_marker(text: str, end: int, markers: Sequence[str]) -> int:
    """``end`` moved past an end-of-turn special token the next message prints first."""
    if not markers:
        return end
    turn_tail = text[:end].rstrip()
    if any(turn_tail.endswith(m) for m in markers):
        return end  # the turn already ends with its marker
    rest = text[end:]
    gap = len(rest) - len(rest.lstrip())
    for marker in markers:
        if rest.startswith(marker, gap):
            return end + gap + len(marker)
    return end


# ----------------------------------------------------------------------- the spans


def _render(render: RenderFn, messages: Sequence[Mapping[str, object]], agp: bool) -> str | None:
    try:
        return render(messages, agp)
    except TemplateError:
        return None


def _locate(text: str, before: str, lo: int, anchor: str = "") -> int:
    """Where ``before`` (a render of earlier messages) ends in ``text``, at or after ``lo``.

    A prefix when the template renders history alike, or all of it but a footer printed
    after the last message, or with whitespace the template adds before its end once more
    messages follow; otherwise its longest tail that ends in ``text`` at or after
    ``lo`` (the earlier turns differ, the last messages do not), trusted when it holds
    ``anchor`` (the previous message's text) or is long enough not to be a coincidence.
    -1 when it cannot be located.
    """
    if text.startswith(before):
        return max(lo, len(before))
    shared = boundary_at_or_before(before, common_prefix(before, text))
    if shared >= max(lo, 1) and text.endswith(before[shared:]):
        return shared  # what follows is a footer the template prints after the last message
    moved = text.find(before[shared:], shared) if shared >= max(lo, 1) else -1
    if moved > shared and not text[shared:moved].strip():
        return moved + len(before) - shared  # whitespace the template adds before the end
    low, high = 0, len(before)
    while low < high:  # a tail found ending at or after lo: monotone in its length
        mid = (low + high + 1) // 2
        if text.find(before[len(before) - mid :], max(0, lo - mid)) >= 0:
            low = mid
        else:
            high = mid - 1
    tail = before[len(before) - low :]
    if not ((anchor and anchor in tail) or low >= min(len(before), _MIN_TAIL)):
        return -1  # too little of it found to say where the turn starts
    return text.find(tail, max(0, lo - low)) + low


def _after_first_prompt(text: str, generation_prompt: str) -> int:
    """Where a conversation that opens with an assistant turn starts it: after the first
    occurrence of the generation prompt, or of its longest part cut at a marker boundary
    (the history may lack a forced ``<think>``); 0 when none occurs."""
    cuts = {
        m.start() if m.group() in "<[" else m.end() for m in _BOUNDARY.finditer(generation_prompt)
    }
    for cut in sorted({len(generation_prompt)} | cuts, reverse=True):
        at = text.find(generation_prompt[:cut]) if cut > 0 else -1
        if at >= 0:
            return at + cut
    return 0


def _anchor(message: Mapping[str, object]) -> str:
    """The previous message's text, when it is a plain string (the alignment's evidence)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


def assistant_spans(
    text: str,
    messages: Sequence[Mapping[str, object]],
    render: RenderFn,
    end_of_turn: Sequence[str] = (),
    generation_prompt: str = "",
) -> list[Span]:
    """The generated spans of ``text`` (the full render of ``messages``), per assistant turn.

    ``render`` renders a prefix of the conversation with the same options (tools, template
    variables, polyfills) as ``text``; ``end_of_turn`` is the analysis' end-of-turn markers
    and ``generation_prompt`` its generation prompt (where a conversation that opens with an
    assistant turn starts it, after what the template prints first).
    Raises TemplateError naming the turn when a prefix the spans need does not render.
    """
    markers = _special_markers(end_of_turn)
    spans: list[Span] = []
    lo = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        head = list(messages[:index])
        before = _render(render, head, False) if head else ""
        prompt = _render(render, head, True) if head else ""
        upto = _render(render, [*head, message], False)
        if before is None or prompt is None or upto is None:
            raise TemplateError(
                f"messages[{index}]: the template does not render the conversation up to this "
                "assistant turn, so the turn cannot be located"
            )
        header = prompt[len(before) :] if prompt.startswith(before) else ""
        anchor = _anchor(messages[index - 1]) if index else ""
        if not head:  # nothing before it: the prompt is the template's generation prompt
            start = _after_first_prompt(text, generation_prompt)
        elif text.startswith(prompt):
            start = max(lo, len(prompt))
        else:
            base = _locate(text, before, lo, anchor)
            if base < 0:
                raise TemplateError(
                    f"messages[{index}]: the template renders the messages before this "
                    "assistant turn differently once later messages follow, too differently "
                    "to locate the turn"
                )
            start = base + header_match(header, text[base:])
        shared = common_prefix(upto, text)
        if shared == len(upto):
            end = shared
        else:
            # All of the turn up to a footer or the next message, or, when the turn renders
            # differently once later messages follow, its own render in ``upto`` aligned on
            # its longest tail found in ``text`` after the start: the further of the two.
            end = max(start, boundary_at_or_before(upto, shared))
            base_upto = max(0, _locate(upto, before, 0, anchor))
            own = upto[base_upto + header_match(header, upto[base_upto:]) :]
            limit = min(len(text), start + len(own))
            found = _longest_suffix_found(own, text, start, limit)
            if found:
                end = max(end, text.find(own[len(own) - found :], start, limit) + found)
        end = _extend_over_marker(text, end, markers)
        if end > start:
            spans.append((start, end))
            lo = end
    return spans


# ------------------------------------------------------------------------ the masks


def assistant_tokens_mask(
    prompt_spans: RenderedPrompt | Sequence[Span], offsets: Sequence[Sequence[int]]
) -> list[int]:
    """0/1 per token: 1 where the token's characters overlap an assistant span.

    ``offsets`` is a fast tokenizer's offset mapping (``return_offsets_mapping=True``) of
    the prompt text; the rule is transformers' ``return_assistant_tokens_mask`` one, so a
    token straddling a span's edge counts as the assistant's.
    """
    spans = (
        prompt_spans.assistant_spans if isinstance(prompt_spans, RenderedPrompt) else prompt_spans
    )
    mask = [0] * len(offsets)
    span_index = 0
    for token, (token_start, token_end) in enumerate(offsets):
        while span_index < len(spans) and token_start >= spans[span_index][1]:
            span_index += 1
        if span_index == len(spans):
            break
        if token_end > spans[span_index][0]:
            mask[token] = 1
    return mask


def tokenize_for_training(tokenizer: Any, prompt: RenderedPrompt) -> dict[str, list[int]]:
    """``input_ids``, ``attention_mask`` and ``assistant_masks`` of a rendered prompt.

    ``tokenizer`` is a transformers fast tokenizer (one that returns offsets); the result is
    a dataset row TRL's ``SFTTrainer(assistant_only_loss=True)`` trains on as it is. The
    prompt is tokenized without added special tokens, as ``apply_chat_template`` does.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise RequestError(
            "tokenizer: assistant masks need a fast tokenizer (one with offset mappings)"
        )
    encoded = tokenizer(prompt.text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    return {
        "input_ids": ids,
        "attention_mask": list(encoded.get("attention_mask", [1] * len(ids))),
        "assistant_masks": assistant_tokens_mask(prompt, encoded["offset_mapping"]),
    }


# ------------------------------------------------------------- the training template

_GENERATION_TAG = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")
_UNWRAPPABLE = re.compile(r"\{%-?\s*(extends|block|import|from|include)\b")
_MACRO = "__autoparser_render"


def strip_generation_blocks(source: str) -> str:
    """The template without its ``{% generation %}`` tags (their bodies stay)."""
    return _GENERATION_TAG.sub("", source)


def _without_final_newline(source: str) -> str:
    """jinja2 drops one trailing newline of a template; wrapped, it would be kept."""
    for ending in ("\r\n", "\n", "\r"):
        if source.endswith(ending):
            return source[: -len(ending)]
    return source


def training_template(
    source: str, end_of_turn: Sequence[str] = (), generation_prompt: str = ""
) -> str:
    """``source`` wrapped so that ``{% generation %}`` blocks mark the assistant spans.

    The original becomes a macro rendered as it is, then again for the prefixes of the
    conversation; the Jinja below the macro runs :func:`assistant_spans`' algorithm on those
    renders and writes the full render in slices, the assistant spans inside generation
    blocks. The text is therefore the original's, byte for byte. Raises ExportError for a
    template the wrapping cannot keep (template inheritance, imports, existing generation
    blocks); callers check renders on their conversations (see ``ChatTemplate``).
    """
    if _GENERATION_TAG.search(source):
        raise ExportError(
            "the template already has {% generation %} blocks; strip them first "
            "(autoparser.training.strip_generation_blocks) to have them computed"
        )
    found = _UNWRAPPABLE.search(source)
    if found:
        raise ExportError(
            f"the template uses {{% {found.group(1)} %}}, which cannot run inside the macro "
            "the training template wraps it in"
        )
    if _MACRO in source:
        raise ExportError(f"the template already uses the name {_MACRO}")
    markers = list(_special_markers(end_of_turn))
    body = _without_final_newline(source)
    # Header line: trim_blocks eats the newline after the tag, so the original starts a fresh
    # line as it did; ``{{ '' }}`` keeps lstrip_blocks off the original's trailing spaces.
    return (
        f"{{% macro {_MACRO}(messages, add_generation_prompt) %}}\n"
        f"{body}{{{{ '' }}}}{{% endmacro %}}"
        + _SPAN_JINJA.replace("__MARKERS__", repr(markers))
        .replace("__GENERATION_PROMPT__", repr(generation_prompt))
        .replace("__R__", _MACRO)
        .replace("__MIN_TAIL__", str(_MIN_TAIL))
        .replace("__WINDOW__", str(_BOUNDARY_WINDOW))
    )


# The Jinja version of assistant_spans (kept on one logical line per statement; every
# statement strips whitespace so the wrapper prints nothing but the slices).
_SPAN_JINJA = """
{%- macro __ap_cp(a, b) -%}
{%- if b.startswith(a) -%}{{- a|length -}}
{%- else -%}
{%- set s = namespace(lo=0, hi=[a|length, b|length]|min) -%}
{%- for _ in range(64) -%}
{%- if s.lo >= s.hi -%}{%- break -%}{%- endif -%}
{%- set mid = (s.lo + s.hi + 1) // 2 -%}
{%- if b.startswith(a[:mid]) -%}{%- set s.lo = mid -%}
{%- else -%}{%- set s.hi = mid - 1 -%}{%- endif -%}
{%- endfor -%}
{{- s.lo -}}
{%- endif -%}
{%- endmacro -%}
{%- macro __ap_cut(s, k) -%}
{%- set c = namespace(cut=-1) -%}
{%- for j in range([0, k - __WINDOW__]|max, k + 1) -%}
{%- if (j > 0 and s[j - 1] in ' \t\n\r\f\v>]') or (j < s|length and s[j] in '<[') -%}
{%- set c.cut = j -%}
{%- endif -%}
{%- endfor -%}
{{- c.cut -}}
{%- endmacro -%}
{%- macro __ap_hm(header, text) -%}
{%- set matched = __ap_cp(header, text)|int -%}
{%- if matched == header|length -%}{{- matched -}}
{%- else -%}{{- [0, __ap_cut(header, matched)|int]|max -}}
{%- endif -%}
{%- endmacro -%}
{%- macro __ap_suffix(needle, text, start, end) -%}
{%- set s = namespace(lo=0, hi=[needle|length, [0, end - start]|max]|min) -%}
{%- for _ in range(64) -%}
{%- if s.lo >= s.hi -%}{%- break -%}{%- endif -%}
{%- set mid = (s.lo + s.hi + 1) // 2 -%}
{%- if text.find(needle[needle|length - mid:], start, end) >= 0 -%}{%- set s.lo = mid -%}
{%- else -%}{%- set s.hi = mid - 1 -%}{%- endif -%}
{%- endfor -%}
{{- s.lo -}}
{%- endmacro -%}
{%- macro __ap_locate(text, before, lo, anchor) -%}
{%- if text.startswith(before) -%}{{- [lo, before|length]|max -}}
{%- else -%}
{%- set shared = __ap_cut(before, __ap_cp(before, text)|int)|int -%}
{%- if shared >= [lo, 1]|max and text.endswith(before[shared:]) -%}{{- shared -}}
{%- elif shared >= [lo, 1]|max and text.find(before[shared:], shared) > shared
    and not text[shared:text.find(before[shared:], shared)].strip() -%}
{{- text.find(before[shared:], shared) + before|length - shared -}}
{%- else -%}
{%- set s = namespace(lo=0, hi=before|length) -%}
{%- for _ in range(64) -%}
{%- if s.lo >= s.hi -%}{%- break -%}{%- endif -%}
{%- set mid = (s.lo + s.hi + 1) // 2 -%}
{%- if text.find(before[before|length - mid:], [0, lo - mid]|max) >= 0 -%}{%- set s.lo = mid -%}
{%- else -%}{%- set s.hi = mid - 1 -%}{%- endif -%}
{%- endfor -%}
{%- set tail = before[before|length - s.lo:] -%}
{%- if not ((anchor and anchor in tail) or s.lo >= [before|length, __MIN_TAIL__]|min) -%}{{- -1 -}}
{%- else -%}{{- text.find(before[before|length - s.lo:], [0, lo - s.lo]|max) + s.lo -}}
{%- endif -%}
{%- endif -%}
{%- endif -%}
{%- endmacro -%}
{%- set __ap_text = __R__(messages, add_generation_prompt) -%}
{%- set __ap_markers = __MARKERS__ -%}
{%- set __ap = namespace(lo=0, printed=0) -%}
{%- for __ap_message in messages -%}
{%- if __ap_message.role == 'assistant' -%}
{%- set __ap_head = messages[:loop.index0] -%}
{%- set __ap_before = __R__(__ap_head, false) if __ap_head else '' -%}
{%- set __ap_prompt = __R__(__ap_head, true) if __ap_head else '' -%}
{%- set __ap_upto = __R__(messages[:loop.index0 + 1], false) -%}
{%- set __ap_header = '' -%}
{%- if __ap_prompt.startswith(__ap_before) -%}
{%- set __ap_header = __ap_prompt[__ap_before|length:] -%}
{%- endif -%}
{%- set __ap_anchor = '' -%}
{%- if loop.index0 and messages[loop.index0 - 1].content is string -%}
{%- set __ap_anchor = messages[loop.index0 - 1].content -%}
{%- endif -%}
{%- if not __ap_head -%}
{%- set __ap_g = __GENERATION_PROMPT__ -%}
{%- set __ap_f = namespace(start=-1) -%}
{%- for j in range(__ap_g|length, 0, -1) if __ap_f.start < 0 -%}
{%- if j == __ap_g|length or __ap_g[j - 1] in ' \t\n\r\f\v>]' or __ap_g[j] in '<[' -%}
{%- if __ap_text.find(__ap_g[:j]) >= 0 -%}
{%- set __ap_f.start = __ap_text.find(__ap_g[:j]) + j -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- set __ap_start = [0, __ap_f.start]|max -%}
{%- elif __ap_text.startswith(__ap_prompt) -%}
{%- set __ap_start = [__ap.lo, __ap_prompt|length]|max -%}
{%- else -%}
{%- set __ap_base = __ap_locate(__ap_text, __ap_before, __ap.lo, __ap_anchor)|int -%}
{%- if __ap_base < 0 -%}
{{- raise_exception('autoparser training template: cannot locate assistant turn '
    ~ loop.index0) -}}
{%- endif -%}
{%- set __ap_start = __ap_base + __ap_hm(__ap_header, __ap_text[__ap_base:])|int -%}
{%- endif -%}
{%- set __ap_shared = __ap_cp(__ap_upto, __ap_text)|int -%}
{%- set __ap_e = namespace(end=__ap_shared) -%}
{%- if __ap_shared < __ap_upto|length -%}
{%- set __ap_e.end = [__ap_start, __ap_cut(__ap_upto, __ap_shared)|int]|max -%}
{%- set __ap_bu = [0, __ap_locate(__ap_upto, __ap_before, 0, __ap_anchor)|int]|max -%}
{%- set __ap_own = __ap_upto[__ap_bu + __ap_hm(__ap_header, __ap_upto[__ap_bu:])|int:] -%}
{%- set __ap_limit = [__ap_text|length, __ap_start + __ap_own|length]|min -%}
{%- set __ap_found = __ap_suffix(__ap_own, __ap_text, __ap_start, __ap_limit)|int -%}
{%- if __ap_found -%}
{%- set __ap_tail = __ap_own[__ap_own|length - __ap_found:] -%}
{%- set __ap_aligned = __ap_text.find(__ap_tail, __ap_start, __ap_limit) + __ap_found -%}
{%- set __ap_e.end = [__ap_e.end, __ap_aligned]|max -%}
{%- endif -%}
{%- endif -%}
{%- set __ap_end = __ap_e.end -%}
{%- set __ap_m = namespace(end=__ap_end, done=not __ap_markers) -%}
{%- set __ap_rest = __ap_text[__ap_end:] -%}
{%- set __ap_gap = __ap_rest|length - __ap_rest.lstrip()|length -%}
{%- for __ap_mk in __ap_markers if __ap_text[:__ap_end].rstrip().endswith(__ap_mk) -%}
{%- set __ap_m.done = true -%}
{%- endfor -%}
{%- for __ap_mk in __ap_markers if not __ap_m.done and __ap_rest.startswith(__ap_mk, __ap_gap) -%}
{%- set __ap_m.end = __ap_end + __ap_gap + __ap_mk|length -%}
{%- set __ap_m.done = true -%}
{%- endfor -%}
{%- if __ap_m.end > __ap_start -%}
{{- __ap_text[__ap.printed:__ap_start] -}}
{%- generation -%}{{- __ap_text[__ap_start:__ap_m.end] -}}{%- endgeneration -%}
{%- set __ap.printed = __ap_m.end -%}
{%- set __ap.lo = __ap_m.end -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{{- __ap_text[__ap.printed:] -}}
"""


# Conversations a generated training template must render byte-identically to the original
# (where the original renders them): content, reasoning, single and parallel calls, tool
# results and several assistant turns.
def _call(call_id: str, name: str, args: dict[str, object]) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


CHECK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
_CHECK_CONVERSATIONS: tuple[tuple[list[dict[str, object]], bool], ...] = (
    (
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4.", "reasoning_content": "Two and two."},
        ],
        False,
    ),
    (
        [
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Use the tool.",
                "tool_calls": [
                    _call("call_1", "get_weather", {"city": "Paris"}),
                    _call("call_2", "get_weather", {"city": "Lyon"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "23 C"},
            {"role": "assistant", "content": "21 C in Paris, 23 C in Lyon."},
            {"role": "user", "content": "Thanks."},
        ],
        True,
    ),
)


def checked_training_template(
    source: str,
    render: Callable[
        [str, Sequence[Mapping[str, object]], Sequence[Mapping[str, object]] | None, bool], str
    ],
    end_of_turn: Sequence[str] = (),
    generation_prompt: str = "",
) -> str:
    """:func:`training_template` of ``source``, checked to render as the original does.

    ``render(source, messages, tools, add_generation_prompt)`` renders a template text
    as transformers would (no polyfills); ``end_of_turn`` and ``generation_prompt`` come
    from the analysis. Every
    check conversation the original renders must render byte-identically from the training
    template, else ExportError says which.
    """
    wrapped = training_template(source, end_of_turn, generation_prompt)
    for number, (messages, with_tools) in enumerate(_CHECK_CONVERSATIONS):
        tools = [CHECK_TOOL] if with_tools else None
        for agp in (False, True):
            try:
                want = render(source, messages, tools, agp)
            except TemplateError:
                continue  # the original cannot render it: nothing to keep
            try:
                got = render(wrapped, messages, tools, agp)
            except TemplateError as exc:
                raise ExportError(
                    f"the training template fails on check conversation {number}, which the "
                    f"original renders: {exc}"
                ) from None
            if got != want:
                raise ExportError(
                    f"the training template renders check conversation {number} differently "
                    "from the original"
                )
    return wrapped
