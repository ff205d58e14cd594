"""vLLM's ToolParser and ReasoningParser, translating vLLM's objects for the engine-neutral
readers of ``autoparser.integrations.adapter`` (vLLM composes the two in
``vllm.parser.DelegatingParser``). Both stream with ``engine_based_streaming``, so vLLM calls
``finish_streaming`` at the end of the output. Importing this module needs vLLM in the
tested range (IntegrationError otherwise); vLLM is untyped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from autoparser import StreamDelta
from autoparser.integrations import adapter
from autoparser.integrations import vllm as plugin
from autoparser.integrations.adapter import ReasoningReader, TokenizerLike, ToolReader

adapter.check_version("vllm", plugin.TESTED_MIN, plugin.TESTED_BELOW, plugin.ANY_VERSION_ENV)

import vllm.entrypoints.generate.base.protocol as api  # noqa: E402 (after the version check)
from vllm.reasoning import ReasoningParser  # noqa: E402
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402
from vllm.tool_parsers import ToolParser  # noqa: E402

# Trailing tokens decoded to look for reasoning markers: a prompt's tail holds the
# generation prompt, a decode step's tail the marker just written.
_PROMPT_TAIL, _STEP_TAIL = 512, 16


def _message(delta: StreamDelta | None) -> api.DeltaMessage | None:
    """A merged delta as vLLM's (pydantic reads the calls from their wire form)."""
    if delta is None:
        return None
    calls = delta.to_openai().get("tool_calls", [])
    return api.DeltaMessage(
        content=delta.content, reasoning=delta.reasoning_content, tool_calls=calls
    )


def _split_message(reasoning: str, rest: str) -> api.DeltaMessage | None:
    return (
        api.DeltaMessage(reasoning=reasoning or None, content=rest or None)
        if reasoning or rest
        else None
    )


def _prepared(request: Any) -> Any:
    """Markers are special tokens: the parsers must see them in the text."""
    if hasattr(request, "skip_special_tokens"):
        request.skip_special_tokens = False
    return request


def _reader(tokenizer: TokenizerLike, request: Any) -> ToolReader:
    return ToolReader(adapter.session_for(tokenizer, request, "vllm"))


class AutoparserToolParser(ToolParser):  # type: ignore[misc]
    """Tool calls (and the content around them) for any template autoparser can analyse;
    required and named choices are constrained by the grammar ``adjust_request`` sets."""

    supports_required_and_named = False
    engine_based_streaming = True
    skip_reasoning_parsing = False

    def __init__(self, tokenizer: TokenizerLike, tools: object = None) -> None:
        super().__init__(tokenizer, tools)
        # A template that cannot be analysed fails at vLLM's startup check, not in a request.
        adapter.resolve_template(tokenizer, engine="vllm").analysis  # noqa: B018
        self._reader: ToolReader | None = None

    def adjust_request(self, request: Any) -> Any:
        if not hasattr(_prepared(request), "response_format"):
            return request
        grammar = _reader(self.model_tokenizer, request).forced_grammar(request)
        if grammar:
            request.structured_outputs = StructuredOutputsParams(grammar=grammar)
            request.response_format = None
            request._grammar_from_parser = True
        return request

    def extract_tool_calls(
        self, model_output: str, request: Any
    ) -> api.ExtractedToolCallInformation:
        self._reader = _reader(self.model_tokenizer, request)
        message = self._reader.parse(request, model_output)
        calls = [
            api.ToolCall(id=c.id, function=api.FunctionCall(name=c.name, arguments=c.arguments))
            for c in message.tool_calls
        ]
        return api.ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=message.content
        )

    def extract_tool_calls_streaming(
        self, previous_text: str, current_text: str, delta_text: str, *rest: Any
    ) -> api.DeltaMessage | None:
        request = rest[-1]
        self._reader = self._reader or _reader(self.model_tokenizer, request)
        return _message(self._reader.feed(request, delta_text))

    def finish_streaming(self) -> api.DeltaMessage | None:
        return None if self._reader is None else _message(self._reader.finish())


class AutoparserReasoningParser(ReasoningParser):  # type: ignore[misc]
    """Reasoning for any template autoparser can analyse; the rest goes to the tool parser."""

    engine_based_streaming = True

    def __init__(self, tokenizer: TokenizerLike, *args: object, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        given = kwargs.get("chat_template_kwargs")
        session = adapter.resolve_template(tokenizer, engine="vllm")
        self._reader = ReasoningReader(session, given if isinstance(given, dict) else None)

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.model_tokenizer.decode(list(ids), skip_special_tokens=False))

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._reader.prompt = self._decode(prompt_token_ids[-_PROMPT_TAIL:])

    adjust_initial_state_from_prompt = set_prompt_token_ids

    def adjust_request(self, request: Any) -> Any:
        return _prepared(request)

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        return self._reader.ended(self._decode(input_ids[-_PROMPT_TAIL:]))

    def is_reasoning_end_streaming(
        self, input_ids: Sequence[int], delta_ids: Iterable[int]
    ) -> bool:
        return self._reader.ended_in(
            self._decode(input_ids[-(len(list(delta_ids)) + _STEP_TAIL) :])
        )

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return self._reader.content_ids(input_ids, self.vocab)

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        session = adapter.session_for(self.model_tokenizer, request, "vllm")
        reader = ReasoningReader(session, self._reader.template_kwargs)
        reader.prompt = self._reader.prompt
        return reader.split(model_output, request)

    def extract_reasoning_streaming(
        self, previous_text: str, current_text: str, delta_text: str, *ids: Any
    ) -> api.DeltaMessage | None:
        return _split_message(*self._reader.feed(delta_text))

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._reader.done

    def get_streaming_fallback_content(self, text: str, request: Any) -> None:
        self._reader.request = request  # the output ended in reasoning: see finish_read

    def finish_streaming(self) -> api.DeltaMessage | None:
        return _message(self._reader.finish_read())
