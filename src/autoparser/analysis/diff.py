"""Diff machinery: common prefix/suffix of two renders, marker-safe boundaries, segmentation.

Two renders of a template that differ in one controlled detail share a prefix and a suffix;
what is left in between is what the detail changed. Boundaries are moved so that they never
fall inside a marker such as ``<tool_call>``, ``[TOOL_CALLS]`` or ``<|im_end|>``: a marker
is taken whole or not at all. The segmentation rules (what counts as a marker) live here and
only here.
"""

from __future__ import annotations

import dataclasses
import re

# A single marker: "<...>" or "[...]" on one line, without nested brackets. Square-bracket
# markers must start like a word or a closing slash, so JSON arrays ("[{", '["a"') never
# qualify. Diff boundaries are kept outside these.
SINGLE_MARKER_RE = re.compile(r"<[^\s<>][^<>\n]{0,126}>|\[[A-Za-z/_|][^\[\]\n{}\"]{0,126}\]")
# Element markup built from special tokens ("<|open|>think<|sep|>", "<|close|>think<|sep|>"):
# a token, a bare lowercase element name, a token. When segmenting, such a run is one marker
# (the element name is no text of its own). A diff boundary is kept outside such a run only
# when every render has one there: "<|start|>assistant<|channel|>" against
# "<|start|>assistant to=f" is a token followed by different text, not two elements.
_TOKEN = r"<\|[^\s<>|]{1,40}\|>"
ELEMENT_RE = re.compile(_TOKEN + r"[a-z][a-z_]{0,30}" + _TOKEN)
MARKER_RE = re.compile(ELEMENT_RE.pattern + "|" + SINGLE_MARKER_RE.pattern)
# How far around a boundary a marker that straddles it can start.
_WINDOW = 130


@dataclasses.dataclass(frozen=True)
class DiffSplit:
    """``a == prefix + left + suffix`` and ``b == prefix + right + suffix``."""

    prefix: str
    left: str
    right: str
    suffix: str


@dataclasses.dataclass(frozen=True)
class Segment:
    """A piece of text that is either one whole marker or plain text between markers."""

    value: str
    is_marker: bool


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix: binary search over C-speed slice compares."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix_len(a: str, b: str, limit: int | None = None) -> int:
    """Length of the longest common suffix, at most ``limit``."""
    lo = 0
    hi = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    la, lb = len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _straddling(
    text: str, pos: int, pattern: re.Pattern[str] = SINGLE_MARKER_RE
) -> tuple[int, int] | None:
    """The span of a marker in ``text`` with ``start < pos < end``, if any."""
    lo = max(0, pos - _WINDOW)
    for m in pattern.finditer(text, lo, min(len(text), pos + _WINDOW)):
        if m.start() >= pos:
            break
        if m.end() > pos:
            return m.start(), m.end()
    return None


def _elements_straddling(texts: tuple[str, ...], pos_of: list[int]) -> list[tuple[int, int]]:
    """The element runs straddling each text's boundary, or [] unless every text has one."""
    spans = [_straddling(text, pos, ELEMENT_RE) for text, pos in zip(texts, pos_of, strict=True)]
    return [s for s in spans if s is not None] if None not in spans else []


def safe_prefix_len(texts: tuple[str, ...], n: int) -> int:
    """Shrink a common-prefix length until no text has a marker straddling it."""
    changed = True
    while changed and n > 0:
        changed = False
        for text in texts:
            span = _straddling(text, n)
            if span is not None:
                n = span[0]
                changed = True
        elements = _elements_straddling(texts, [n] * len(texts))
        if not changed and elements:
            n = min(start for start, _ in elements)
            changed = True
    return n


def safe_suffix_len(texts: tuple[str, ...], n: int) -> int:
    """Shrink a common-suffix length until no text has a marker straddling its start."""
    changed = True
    while changed and n > 0:
        changed = False
        for text in texts:
            span = _straddling(text, len(text) - n)
            if span is not None:
                n = len(text) - span[1]
                changed = True
        elements = _elements_straddling(texts, [len(text) - n for text in texts])
        if not changed and elements:
            n = min(len(text) - end for text, (_, end) in zip(texts, elements, strict=True))
            changed = True
    return n


def diff_split(a: str, b: str) -> DiffSplit:
    """Split two renders into common prefix, the two differing middles, and common suffix."""
    p = safe_prefix_len((a, b), common_prefix_len(a, b))
    limit = min(len(a), len(b)) - p
    s = safe_suffix_len((a, b), common_suffix_len(a, b, limit))
    return DiffSplit(a[:p], a[p : len(a) - s], b[p : len(b) - s], a[len(a) - s :])


def safe_common_prefix(a: str, b: str) -> str:
    """The common prefix of two strings, cut so that it ends on a marker boundary."""
    return a[: safe_prefix_len((a, b), common_prefix_len(a, b))]


def safe_common_suffix(a: str, b: str) -> str:
    """The common suffix of two strings, cut so that it starts on a marker boundary."""
    n = safe_suffix_len((a, b), common_suffix_len(a, b))
    return a[len(a) - n :] if n else ""


def segmentize(text: str) -> list[Segment]:
    """Split text into whole markers and the plain text between them."""
    out: list[Segment] = []
    pos = 0
    for m in MARKER_RE.finditer(text):
        if m.start() > pos:
            out.append(Segment(text[pos : m.start()], False))
        out.append(Segment(m.group(), True))
        pos = m.end()
    if pos < len(text):
        out.append(Segment(text[pos:], False))
    return out


def markers_in(text: str) -> list[str]:
    """The whole markers in text, in order."""
    return MARKER_RE.findall(text)


def ends_with_element(text: str) -> bool:
    """Whether text ends with a whole element run ("...<|close|>call<|sep|>")."""
    found = list(MARKER_RE.finditer(text))
    return (
        bool(found)
        and found[-1].end() == len(text)
        and ELEMENT_RE.fullmatch(found[-1].group()) is not None
    )


def tokens_in(text: str) -> list[str]:
    """The single markers in text, in order (an element run gives its tokens)."""
    return SINGLE_MARKER_RE.findall(text)


# A ``key=`` / ``key:`` attribute at the end of a text, after whitespace or a marker.
_ATTRIBUTE_KEY_RE = re.compile(r"(?:(?<=\s)|(?<=[>\]])|^)[A-Za-z_][\w-]{0,30}[=:]$")


def attribute_start(text: str, pos: int) -> int:
    """Where a diff boundary at ``pos`` belongs when it falls after an attribute's key.

    Two renders that differ in an attribute's value (``to=user`` against ``to=self``)
    share its key: the boundary lands between ``to=`` and the value, but the key belongs
    with the value (the marker is ``to=self<|message|>``, not ``self<|message|>``). Returns
    ``pos`` moved back to the key's start, or ``pos`` unchanged.
    """
    m = _ATTRIBUTE_KEY_RE.search(text, max(0, pos - 32), pos)
    return m.start() if m is not None else pos


def last_marker_end(text: str) -> int:
    """End index of the last whole marker in text (0 when there is none)."""
    end = 0
    for m in MARKER_RE.finditer(text):
        end = m.end()
    return end


def split_after_first_close(text: str) -> tuple[str, str]:
    """Split text after its first closing bracket and the whitespace that follows.

    Used where two adjacent markers meet with no anchor between them, e.g. an argument
    name's closing ``</arg_key>\\n`` followed by a value opener ``<arg_value>``.
    """
    m = re.search(r"[>\]]\s*", text)
    if m is None:
        return text, ""
    return text[: m.end()], text[m.end() :]
