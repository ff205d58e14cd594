"""SGLang's function-call detector and reasoning detector, translating SGLang's objects for
the engine-neutral readers of ``autoparser.integrations.adapter``.

SGLang gives its detectors the server's tokenizer (whose ``chat_template`` is the template,
unless ``$AUTOPARSER_CHAT_TEMPLATE`` names another) and, per call, the request's tools; the
reasoning detector learns from SGLang whether this request reasons (``force_reasoning``) and
the library decides from the template where the output starts. Importing this module needs
SGLang in the tested range (IntegrationError otherwise); SGLang is untyped here.
"""

from __future__ import annotations

from typing import Any

from autoparser import Session, StreamDelta
from autoparser.integrations import adapter
from autoparser.integrations import sglang as plugin
from autoparser.integrations.adapter import ReasoningReader, ToolReader

adapter.check_version("sglang", plugin.TESTED_MIN, plugin.TESTED_BELOW, plugin.ANY_VERSION_ENV)

from sglang.srt.function_call import core_types  # noqa: E402 (after the version check)
from sglang.srt.function_call.base_format_detector import BaseFormatDetector  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser import reasoning_parser  # noqa: E402


def _request(tools: list[Any] | None) -> dict[str, object]:
    """What SGLang tells a detector of the request, as the OpenAI request dict."""
    return {"messages": [], "tools": adapter.plain(tools) or None, "tool_choice": "auto"}


def _result(delta: StreamDelta | None) -> Any:
    calls = [
        core_types.ToolCallItem(tool_index=c.index, name=c.name, parameters=c.arguments or "")
        for c in (delta.tool_calls if delta else ())
    ]
    return core_types.StreamingParseResult(normal_text=(delta and delta.content) or "", calls=calls)


class AutoparserDetector(BaseFormatDetector):  # type: ignore[misc]
    """Tool calls (and the content around them) for any template autoparser can analyse, in
    the template's own format for every ``tool_choice`` (SGLang adds no constraint)."""

    def __init__(self, tokenizer: Any = None, **_: object) -> None:
        super().__init__()
        self._tokenizer = tokenizer
        self._reader: ToolReader | None = None

    @property
    def session(self) -> Session:
        return adapter.resolve_template(self._tokenizer, engine="sglang")

    def has_tool_call(self, text: str) -> bool:
        return ToolReader(self.session).may_hold_calls()

    def detect_and_parse(self, text: str, tools: list[Any]) -> Any:
        message = ToolReader(self.session).parse(_request(tools), text)
        where = {t.function.name: i for i, t in enumerate(tools or [])}
        calls = [
            core_types.ToolCallItem(
                tool_index=where.get(c.name, -1), name=c.name, parameters=c.arguments
            )
            for c in message.tool_calls
        ]
        return core_types.StreamingParseResult(normal_text=message.content or "", calls=calls)

    def parse_streaming_increment(self, new_text: str, tools: list[Any]) -> Any:
        self._reader = self._reader or ToolReader(self.session)
        return _result(self._reader.feed(_request(tools), new_text))

    def finish(self, tools: list[Any]) -> Any:
        return _result(None if self._reader is None else self._reader.finish())

    def supports_structural_tag(self) -> bool:
        return False

    def parses_required_natively(self) -> bool:
        return True

    def structure_info(self) -> Any:
        raise NotImplementedError("autoparser reads the template's own call format")


class AutoparserReasoningDetector(reasoning_parser.BaseReasoningFormatDetector):  # type: ignore[misc]
    """Reasoning for any template autoparser can analyse; the rest goes to the tool detector."""

    def __init__(
        self, tokenizer: Any = None, force_reasoning: bool | None = None, **kwargs: Any
    ) -> None:
        session = adapter.resolve_template(tokenizer, engine="sglang")
        start, end = session.reasoning_markers
        super().__init__(
            start,
            end,
            force_reasoning=bool(force_reasoning),
            reasoning_default="enable_thinking",
            stream_reasoning=kwargs.get("stream_reasoning", True),
        )
        # SGLang decides whether this request reasons; the template, where the output starts.
        switch = {} if force_reasoning is None else {"enable_thinking": force_reasoning}
        self._reader = ReasoningReader(session, switch)

    @staticmethod
    def _result(reasoning: str | None, rest: str | None) -> Any:
        return reasoning_parser.StreamingParseResult(normal_text=rest, reasoning_text=reasoning)

    def detect_and_parse(self, text: str) -> Any:
        return self._result(*self._reader.split(text))

    def parse_streaming_increment(self, new_text: str) -> Any:
        return self._result(*self._reader.feed(new_text))

    def finish(self) -> Any:
        return self._result(*self._reader.finish())


def register() -> None:
    """Add the two detectors to SGLang's parser tables (the entry point; idempotent)."""
    FunctionCallParser.ToolCallParserEnum[plugin.NAME] = AutoparserDetector
    reasoning_parser.ReasoningParser.DetectorMap[plugin.NAME] = AutoparserReasoningDetector
