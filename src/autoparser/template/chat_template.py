"""ChatTemplate: a loaded chat template that renders prompts like transformers does."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from autoparser.errors import TemplateError
from autoparser.template.environment import TemplateRaisedError, make_environment


@dataclasses.dataclass(frozen=True)
class TemplateCaps:
    """What a template can express, found by rendering probe conversations."""

    supports_system_role: bool = True
    supports_tools: bool = False
    supports_tool_calls: bool = False
    supports_parallel_tool_calls: bool = False
    supports_tool_call_id: bool = False
    supports_tool_responses: bool = False
    requires_object_arguments: bool = False
    requires_non_null_content: bool = False
    requires_typed_content: bool = False
    renders_reasoning: bool = False
    supports_thinking_toggle: bool = False


class ChatTemplate:
    """A chat template (Jinja source) plus the special tokens it is rendered with."""

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        name: str | None = None,
    ) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name or "<template>"
        env = make_environment()
        try:
            self._compiled = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"{self.name}: syntax error at line {exc.lineno}: {exc.message}"
            ) from exc

    def render_raw(self, context: Mapping[str, Any]) -> str:
        """Render with exactly the given variables (no normalisation, no polyfills)."""
        variables = {"bos_token": self.bos_token, "eos_token": self.eos_token, **context}
        try:
            return self._compiled.render(**variables)
        except TemplateRaisedError as exc:
            raise TemplateError(f"{self.name}: template raised an exception: {exc}") from exc
        except jinja2.TemplateError as exc:
            line = getattr(exc, "lineno", None)
            where = f" at line {line}" if line else ""
            raise TemplateError(f"{self.name}: render failed{where}: {exc}") from exc
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            raise TemplateError(f"{self.name}: render failed: {type(exc).__name__}: {exc}") from exc

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:
        """Render a conversation (OpenAI-shaped messages) to the prompt text."""
        context: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            **template_kwargs,
        }
        if tools is not None:
            context["tools"] = list(tools)
        return self.render_raw(context)

    @functools.cached_property
    def caps(self) -> TemplateCaps:
        from autoparser.template.caps import detect_caps

        return detect_caps(self)

    def analyze(self) -> Any:
        """The differential analysis of this template (cached per source)."""
        from autoparser.analysis.analyzer import analyze_template

        return analyze_template(self)
