"""vLLM's ToolParser and ReasoningParser, both driven by the template's ChatParams.

vLLM composes the two (``vllm.parser.DelegatingParser``): the reasoning parser splits the
output into reasoning and the text after it, the tool parser reads that text into content
and calls. The reasoning parser splits by the analysis' markers (the block open from the
start when the prompt opened it); the tool parser parses with ``reasoning_format="none"``,
so it reads the same text whether our reasoning parser, another one or none ran before it.
Both stream with ``engine_based_streaming`` so vLLM calls ``finish_streaming`` at the end
of the output, which flushes what the stream parser held back.

Importing this module needs vLLM in the tested range (IntegrationError otherwise).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from autoparser import ChatParams, StreamDelta, StreamParser
from autoparser.integrations.vllm._compat import load
from autoparser.integrations.vllm.session import (
    ReasoningSplit,
    Template,
    TokenizerLike,
    opener_optional,
    params_for,
    prompt_opens_reasoning,
    reasoning_closed,
    reasoning_markers,
    request_options,
    resolve_template,
    text_after_reasoning,
    wait_stops,
)

_V = load()
DeltaMessage: Any = _V["DeltaMessage"]
DeltaToolCall: Any = _V["DeltaToolCall"]
DeltaFunctionCall: Any = _V["DeltaFunctionCall"]
ExtractedToolCallInformation: Any = _V["ExtractedToolCallInformation"]
FunctionCall: Any = _V["FunctionCall"]
ToolCall: Any = _V["ToolCall"]
StructuredOutputsParams: Any = _V["StructuredOutputsParams"]
_ToolParserBase: Any = _V["ToolParser"]
_ReasoningParserBase: Any = _V["ReasoningParser"]

# How many trailing tokens are decoded to look for reasoning markers: a prompt's tail holds
# the generation prompt, a decode step's tail the marker just written.
_PROMPT_TAIL = 512
_STEP_TAIL = 16


def _delta(deltas: Iterable[StreamDelta], call_id: Callable[[str], str]) -> Any:
    """autoparser's stream deltas as one vLLM DeltaMessage (None when they hold nothing)."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[Any] = []
    for d in deltas:
        if d.content:
            content.append(d.content)
        if d.reasoning_content:
            reasoning.append(d.reasoning_content)
        for tc in d.tool_calls:
            calls.append(
                DeltaToolCall(
                    index=tc.index,
                    id=call_id(tc.id) if tc.id else None,
                    type="function" if tc.name is not None else None,
                    function=DeltaFunctionCall(name=tc.name, arguments=tc.arguments),
                )
            )
    if not (content or reasoning or calls):
        return None
    return DeltaMessage(
        content="".join(content) or None, reasoning="".join(reasoning) or None, tool_calls=calls
    )


def _split_delta(reasoning: str, rest: str) -> Any:
    """A piece of the reasoning split as a vLLM DeltaMessage (None when it holds nothing)."""
    if not (reasoning or rest):
        return None
    return DeltaMessage(reasoning=reasoning or None, content=rest or None)


def _single_call(request: Any) -> bool:
    """parallel_tool_calls=false: a response holds one call (vLLM's default is true)."""
    return getattr(request, "parallel_tool_calls", None) is False


def _named_or_required(choice: Any) -> bool:
    if choice == "required":
        return True
    return getattr(choice, "type", None) == "function" or (
        isinstance(choice, Mapping) and choice.get("type") == "function"
    )


class AutoparserToolParser(_ToolParserBase):  # type: ignore[misc]
    """Tool calls (and the content around them) for any template autoparser can analyse."""

    # Calls are read in the template's own format for every tool_choice; required and named
    # choices are constrained by the grammar adjust_request sets.
    supports_required_and_named = False
    engine_based_streaming = True
    # vLLM sets it when no reasoning parser runs; reasoning then stays in the content, which
    # is what reasoning_format="none" gives anyway.
    skip_reasoning_parsing = False

    def __init__(self, tokenizer: TokenizerLike, tools: Any = None) -> None:
        super().__init__(tokenizer, tools)
        # No template, or one that cannot be analysed: fail when vLLM validates the parser
        # at startup, not in a request.
        self._analysis = resolve_template(tokenizer).analysis
        self._stream: StreamParser | None = None
        self._text = ""
        self._ids: dict[str, str] = {}
        self._single = False

    def _call_id(self, given: str) -> str:
        """The model's own call id, else a fresh one for this response.

        ChatParams are cached and shared by every request with the same content, so the ids
        they generate would repeat between responses: each parser (one per response)
        replaces them with its own.
        """
        if given in self._text:
            return given
        return self._ids.setdefault(given, "call_" + uuid.uuid4().hex[:24])

    def _params(self, request: Any, *, reasoning: bool = False) -> ChatParams:
        template = resolve_template(self.model_tokenizer, getattr(request, "chat_template", None))
        return params_for(template, request_options(request, None), reasoning=reasoning)

    def adjust_request(self, request: Any) -> Any:
        """Keep special tokens (markers are special tokens); constrain required/named calls."""
        if hasattr(request, "skip_special_tokens"):
            request.skip_special_tokens = False
        if not getattr(request, "tools", None) or not hasattr(request, "response_format"):
            return request
        if not _named_or_required(request.tool_choice):
            return request
        # The whole output's grammar (reasoning included), applied from the first token.
        params = self._params(request, reasoning=True)
        if params.grammar and not params.grammar_lazy:
            request.structured_outputs = StructuredOutputsParams(grammar=params.grammar)
            request.response_format = None
            request._grammar_from_parser = True
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        message = self._params(request).parse(model_output)
        self._text = model_output
        found = message.tool_calls[:1] if _single_call(request) else message.tool_calls
        calls = [
            ToolCall(
                id=self._call_id(call.id),
                type="function",
                function=FunctionCall(name=call.name, arguments=call.arguments),
            )
            for call in found
        ]
        return ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=message.content
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> Any:
        if self._stream is None:
            self._stream = self._params(request).stream()
            self._single = _single_call(request)
        if not delta_text:
            return None
        self._text += delta_text
        return self._message(self._stream.feed_deltas(delta_text))

    def _message(self, deltas: list[StreamDelta]) -> Any:
        if self._single:  # parallel_tool_calls=false: the first call only, as vLLM streams it
            deltas = [d for d in deltas if all(tc.index == 0 for tc in d.tool_calls)]
        return _delta(deltas, self._call_id)

    def finish_streaming(self) -> Any:
        """The deltas the stream held back until the output ended."""
        if self._stream is None:
            return None
        return self._message(self._stream.finish_deltas())


class AutoparserReasoningParser(_ReasoningParserBase):  # type: ignore[misc]
    """Reasoning for any template autoparser can analyse; the rest goes to the tool parser."""

    engine_based_streaming = True

    def __init__(self, tokenizer: TokenizerLike, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self._template_kwargs: dict[str, Any] = dict(kwargs.get("chat_template_kwargs") or {})
        self._template: Template = resolve_template(tokenizer)
        self._prompt = ""
        self._split: ReasoningSplit | None = None

    # -- the prompt --------------------------------------------------------------------

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.model_tokenizer.decode(list(ids), skip_special_tokens=False))

    def _thinking(self) -> bool | None:
        value = self._template_kwargs.get("enable_thinking")
        return value if isinstance(value, bool) else None

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        """The rendered prompt's tail: whether it opened a reasoning block."""
        self._prompt = self._decode(prompt_token_ids[-_PROMPT_TAIL:])

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self.set_prompt_token_ids(prompt_token_ids)

    def _forced_open(self, prompt: str | None = None) -> bool:
        return prompt_opens_reasoning(
            self._template.analysis, self._prompt if prompt is None else prompt, self._thinking()
        )

    def adjust_request(self, request: Any) -> Any:
        if hasattr(request, "skip_special_tokens"):
            request.skip_special_tokens = False
        return request

    # -- what the engine asks (structured outputs start after the reasoning) -----------

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        text = self._decode(input_ids[-_PROMPT_TAIL:])
        analysis = self._template.analysis
        if reasoning_closed(text, analysis):
            return True
        # Thinking switched off and no block opened: nothing to wait for.
        return self._thinking() is False and not self._forced_open(text)

    def is_reasoning_end_streaming(
        self, input_ids: Sequence[int], delta_ids: Iterable[int]
    ) -> bool:
        window = len(list(delta_ids)) + _STEP_TAIL
        _, end = reasoning_markers(self._template.analysis)
        text = self._decode(input_ids[-window:])
        return bool(end) and end in text and reasoning_closed(text, self._template.analysis)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        _, end = reasoning_markers(self._template.analysis)
        end_id = self.vocab.get(end) if end else None
        if end_id is None or end_id not in input_ids:
            return input_ids
        last = len(input_ids) - 1 - input_ids[::-1].index(end_id)
        return input_ids[last + 1 :]

    # -- parsing -------------------------------------------------------------------------

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        template = resolve_template(self.model_tokenizer, getattr(request, "chat_template", None))
        options = request_options(request, self._template_kwargs)
        params = params_for(template, options, reasoning=True)
        forced = self._forced_open() if self._prompt else params.thinking_forced_open
        if forced != params.thinking_forced_open:
            # vLLM rendered another prompt than apply() would (a reasoning switch the plugin
            # cannot map, docs/integrations.md): read the output by the prompt vLLM
            # rendered, as the stream does, so nothing is lost between the two.
            split = self._new_split()
            reasoning, rest = split.feed(model_output)
            last_reasoning, last_rest = split.finish()
            return (reasoning + last_reasoning) or None, (rest + last_rest) or None
        message = params.parse(model_output)
        rest = text_after_reasoning(
            model_output, message.reasoning_content, template.analysis, forced
        )
        return message.reasoning_content, rest or None

    def _new_split(self) -> ReasoningSplit:
        """A reasoning split for the prompt vLLM rendered."""
        analysis = self._template.analysis
        start, end = reasoning_markers(analysis)
        forced = self._forced_open()
        return ReasoningSplit(
            start,
            end,
            forced,
            opener_optional=not forced and opener_optional(analysis, self._thinking()),
            stops=wait_stops(analysis),
        )

    def _splitter(self) -> ReasoningSplit:
        if self._split is None:
            self._split = self._new_split()
        return self._split

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> Any:
        return _split_delta(*self._splitter().feed(delta_text))

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._split is not None and self._split.done

    def finish_streaming(self) -> Any:
        """What the split held back when the output ended (an unclosed block)."""
        if self._split is None:
            return None
        return _split_delta(*self._split.finish())
