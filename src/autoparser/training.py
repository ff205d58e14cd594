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

One rendered conversation is the right training text only when every turn renders there
as the model saw it. :func:`training_samples` checks that (each turn's prompt and its render
are prefixes of the whole) and otherwise makes one sample per turn, the exact prompt plus
what the model generated; its options choose the parts, the turns and the end-of-turn
token trained, and :func:`sample_skew` compares any sample with the inference renders.

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
    add_generation_prompt: bool = False,
) -> list[Span]:
    """The generated spans of ``text`` (the full render of ``messages``), per assistant turn.

    ``render`` renders a prefix of the conversation with the same options (tools, template
    variables, polyfills) as ``text``; ``end_of_turn`` is the analysis' end-of-turn markers
    and ``generation_prompt`` its generation prompt (where a conversation that opens with an
    assistant turn starts it, after what the template prints first);
    ``add_generation_prompt`` whether ``text`` was rendered with it.
    Raises TemplateError naming the turn when a prefix the spans need does not render.
    """
    markers = _special_markers(end_of_turn)
    spans: list[Span] = []
    lo = 0
    # Each prefix render is made only when needed: the prompt and the conversation up to the
    # turn always (the latter is ``text`` itself for a last turn rendered without the
    # generation prompt), the history without the generation prompt only to align a turn
    # whose prompt is not a prefix of ``text``. The renders are the whole cost.
    done: dict[tuple[int, bool], str | None] = {}
    if not add_generation_prompt:
        done[(len(messages), False)] = text

    def prefix(count: int, agp: bool) -> str:
        if (count, agp) not in done:
            done[(count, agp)] = _render(render, messages[:count], agp) if count else ""
        rendered = done[(count, agp)]
        if rendered is None:
            raise TemplateError(
                f"messages[{count if agp else count - 1}]: the template does not render the "
                "conversation up to this assistant turn, so the turn cannot be located"
            )
        return rendered

    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        prompt = prefix(index, True)
        upto = prefix(index + 1, False)
        anchor = _anchor(messages[index - 1]) if index else ""
        if not index:  # nothing before it: the prompt is the template's generation prompt
            start = _after_first_prompt(text, generation_prompt)
        elif text.startswith(prompt):
            start = max(lo, len(prompt))
        else:
            before = prefix(index, False)
            header = prompt[len(before) :] if prompt.startswith(before) else ""
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
            before = prefix(index, False)
            header = prompt[len(before) :] if prompt.startswith(before) else ""
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


# ------------------------------------------------------------- training samples

# The parts of an assistant turn a trainer may train on.
PARTS = frozenset({"content", "reasoning", "tool_calls"})
# The message keys each part is read from (removing them shows where the part renders).
_PART_KEYS = {
    "content": ("content",),
    "reasoning": ("reasoning_content", "reasoning", "thinking"),
    "tool_calls": ("tool_calls",),
}


@dataclasses.dataclass(frozen=True)
class TrainedTurn:
    """One assistant turn inside a sample: ``messages[index]``, generated as
    ``text[start:end]`` after the prompt ``text[:start]``."""

    index: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class TrainingSample:
    """A text to train on and the character spans the loss covers.

    ``turns`` are the assistant turns it holds (what the model generated for each, before the
    options cut parts out); ``spans`` are what is trained after the options: ordered,
    disjoint, inside the turns.
    """

    text: str
    spans: tuple[Span, ...]
    turns: tuple[TrainedTurn, ...]

    def trained_text(self) -> list[str]:
        """The text of each trained span, in order."""
        return [self.text[s:e] for s, e in self.spans]


@dataclasses.dataclass(frozen=True)
class TrainingFinding:
    """Something about a turn a trainer should know; the samples are still made.

    ``kind`` is ``"prompt_not_rendered"`` when the template renders the turn without the end
    of the prompt it gives the model (a forced ``<think>`` the history lacks): the sample is
    that prompt plus the turn as rendered, which the model may never have produced;
    ``"turn_not_rendered"`` when it renders nothing of the turn (a template that drops tool
    calls, or the last assistant message): nothing of it is trained.
    """

    index: int
    kind: str
    detail: str


@dataclasses.dataclass(frozen=True)
class TrainingSamples:
    """The samples of one conversation, and whether (and why) it was split per turn.

    ``per_turn`` is False when every trained turn renders as a prefix of the whole
    conversation: one sample holds them all. It is True when the template rewrites history
    (the render up to a turn, or the prompt the model was given for it, is not a prefix of
    the whole render): each turn is then its own sample, the exact prompt plus the turn.
    ``reason`` says which, naming the first turn that decided it.
    """

    samples: tuple[TrainingSample, ...]
    per_turn: bool
    reason: str
    findings: tuple[TrainingFinding, ...] = ()


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """What is trained: the parts of each turn (``content``, ``reasoning``, ``tool_calls``),
    every turn or only the last (``turns``: ``"all"`` | ``"last"``), whether the end-of-turn
    marker and the template's text after it are in (``end_of_turn``), how the conversation is
    split (``split``: ``"auto"`` per turn only where history is rewritten, ``"per_turn"``
    always, ``"single"`` never, an error where history is rewritten), and whether each
    sample is checked by :func:`sample_skew` against the inference renders of its prompt and
    generation (``check``: a guard on how the samples were assembled; the same check on
    samples made elsewhere is where skew is found)."""

    parts: frozenset[str] = PARTS
    turns: str = "all"
    end_of_turn: bool = True
    split: str = "auto"
    check: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.parts) - PARTS
        if unknown or not self.parts:
            raise RequestError(
                f"parts: expected a non-empty subset of {sorted(PARTS)}, got {sorted(self.parts)}"
            )
        if self.turns not in ("all", "last"):
            raise RequestError(f"turns: expected 'all' or 'last', got {self.turns!r}")
        if self.split not in ("auto", "per_turn", "single"):
            raise RequestError(
                f"split: expected 'auto', 'per_turn' or 'single', got {self.split!r}"
            )


class _Renders:
    """Renders of the prefixes of one conversation, each made once (the check reuses them)."""

    def __init__(self, messages: Sequence[Mapping[str, object]], render: RenderFn) -> None:
        self.messages = messages
        self._render = render
        self._done: dict[tuple[int, bool], str] = {}

    def __call__(self, count: int, agp: bool) -> str:
        key = (count, agp)
        if key not in self._done:
            try:
                self._done[key] = self._render(self.messages[:count], agp)
            except TemplateError as exc:
                raise TemplateError(
                    f"messages[{max(0, count - 1)}]: the template does not render the "
                    f"conversation up to this message: {exc}"
                ) from None
        return self._done[key]

    def optional(self, count: int) -> str | None:
        """The render of the first ``count`` messages, or None when the template refuses it
        (a conversation cut after an assistant turn the template expects a reply to)."""
        try:
            return self(count, False)
        except TemplateError:
            return None

    def variant(self, index: int, message: Mapping[str, object]) -> str | None:
        """The conversation up to ``messages[index]`` with that message replaced."""
        try:
            return self._render([*self.messages[:index], message], False)
        except TemplateError:
            return None


@dataclasses.dataclass(frozen=True)
class _Turn:
    index: int
    prompt: str  # what the model was given ("" for a turn that opens the conversation)
    upto: str  # the render of the conversation up to and including the turn
    start: int  # where the turn's generation starts in ``upto``
    tail: str  # an end-of-turn special token the next message prints, owed to this turn
    prompt_rendered: bool  # ``upto`` starts with ``prompt``


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    return min(limit, common_prefix(a[::-1], b[::-1]))


def _owed_marker(
    upto: str, start: int, following: str, content: str, markers: Sequence[str]
) -> str:
    """The end-of-turn special token the next message prints first (GLM's ``<|user|>``),
    read from the render with that message (``following``): the model emits it to stop.

    When the template renders the turn differently once a message follows (its reasoning
    dropped), the turn's end is found in ``following`` as the longest tail of ``upto``
    there, trusted when it holds the turn's content or enough of the turn.
    """
    if following.startswith(upto):
        return following[len(upto) : _extend_over_marker(following, len(upto), markers)]
    shared = common_prefix(upto, following)
    found = _longest_suffix_found(upto, following, min(start, shared), len(following))
    tail = upto[len(upto) - found :]
    if not found or not (
        (content and content in tail) or found >= min(_MIN_TAIL, len(upto) - start)
    ):
        return ""
    end = following.find(tail, min(start, shared)) + found
    return following[end : _extend_over_marker(following, end, markers)]


def _turn(renders: _Renders, index: int, markers: Sequence[str], generation_prompt: str) -> _Turn:
    """Where ``messages[index]`` starts and ends in the render up to it, and its prompt."""
    upto = renders(index + 1, False)
    if index == 0:
        start, prompt, rendered = _after_first_prompt(upto, generation_prompt), "", True
    else:
        prompt = renders(index, True)
        rendered = upto.startswith(prompt)
        if rendered:
            start = len(prompt)
        else:
            before = renders(index, False)
            header = prompt[len(before) :] if prompt.startswith(before) else ""
            base = len(before) if upto.startswith(before) else _locate(upto, before, 0)
            if base >= 0:
                start = base + header_match(header, upto[base:])
            else:  # the history moves once the turn follows: the turn is what differs
                start = max(0, boundary_at_or_before(upto, common_prefix(prompt, upto)))
    tail = ""
    if markers and index + 1 < len(renders.messages):
        following = renders.optional(index + 2)
        if following is not None:
            content = renders.messages[index].get("content")
            text = content if isinstance(content, str) else ""
            tail = _owed_marker(upto, start, following, text, markers)
    return _Turn(index, prompt, upto, start, tail, rendered)


def _strings(value: object) -> list[str]:
    """The non-empty strings of a message field (a call's name and argument values)."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _find_all(text: str, needle: str, start: int, end: int) -> list[Span]:
    found, at = [], text.find(needle, start, end)
    while at >= 0:
        found.append((at, at + len(needle)))
        at = text.find(needle, at + len(needle), end)
    return found


_MIN_KEPT = 4


def _part_regions(renders: _Renders, turn: _Turn, excluded: Sequence[str]) -> list[Span]:
    """Where the excluded parts of the turn render, in ``turn.upto``: the difference between
    the turn's render and the render of the same turn without the part, less the text of the
    parts kept (a template may render the reasoning only beside a call, so removing the call
    removes both). When the template refuses the turn without the part, the part's own text
    where it occurs in the turn."""
    message = renders.messages[turn.index]
    kept = [
        text
        for part in PARTS - set(excluded)
        for key in _PART_KEYS[part]
        for text in _strings(message.get(key))
    ]
    regions: list[Span] = []
    for part in excluded:
        keys = [k for k in _PART_KEYS[part] if message.get(k)]
        if not keys:
            continue
        variant = {k: v for k, v in message.items() if k not in keys}
        if part == "content":
            variant["content"] = ""
        other = renders.variant(turn.index, variant)
        if other is None:
            texts = [t for k in keys for t in _strings(message[k])]
            found = [r for t in texts for r in _find_all(turn.upto, t, turn.start, len(turn.upto))]
            if texts and not found:
                raise TemplateError(
                    f"messages[{turn.index}]: the template does not render this turn without "
                    f"its {part}, nor its {part} as given, so where the {part} renders cannot "
                    "be told"
                )
            regions.extend(found)
            continue
        head = common_prefix(turn.upto, other)
        tail = _common_suffix(turn.upto, other, min(len(turn.upto), len(other)) - head)
        cut = (max(head, turn.start), len(turn.upto) - tail)
        # Kept text inside the cut, unless it is part of the excluded text itself or too short
        # to be told from a coincidence (a one-letter argument inside a marker).
        own = [t for k in keys for t in _strings(message[k])]
        guarded = [t for t in kept if len(t) >= _MIN_KEPT and not any(t in o for o in own)]
        protected = [r for t in guarded for r in _find_all(turn.upto, t, cut[0], cut[1])]
        regions.extend(_subtract(cut, protected))
    return [r for r in regions if r[1] > r[0]]


def _end_of_turn_start(text: str, start: int, end: int, markers: Sequence[str]) -> int:
    """Where the end-of-turn marker of ``text[start:end]`` starts (the last marker followed
    by nothing but whitespace or another marker); ``end`` when there is none."""
    found = end
    window = text[start:end]
    for marker in markers:
        if not marker.strip():
            continue
        at = window.rfind(marker.strip())
        if at < 0:
            continue
        rest = window[at + len(marker.strip()) :]
        for other in markers:
            rest = rest.replace(other.strip(), "") if other.strip() else rest
        if not rest.strip():
            found = min(found, start + at)
    return found


def _subtract(span: Span, cuts: Sequence[Span]) -> list[Span]:
    pieces = [span]
    for cut_start, cut_end in sorted(cuts):
        kept: list[Span] = []
        for start, end in pieces:
            if cut_end <= start or end <= cut_start:
                kept.append((start, end))
                continue
            if start < cut_start:
                kept.append((start, cut_start))
            if cut_end < end:
                kept.append((cut_end, end))
        pieces = kept
    return [(start, end) for start, end in pieces if end > start]


def _trained_spans(
    renders: _Renders,
    turn: _Turn,
    placed: TrainedTurn,
    text: str,
    options: TrainingOptions,
    end_of_turn: Sequence[str],
) -> list[Span]:
    excluded = sorted(PARTS - options.parts)
    shift = placed.start - turn.start  # turn.upto coordinates -> sample coordinates
    cuts = [(s + shift, e + shift) for s, e in _part_regions(renders, turn, excluded)]
    if not options.end_of_turn:
        cuts.append((_end_of_turn_start(text, placed.start, placed.end, end_of_turn), placed.end))
    return _subtract((placed.start, placed.end), cuts)


def training_samples(
    messages: Sequence[Mapping[str, object]],
    render: RenderFn,
    options: TrainingOptions = TrainingOptions(),
    end_of_turn: Sequence[str] = (),
    generation_prompt: str = "",
) -> TrainingSamples:
    """The samples to train on for ``messages``, with the spans ``options`` ask for.

    ``render`` renders a prefix of the conversation with the options of the whole (tools,
    template variables); ``end_of_turn`` and ``generation_prompt`` come from the analysis.
    Where every trained turn's render and prompt are prefixes of the whole render, one sample
    (the whole render) holds every turn; otherwise each turn is its own sample: the prompt
    the model was given for it plus what it generated. Raises RequestError for a
    conversation without an assistant turn, TemplateError when a render the samples need
    fails or (``check``) a sample is not its prompt plus its generation.
    """
    indices = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not indices:
        raise RequestError("messages: no assistant turn to train on")
    if options.turns == "last":
        indices = indices[-1:]
    renders = _Renders(messages, render)
    markers = _special_markers(end_of_turn)
    turns = [_turn(renders, i, markers, generation_prompt) for i in indices]
    whole = renders(len(messages), False)
    rewritten = next(
        (
            t
            for t in turns
            if not whole.startswith(t.upto + t.tail) or not whole.startswith(t.prompt)
        ),
        None,
    )
    findings = tuple(
        TrainingFinding(
            t.index,
            "prompt_not_rendered",
            "the template renders this turn without the end of the prompt it gives the "
            f"model ({t.prompt[len(t.prompt) - 40 :]!r}); the sample is that prompt plus "
            "the turn as rendered",
        )
        for t in turns
        if not t.prompt_rendered
    ) + tuple(
        TrainingFinding(
            t.index,
            "turn_not_rendered",
            "the template renders nothing of this turn after its prompt: nothing is trained",
        )
        for t in turns
        if not (t.upto[t.start :] + t.tail).strip()
    )
    per_turn = options.split == "per_turn" or (options.split == "auto" and rewritten is not None)
    if rewritten is not None and options.split == "single":
        raise TemplateError(
            f"messages[{rewritten.index}]: the template renders this turn (or its prompt) "
            "differently once later messages follow; one sample cannot hold what the model "
            "saw (use split='auto' or 'per_turn')"
        )
    if per_turn:
        reason = (
            "split per turn on request"
            if rewritten is None
            else f"messages[{rewritten.index}]: the render up to this turn (or its prompt) is "
            "not a prefix of the whole render: the template rewrites history, so each "
            "turn is its own sample"
        )
        samples = []
        for t in turns:
            # A turn opening the conversation keeps what the template prints before it.
            prompt = t.prompt if t.index else t.upto[: t.start]
            text = prompt + t.upto[t.start :] + t.tail
            placed = TrainedTurn(t.index, len(prompt), len(text))
            spans = _trained_spans(renders, t, placed, text, options, end_of_turn)
            samples.append(TrainingSample(text, tuple(spans), (placed,)))
    else:
        reason = (
            "every trained turn and its prompt render as a prefix of the whole conversation: "
            "one sample"
        )
        placed_turns = [TrainedTurn(t.index, t.start, len(t.upto) + len(t.tail)) for t in turns]
        spans = [
            span
            for t, placed in zip(turns, placed_turns, strict=True)
            for span in _trained_spans(renders, t, placed, whole, options, end_of_turn)
        ]
        samples = [TrainingSample(whole, tuple(spans), tuple(placed_turns))]
    result = TrainingSamples(tuple(samples), per_turn, reason, findings)
    if options.check:
        for sample in result.samples:
            problems = sample_skew(sample, messages, render, end_of_turn, renders)
            if problems:
                raise TemplateError("training sample skew: " + "; ".join(problems))
    return result


def sample_skew(
    sample: TrainingSample,
    messages: Sequence[Mapping[str, object]],
    render: RenderFn,
    end_of_turn: Sequence[str] = (),
    renders: _Renders | None = None,
) -> list[str]:
    """How ``sample`` differs from inference, per turn: ``text[:start]`` must be the prompt
    the model is given for the turn (the conversation before it with the generation prompt)
    and ``text[start:end]`` what the template renders after that prompt once the turn is
    added (plus an end-of-turn token the next message prints). Empty when it matches; a
    sample made from another engine's render (a training template, a dataset) is checked
    the same way.
    """
    renders = renders or _Renders(messages, render)
    markers = _special_markers(end_of_turn)
    problems = []
    for turn in sample.turns:
        upto = renders(turn.index + 1, False)
        generated = sample.text[turn.start : turn.end]
        if turn.index:
            prompt = renders(turn.index, True)
            if sample.text[: turn.start] != prompt:
                at = common_prefix(prompt, sample.text[: turn.start])
                problems.append(
                    f"messages[{turn.index}]: the text before the turn is not the inference "
                    f"prompt (they differ from character {at})"
                )
                continue
            if not upto.startswith(prompt):
                continue  # reported as a finding: the template cannot render it after the prompt
            want = upto[len(prompt) :]
        elif upto[: turn.start] == sample.text[: turn.start]:
            want = upto[turn.start :]
        else:
            problems.append(f"messages[{turn.index}]: the text before the turn differs")
            continue
        extra = generated[len(want) :] if generated.startswith(want) else None
        if extra is None or (extra.strip() and extra.strip() not in markers):
            problems.append(
                f"messages[{turn.index}]: the trained text is not what the template renders "
                "after the prompt"
            )
    return problems


# ------------------------------------------------------------ rows and collation

IGNORE_INDEX = -100  # the label causal-LM losses skip (PyTorch's cross_entropy default)


def sample_rows(
    tokenizer: Any, samples: TrainingSamples | Sequence[TrainingSample]
) -> list[dict[str, list[int]]]:
    """One dataset row per sample: ``input_ids``, ``attention_mask`` and ``assistant_masks``
    (1 where a token overlaps a trained span), as TRL's ``SFTTrainer`` takes pre-tokenized
    data with ``assistant_only_loss=True``, and as :func:`collate` takes it."""
    items = samples.samples if isinstance(samples, TrainingSamples) else samples
    return [tokenize_for_training(tokenizer, RenderedPrompt(s.text, list(s.spans))) for s in items]


def collate(rows: Sequence[Mapping[str, Sequence[int]]], pad_token_id: int) -> dict[str, Any]:
    """A batch for a causal LM from rows of :func:`sample_rows`: ids padded on the right,
    ``labels`` the ids where ``assistant_masks`` is 1 and ``IGNORE_INDEX`` elsewhere (the
    model shifts them itself), as PyTorch tensors (torch is imported here, on first use)."""
    import torch  # the optional ``train`` extra

    if not rows:
        raise RequestError("rows: nothing to collate")
    width = max(len(r["input_ids"]) for r in rows)
    ids, attention, labels = [], [], []
    for row in rows:
        pad = width - len(row["input_ids"])
        ids.append([*row["input_ids"], *[pad_token_id] * pad])
        attention.append([*row.get("attention_mask", [1] * len(row["input_ids"])), *[0] * pad])
        labels.append(
            [
                token if keep else IGNORE_INDEX
                for token, keep in zip(row["input_ids"], row["assistant_masks"], strict=True)
            ]
            + [IGNORE_INDEX] * pad
        )
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "attention_mask": torch.tensor(attention, dtype=torch.long),
        "labels": torch.tensor(labels, dtype=torch.long),
    }
