"""vLLM's ToolParser and ReasoningParser, both on autoparser's session API.

vLLM composes the two (``vllm.parser.DelegatingParser``): the reasoning parser splits the
output into reasoning and the text after it, the tool parser reads that text into content
and calls. The reasoning parser splits by the analysis' markers (the block open from the
start when the prompt opened it); the tool parser parses with ``reasoning_format="none"``,
so it reads the same text whether our reasoning parser, another one or none ran before it.
Both stream with ``engine_based_streaming`` so vLLM calls ``finish_streaming`` at the end
of the output, which flushes what the stream parser held back.

Importing this module needs vLLM in the tested range (IntegrationError otherwise). vLLM is
untyped here (its classes are whatever the installed release defines), so requests and
messages are read by attribute, and the bases are vLLM's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

from autoparser import ChatParams, ReasoningSplit, Reply, Session, StreamDelta, merge_deltas
from autoparser.integrations.vllm._compat import check_version
from autoparser.integrations.vllm.session import TokenizerLike, request_options, resolve_template

check_version()

from vllm.entrypoints.generate.base.protocol import (  # noqa: E402 (after the version check)
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning import ReasoningParser  # noqa: E402
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402
from vllm.tool_parsers import ToolParser  # noqa: E402

if TYPE_CHECKING:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

    # The two request kinds vLLM hands its parsers (untyped here: vLLM is not installed
    # where mypy runs).
    Request: TypeAlias = ChatCompletionRequest | ResponsesRequest

# How many trailing tokens are decoded to look for reasoning markers: a prompt's tail holds
# the generation prompt, a decode step's tail the marker just written.
_PROMPT_TAIL = 512
_STEP_TAIL = 16


def _message(delta: StreamDelta | None) -> DeltaMessage | None:
    """A merged stream delta as vLLM's DeltaMessage."""
    if delta is None:
        return None
    calls = [
        DeltaToolCall(
            index=tc.index,
            id=tc.id,
            type="function" if tc.name is not None else None,
            function=DeltaFunctionCall(name=tc.name, arguments=tc.arguments),
        )
        for tc in delta.tool_calls
    ]
    return DeltaMessage(content=delta.content, reasoning=delta.reasoning_content, tool_calls=calls)


def _split_message(reasoning: str, rest: str) -> DeltaMessage | None:
    """A piece of the reasoning split as a vLLM DeltaMessage (None when it holds nothing)."""
    if not (reasoning or rest):
        return None
    return DeltaMessage(reasoning=reasoning or None, content=rest or None)


def _named_or_required(choice: object) -> bool:
    if choice == "required":
        return True
    return getattr(choice, "type", None) == "function" or (
        isinstance(choice, Mapping) and choice.get("type") == "function"
    )


def _session(tokenizer: TokenizerLike, request: Request) -> Session:
    return resolve_template(tokenizer, getattr(request, "chat_template", None))


def _keep_special_tokens(request: Request) -> None:
    """Markers are special tokens: the parsers must see them in the text."""
    if hasattr(request, "skip_special_tokens"):
        request.skip_special_tokens = False


class AutoparserToolParser(ToolParser):  # type: ignore[misc]
    """Tool calls (and the content around them) for any template autoparser can analyse."""

    # Calls are read in the template's own format for every tool_choice; required and named
    # choices are constrained by the grammar adjust_request sets.
    supports_required_and_named = False
    engine_based_streaming = True
    # vLLM sets it when no reasoning parser runs; reasoning then stays in the content, which
    # is what reasoning_format="none" gives anyway.
    skip_reasoning_parsing = False

    def __init__(self, tokenizer: TokenizerLike, tools: object = None) -> None:
        super().__init__(tokenizer, tools)
        # No template, or one that cannot be analysed: fail when vLLM validates the parser
        # at startup, not in a request.
        resolve_template(tokenizer).analysis  # noqa: B018 (analysed now, cached for later)
        self._reply: Reply | None = None

    def _params(self, request: Request, *, reasoning: bool = False) -> ChatParams:
        options = request_options(request, None)
        session = _session(self.model_tokenizer, request)
        return session.params(options, reasoning=reasoning, any_history=True)

    def _new_reply(self, request: Request) -> Reply:
        parallel = getattr(request, "parallel_tool_calls", None)
        self._reply = Reply(self._params(request), parallel_tool_calls=parallel)
        return self._reply

    def adjust_request(self, request: Request) -> Request:
        """Keep special tokens; constrain required/named calls by the grammar."""
        _keep_special_tokens(request)
        if not getattr(request, "tools", None) or not hasattr(request, "response_format"):
            return request
        if not _named_or_required(getattr(request, "tool_choice", None)):
            return request
        # The whole output's grammar (reasoning included), applied from the first token.
        params = self._params(request, reasoning=True)
        if params.grammar and not params.grammar_lazy:
            request.structured_outputs = StructuredOutputsParams(grammar=params.grammar)
            request.response_format = None
            request._grammar_from_parser = True
        return request

    def extract_tool_calls(
        self, model_output: str, request: Request
    ) -> ExtractedToolCallInformation:
        message = self._new_reply(request).parse(model_output)
        calls = [
            ToolCall(
                id=c.id, type="function", function=FunctionCall(name=c.name, arguments=c.arguments)
            )
            for c in message.tool_calls
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
        request: Request,
    ) -> DeltaMessage | None:
        reply = self._reply or self._new_reply(request)
        return _message(merge_deltas(reply.feed(delta_text))) if delta_text else None

    def finish_streaming(self) -> DeltaMessage | None:
        """The deltas the stream held back until the output ended."""
        return None if self._reply is None else _message(merge_deltas(self._reply.finish()))


class AutoparserReasoningParser(ReasoningParser):  # type: ignore[misc]
    """Reasoning for any template autoparser can analyse; the rest goes to the tool parser."""

    engine_based_streaming = True

    def __init__(self, tokenizer: TokenizerLike, *args: object, **kwargs: object) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        given = kwargs.get("chat_template_kwargs")
        self._template_kwargs = dict(given) if isinstance(given, Mapping) else {}
        self._session = resolve_template(tokenizer)
        self._prompt = ""
        self._split: ReasoningSplit | None = None

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

    def adjust_request(self, request: Request) -> Request:
        _keep_special_tokens(request)
        return request

    # -- what the engine asks (structured outputs start after the reasoning) -----------

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        text = self._decode(input_ids[-_PROMPT_TAIL:])
        if self._session.reasoning_closed(text):
            return True
        # Thinking switched off and no block opened: nothing to wait for.
        thinking = self._thinking()
        return thinking is False and not self._session.opens_reasoning(text, thinking)

    def is_reasoning_end_streaming(
        self, input_ids: Sequence[int], delta_ids: Iterable[int]
    ) -> bool:
        window = len(list(delta_ids)) + _STEP_TAIL
        _, end = self._session.reasoning_markers
        text = self._decode(input_ids[-window:])
        return bool(end) and end in text and self._session.reasoning_closed(text)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        _, end = self._session.reasoning_markers
        end_id = self.vocab.get(end) if end else None
        if end_id is None or end_id not in input_ids:
            return input_ids
        last = len(input_ids) - 1 - input_ids[::-1].index(end_id)
        return input_ids[last + 1 :]

    # -- parsing -------------------------------------------------------------------------

    def _new_split(self) -> ReasoningSplit:
        """A reasoning split for the prompt vLLM rendered."""
        return self._session.reasoning_split(self._prompt, self._thinking())

    def extract_reasoning(
        self, model_output: str, request: Request
    ) -> tuple[str | None, str | None]:
        session = _session(self.model_tokenizer, request)
        options = request_options(request, self._template_kwargs)
        params = session.params(options, reasoning=True, any_history=True)
        forced = (
            self._session.opens_reasoning(self._prompt, self._thinking())
            if self._prompt
            else params.thinking_forced_open
        )
        if forced != params.thinking_forced_open:
            # vLLM rendered another prompt than apply() would (a reasoning switch the plugin
            # cannot map, docs/integrations.md): read the output by the prompt vLLM
            # rendered, as the stream does, so nothing is lost between the two.
            reasoning, rest = self._new_split().split(model_output)
            return reasoning or None, rest or None
        message = params.parse(model_output)
        rest = session.text_after_reasoning(model_output, message.reasoning_content, forced)
        return message.reasoning_content, rest or None

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        if self._split is None:
            self._split = self._new_split()
        return _split_message(*self._split.feed(delta_text))

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._split is not None and self._split.done

    def finish_streaming(self) -> DeltaMessage | None:
        """What the split held back when the output ended (an unclosed block)."""
        return None if self._split is None else _split_message(*self._split.finish())
