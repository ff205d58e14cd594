"""ChatTemplate: a loaded chat template that renders prompts like transformers does."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.exceptions import SecurityError

from autoparser.errors import AutoparserError, TemplateError, TemplateLimitError
from autoparser.template.environment import (
    TemplateRaisedError,
    make_environment,
    make_mutable_environment,
)
from autoparser.template.loading import (
    DEFAULT_VARIANT,
    TOOL_USE_VARIANT,
    TemplateSource,
    load_path,
    load_pretrained,
)
from autoparser.template.polyfill import apply_polyfills, plain_data, transformers_messages

if TYPE_CHECKING:
    from autoparser.template.caps import TemplateQuirks


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


# A refusal of the immutable sandbox to change a container in place (``list.append`` ...).
_MUTATION_REFUSED = re.compile(r"access to attribute '\w+' of '(?:list|dict|set|deque)' object")


@functools.lru_cache(maxsize=512)
def _compile(source: str, mutable: bool) -> jinja2.Template:
    env = make_mutable_environment() if mutable else make_environment()
    return env.from_string(source)


def _template_line(tb: TracebackType | None) -> int | None:
    """The template line of the innermost frame jinja2 attributed to template code."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class ChatTemplate:
    """A chat template (Jinja source) plus the special tokens it is rendered with.

    ``variants`` holds further named templates from the same model (``tool_use`` ...); the
    variant is chosen per render, as transformers does. ``polyfills`` switches the input
    adaptations of :mod:`autoparser.template.polyfill` on or off by default.
    """

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        name: str | None = None,
        variants: Mapping[str, str] | None = None,
        polyfills: bool = True,
        special_tokens: Mapping[str, str] | None = None,
    ) -> None:
        self.source = source
        # Other named tokens (unk_token, pad_token...) passed to the template, as transformers does.
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name or "<template>"
        self.polyfills = polyfills
        self.variants: dict[str, str] = dict(variants or {})
        self.variants.pop(DEFAULT_VARIANT, None)
        try:
            self._compiled = _compile(source, False)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"{self.name}: syntax error at line {exc.lineno}: {exc.message}"
            ) from exc
        self._variant_templates: dict[str, ChatTemplate] = {}
        self._mutates = False

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r})"

    # ----------------------------------------------------------------- loading

    @classmethod
    def from_source(cls, loaded: TemplateSource, *, polyfills: bool = True) -> ChatTemplate:
        variants = dict(loaded.variants)
        if DEFAULT_VARIANT in variants:
            default = variants.pop(DEFAULT_VARIANT)
        elif len(variants) == 1:
            default = variants.pop(next(iter(variants)))
        else:
            names = ", ".join(sorted(variants))
            raise TemplateError(f"{loaded.name}: several chat templates ({names}), none 'default'")
        return cls(
            default,
            bos_token=loaded.bos_token,
            eos_token=loaded.eos_token,
            name=loaded.name,
            variants=variants,
            polyfills=polyfills,
            special_tokens=loaded.special_tokens,
        )

    @classmethod
    def from_file(cls, path: str | Path, *, polyfills: bool = True) -> ChatTemplate:
        """Load a ``.jinja`` file, a ``tokenizer_config.json``, a model directory or a GGUF."""
        return cls.from_source(load_path(path), polyfills=polyfills)

    @classmethod
    def from_pretrained(
        cls, repo_id: str, revision: str | None = None, *, polyfills: bool = True
    ) -> ChatTemplate:
        """Fetch the template of a Hugging Face Hub model (needs ``huggingface_hub``)."""
        return cls.from_source(load_pretrained(repo_id, revision), polyfills=polyfills)

    def variant(self, name: str) -> ChatTemplate:
        """The named template variant (``tool_use`` ...), with the same special tokens."""
        if name == DEFAULT_VARIANT:
            return self
        if name not in self.variants:
            raise TemplateError(f"{self.name}: no chat template variant {name!r}")
        found = self._variant_templates.get(name)
        if found is None:
            found = ChatTemplate(
                self.variants[name],
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                name=f"{self.name}[{name}]",
                polyfills=self.polyfills,
                special_tokens=self.special_tokens,
            )
            self._variant_templates[name] = found
        return found

    def for_tools(self, tools: object) -> ChatTemplate:
        """The variant transformers would pick: ``tool_use`` when tools are given and exist."""
        if tools is not None and TOOL_USE_VARIANT in self.variants:
            return self.variant(TOOL_USE_VARIANT)
        return self

    # --------------------------------------------------------------- rendering

    def _fail(self, exc: BaseException, what: str) -> TemplateError:
        line = getattr(exc, "lineno", None) or _template_line(exc.__traceback__)
        where = f" at line {line}" if line else ""
        detail = str(exc) or type(exc).__name__
        if not isinstance(exc, (jinja2.TemplateError, TemplateRaisedError)):
            detail = f"{type(exc).__name__}: {detail}"
        return TemplateError(f"{self.name}: {what}{where}: {detail}")

    def _run(self, compiled: jinja2.Template, variables: dict[str, Any]) -> str:
        try:
            return compiled.render(**variables)
        except TemplateRaisedError as exc:
            raise self._fail(exc, "template raised an exception") from exc
        except TemplateLimitError as exc:
            line = _template_line(exc.__traceback__)
            where = f" at line {line}" if line else ""
            raise TemplateLimitError(exc.limit, f"{self.name}{where}: {exc}") from exc
        except AutoparserError:
            raise
        except RecursionError as exc:
            raise self._fail(exc, "render failed (recursion too deep)") from exc
        except Exception as exc:
            raise self._fail(exc, "render failed") from exc

    def render_raw(self, context: Mapping[str, Any]) -> str:
        """Render with exactly the given variables (no normalisation, no polyfills).

        ``bos_token`` and ``eos_token`` default to this template's; ``context`` overrides them.
        A template that mutates a list, which transformers' immutable sandbox refuses, is
        rendered again in a sandbox that allows it (on a private copy of the variables).
        """
        variables = {
            **self.special_tokens,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **context,
        }
        if not self._mutates:
            try:
                return self._run(self._compiled, variables)
            except TemplateError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, SecurityError) and _MUTATION_REFUSED.search(str(cause))):
                    raise
            self._mutates = True  # later renders go straight to the mutable sandbox
        return self._run(_compile(self.source, True), plain_data(variables))

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        *,
        polyfills: bool | None = None,
        **template_kwargs: Any,
    ) -> str:
        """Render a conversation (OpenAI-shaped messages) to the prompt text.

        With polyfills off this is byte-identical to transformers'
        ``apply_chat_template(messages, tools=tools, tokenize=False, ...)``; with them on
        (the default) the messages are first adapted to what the template needs.
        """
        template = self.for_tools(tools)
        use_polyfills = template.polyfills if polyfills is None else polyfills
        prepared: list[dict[str, Any]] = [dict(m) for m in messages]
        tool_list = None if tools is None else [dict(t) for t in tools]
        if use_polyfills:
            prepared, tool_list = apply_polyfills(template, prepared, tool_list)
        context: dict[str, Any] = {
            "messages": transformers_messages(prepared),
            "tools": plain_data(tool_list),
            "documents": None,
            "add_generation_prompt": add_generation_prompt,
            **plain_data(template_kwargs),
        }
        return template.render_raw(context)

    # ------------------------------------------------------------ capabilities

    @functools.cached_property
    def caps(self) -> TemplateCaps:
        """Capabilities of this template; for tool-related fields, of its ``tool_use`` variant."""
        from autoparser.template.caps import detect_caps

        own = detect_caps(self)
        if TOOL_USE_VARIANT not in self.variants:
            return own
        tool = detect_caps(self.variant(TOOL_USE_VARIANT))
        return dataclasses.replace(
            own,
            supports_tools=tool.supports_tools,
            supports_tool_calls=tool.supports_tool_calls,
            supports_parallel_tool_calls=tool.supports_parallel_tool_calls,
            supports_tool_call_id=tool.supports_tool_call_id,
            supports_tool_responses=tool.supports_tool_responses,
            requires_object_arguments=tool.requires_object_arguments,
        )

    @functools.cached_property
    def quirks(self) -> TemplateQuirks:
        """Probed details the polyfills need beyond the public caps (id shape, key names)."""
        from autoparser.template.caps import detect_quirks

        return detect_quirks(self)

    def analyze(self) -> Any:
        """The differential analysis of this template (cached per source)."""
        from autoparser.analysis.analyzer import analyze_template

        return analyze_template(self)

    def apply(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = "auto",
        parallel_tool_calls: bool | None = None,
        response_format: Mapping[str, Any] | None = None,
        enable_thinking: bool | None = None,
        reasoning_format: str = "auto",
        add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> Any:
        """Prompt, grammar and output parser for one request (a ``ChatParams``)."""
        from autoparser.generate import generate

        return generate(
            self,
            messages,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            response_format=response_format,
            enable_thinking=enable_thinking,
            reasoning_format=reasoning_format,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )
