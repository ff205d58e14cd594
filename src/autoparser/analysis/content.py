"""Content analysis (C1): is the visible answer wrapped, and what ends an assistant turn.

The assistant turn is what follows the generation prompt in a render of
[user, assistant]. The text before the answer (minus any reasoning block) is a content
opener; after it, the first marker that also ends a user turn is the end of turn, and any
marker before that closes the content.
"""

from __future__ import annotations

from autoparser.analysis.diff import MARKER_RE, safe_common_prefix, segmentize
from autoparser.analysis.model import ContentAnalysis, ContentMode, ReasoningAnalysis
from autoparser.analysis.reasoning import generation_prompt
from autoparser.template.probe import ASSISTANT_MSG, THINKING, USER_MSG, Probe, needle_in


def assistant_turn(probe: Probe, render: str | None, tools: bool = False) -> str | None:
    """The assistant turn in a render: what follows the user turn and the role header.

    The role header is the generation prompt, or its longest leading run of segments
    found after the user message (a prompt may also open a reasoning block that a rendered
    turn does not have). Some templates render the tool instructions after the
    conversation, so the header is searched for rather than aligned by prefix.
    """
    user_only = probe.render(tools=tools)
    if render is None or user_only is None:
        return None
    at = render.rfind(USER_MSG)
    if at < 0:
        return None
    at += len(USER_MSG)
    gp = generation_prompt(probe, True)
    segs = segmentize(gp)
    headers = [gp]
    # What the prompt appends whether thinking is on or off: the role header without what
    # the switch adds (Seed-Think's "assistant/think" when reasoning is forced).
    shared = safe_common_prefix(gp, generation_prompt(probe, False))
    if shared.strip() and shared != gp:
        headers.append(shared)
    # The same header with other whitespace around it (granite's prompt "\nASSISTANT: \n"
    # against the turn's "\nASSISTANT: text"): a role header is not a content wrapper.
    headers += [gp.rstrip(), gp.strip()]
    headers += ["".join(s.value for s in segs[:n]).rstrip() for n in range(len(segs) - 1, 0, -1)]
    for header in headers:
        if header.strip():
            found = render.find(header, at)
            # A header of repeated characters may overlap the marker before it ('>>>' after
            # '<|eot|>' reads from the marker's own '>'): the header is the last such run.
            while found >= 0 and render.startswith(header, found + 1):
                found += 1
            if found >= 0:
                return render[found + len(header) :]
    tail = render[at:]
    user_at = user_only.rfind(USER_MSG)
    user_tail = user_only[user_at + len(USER_MSG) :] if user_at >= 0 else ""
    return tail[len(safe_common_prefix(tail, user_tail)) :]


def user_turn_end(probe: Probe) -> list[str]:
    """Markers that follow the user message when nothing comes after it."""
    text = probe.render()
    if text is None:
        return []
    at = text.rfind(USER_MSG)
    return MARKER_RE.findall(text[at + len(USER_MSG) :]) if at >= 0 else []


def split_post(post: str, user_end: list[str]) -> tuple[str, str]:
    """Split what follows the content into (content closer, end-of-turn marker)."""
    found = list(MARKER_RE.finditer(post))
    if not found:
        return "", post.strip()
    for m in found:
        if m.group() in user_end:
            return post[: m.start()].strip(), m.group()
    return "", found[0].group()


def _next_turn_marker(probe: Probe, user_end: list[str]) -> str:
    """When a turn has no closing marker, what starts the next (user) turn ends it."""
    text = probe.render(assistant=(ASSISTANT_MSG, None, ()), follow_up="user")
    if text is None or ASSISTANT_MSG not in text:
        return ""
    at = text.find(ASSISTANT_MSG) + len(ASSISTANT_MSG)
    nxt = text.find(USER_MSG, at)
    if nxt < 0:
        return ""
    _, eot = split_post(text[at:nxt], user_end)
    return eot


def _wraps_user_text(probe: Probe, opener: str) -> bool:
    """Whether the user's message is opened by the same marker as the answer."""
    text = probe.render()
    at = -1 if text is None else text.rfind(USER_MSG)
    return text is not None and at >= 0 and text[:at].rstrip().endswith(opener)


def _strip_reasoning(pre: str, reasoning: ReasoningAnalysis) -> str:
    if reasoning.end and reasoning.end in pre:
        return pre[pre.rfind(reasoning.end) + len(reasoning.end) :]
    return pre


def analyze_content(
    probe: Probe, reasoning: ReasoningAnalysis, after_reasoning: str, supports_tools: bool = False
) -> tuple[ContentAnalysis, str]:
    """The content analysis and the end-of-turn marker of a text answer."""
    user_end = user_turn_end(probe)
    turn = assistant_turn(probe, probe.turn(ASSISTANT_MSG))
    if turn is None or ASSISTANT_MSG not in turn:
        return ContentAnalysis(), ""
    at = turn.find(ASSISTANT_MSG)
    start = _strip_reasoning(turn[:at], reasoning).strip()
    post = turn[at + len(ASSISTANT_MSG) :]
    end, eot = split_post(post, user_end)
    if start and not end and _wraps_user_text(probe, start) and len(user_end) > 1:
        # The user's text is wrapped like the answer ("<|START_TEXT|>...<|END_TEXT|>"): the
        # user turn's first closing marker closes the text, the next one ends the turn.
        rest = post.strip()
        if rest.startswith(user_end[0] + user_end[1]) or rest.startswith(
            user_end[0] + "\n" + user_end[1]
        ):
            end, eot = user_end[0], user_end[1]
    if not eot:
        eot = _next_turn_marker(probe, user_end)
    mode = ContentMode.ALWAYS_WRAPPED if start or end else ContentMode.PLAIN
    if mode is ContentMode.PLAIN and after_reasoning.strip():
        # Content wrapped only when reasoning precedes it (e.g. "</think><response>").
        with_r = assistant_turn(probe, probe.turn(ASSISTANT_MSG, THINKING))
        if with_r is not None and ASSISTANT_MSG in with_r and THINKING in with_r:
            at = with_r.find(ASSISTANT_MSG)
            r_end, _ = split_post(with_r[at + len(ASSISTANT_MSG) :], user_end)
            mode = ContentMode.WRAPPED_WITH_REASONING
            start, end = after_reasoning.strip(), r_end
    if mode is ContentMode.PLAIN and supports_tools:
        start = _opener_with_tools(probe, reasoning)
        if start:
            mode = ContentMode.ALWAYS_WRAPPED
    return ContentAnalysis(mode=mode, start=start, end=end), eot


def _opener_with_tools(probe: Probe, reasoning: ReasoningAnalysis) -> str:
    """A content opener the template writes only when the request has tools.

    Hunyuan's tool prompt asks for answers that start with "助手：" and writes its text turns
    so; without tools it writes them bare. Requests with tools get such answers: the
    opener is the content's (a wrapper, dropped where it appears).
    """
    turn = assistant_turn(probe, probe.turn(ASSISTANT_MSG, tools=True), tools=True)
    if turn is None or ASSISTANT_MSG not in turn:
        return ""
    start = _strip_reasoning(turn[: turn.find(ASSISTANT_MSG)], reasoning).strip()
    return "" if needle_in(start) else start
