"""ChatTemplate: the public facade, on top of every stage.

It loads a template (``template``), analyses it (``analysis``) and, per request, validates
the request once, renders the prompt and builds the parser and grammar (``generate``). The
stages below take plain data (template text, tokens, messages, an analysis, a validated
request), never this object, so none of them imports this module.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from autoparser.analysis import TemplateAnalysis, analyze_template
from autoparser.analysis.analyzer import remember_analysis
from autoparser.analysis.evidence import MarkerEvidence, marker_evidence
from autoparser.analysis.saved import cache_path, load_analysis, save_analysis
from autoparser.errors import AnalysisWarning, TemplateError
from autoparser.generate import normalize_request
from autoparser.generate.request import check_messages
from autoparser.jsontypes import JsonMapping
from autoparser.params import ChatParams, params_for_request
from autoparser.template import (
    Renderer,
    TemplateCaps,
    TemplateQuirks,
    TemplateSource,
    detect_caps,
    detect_quirks,
    render_as_apply,
    template_caps,
)
from autoparser.template.caps import remember_probed
from autoparser.template.environment import Clock
from autoparser.template.loading import (
    DEFAULT_VARIANT,
    TOOL_USE_VARIANT,
    load_path,
    load_pretrained,
)
from autoparser.template.provenance import caller_spans
from autoparser.training import (
    PARTS,
    RenderedPrompt,
    TrainingOptions,
    TrainingSample,
    TrainingSamples,
    assistant_spans,
    checked_training_template,
    sample_skew,
    training_samples,
)
from autoparser.verify import remember_verified, verified

log = logging.getLogger(__name__)

# ``"none" | "auto" | "required"`` or ``{"type": "function", "function": {"name": ...}}``.
ToolChoice = str | JsonMapping | None


class ChatTemplate:
    """A chat template (Jinja source) plus the special tokens it is rendered with.

    ``variants`` holds further named templates from the same model (``tool_use`` ...); the
    variant is chosen per render, as transformers does. ``polyfills`` switches the input
    adaptations of :mod:`autoparser.template.polyfill` on or off by default.

    ``now`` fixes the date templates see (``strftime_now`` and ``date_string``), for
    reproducible prompts; by default they read ``clock`` (a function returning the current
    ``datetime``; the wall clock when None) and ``date_string`` is left undefined, as in
    transformers. ``render(..., now=...)``/``apply(..., now=...)`` override it.

    A template that cannot render without a conventional variable nobody passes (the tools
    as ``functions`` JSON text, the date as ``datetime`` or ``current_date``) gets its
    conventional value, dated by the same clock; a value in ``template_kwargs`` wins, and a
    template that renders without them is rendered exactly as transformers does.

    ``analysis_cache`` is a directory where the analysis is saved the first time it is
    computed and read back from by later processes (see :mod:`autoparser.analysis.saved`:
    a stale or corrupt file is ignored and replaced); None keeps it in memory only. The
    template's compiled code is kept there too (its ``code/`` folder, private to the user:
    see :mod:`autoparser.template.compiled`), so a later process neither analyses nor
    compiles the text again.
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
        now: datetime | None = None,
        clock: Clock | None = None,
        analysis_cache: str | Path | None = None,
    ) -> None:
        self.source = source
        self.analysis_cache = None if analysis_cache is None else Path(analysis_cache)
        self._cache_consulted = False
        self.now = now
        self.clock = clock
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name or "<template>"
        self.polyfills = polyfills
        self.variants: dict[str, str] = dict(variants or {})
        self.variants.pop(DEFAULT_VARIANT, None)
        self.renderer = Renderer(
            source,
            bos_token=bos_token,
            eos_token=eos_token,
            name=self.name,
            special_tokens=self.special_tokens,
            now=now,
            clock=clock,
            code_cache=self.analysis_cache,
        )
        self._variant_templates: dict[str, ChatTemplate] = {}
        self._warned = False  # AnalysisWarning is emitted once per template, not per request

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r})"

    # ----------------------------------------------------------------- loading

    @classmethod
    def from_source(
        cls,
        loaded: TemplateSource,
        *,
        polyfills: bool = True,
        analysis_cache: str | Path | None = None,
    ) -> ChatTemplate:
        """A template from loaded model files: the 'default' (or only) variant, the others
        reachable through :meth:`variant`, with the files' BOS/EOS and special tokens."""
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
            analysis_cache=analysis_cache,
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        polyfills: bool = True,
        analysis_cache: str | Path | None = None,
    ) -> ChatTemplate:
        """Load a ``.jinja`` file, a ``tokenizer_config.json``, a model directory or a GGUF
        (``analysis_cache``: a directory to save the analysis in, see the class)."""
        return cls.from_source(load_path(path), polyfills=polyfills, analysis_cache=analysis_cache)

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        revision: str | None = None,
        *,
        polyfills: bool = True,
        analysis_cache: str | Path | None = None,
    ) -> ChatTemplate:
        """Fetch the template of a Hugging Face Hub model (needs ``huggingface_hub``;
        ``analysis_cache`` as for ``from_file``)."""
        return cls.from_source(
            load_pretrained(repo_id, revision), polyfills=polyfills, analysis_cache=analysis_cache
        )

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
                now=self.now,
                clock=self.clock,
                analysis_cache=self.analysis_cache,
            )
            self._variant_templates[name] = found
        return found

    def for_tools(self, tools: object) -> ChatTemplate:
        """The variant transformers would pick: ``tool_use`` when tools are given and exist."""
        if tools is not None and TOOL_USE_VARIANT in self.variants:
            return self.variant(TOOL_USE_VARIANT)
        return self

    # --------------------------------------------------------------- rendering

    def render_raw(self, context: Mapping[str, object]) -> str:
        """Render with exactly the given variables (no normalisation, no polyfills)."""
        return self.renderer.render_raw(context)

    def render(
        self,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None = None,
        add_generation_prompt: bool = True,
        *,
        polyfills: bool | None = None,
        now: datetime | None = None,
        **template_kwargs: object,
    ) -> str:
        """Render a conversation (OpenAI-shaped messages) to the prompt text.

        With polyfills off this is byte-identical to transformers'
        ``apply_chat_template(messages, tools=tools, tokenize=False, ...)``; with them on
        (the default) the messages are first adapted to what the template needs.
        """
        return self._render(messages, tools, add_generation_prompt, polyfills, template_kwargs, now)

    def _render(
        self,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None,
        add_generation_prompt: bool,
        polyfills: bool | None,
        template_kwargs: Mapping[str, object],
        now: datetime | None = None,
    ) -> str:
        template = self.for_tools(tools)
        use_polyfills = template.polyfills if polyfills is None else polyfills
        renderer = template.renderer
        if use_polyfills:
            caps, quirks = detect_caps(renderer), detect_quirks(renderer)
            return render_as_apply(
                renderer,
                caps,
                quirks,
                messages,
                tools,
                add_generation_prompt,
                now=now,
                **template_kwargs,
            )
        prepared = [dict(m) for m in messages]
        tool_list = None if tools is None else [dict(t) for t in tools]
        return renderer.render(
            prepared, tool_list, add_generation_prompt, now=now, **template_kwargs
        )

    def render_spans(
        self,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None = None,
        add_generation_prompt: bool = False,
        *,
        polyfills: bool | None = None,
        now: datetime | None = None,
        **template_kwargs: object,
    ) -> RenderedPrompt:
        """:meth:`render` plus the character spans the model generated, per assistant turn.

        For training on assistant turns only; what a span covers is in
        :mod:`autoparser.training` and docs/training.md.
        """

        def render(part: Sequence[JsonMapping], agp: bool) -> str:
            return self._render(part, tools, agp, polyfills, template_kwargs, now)

        text = render(messages, add_generation_prompt)
        analysis = self.for_tools(tools).analyze()
        spans = assistant_spans(
            text,
            messages,
            render,
            analysis.end_of_turn,
            analysis.generation_prompt,
            add_generation_prompt,
        )
        return RenderedPrompt(text, spans)

    def training_samples(
        self,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None = None,
        *,
        parts: Sequence[str] = tuple(sorted(PARTS)),
        turns: str = "all",
        end_of_turn: bool = True,
        split: str = "auto",
        check: bool = True,
        polyfills: bool | None = None,
        now: datetime | None = None,
        **template_kwargs: object,
    ) -> TrainingSamples:
        """The samples to train on for a conversation, and the character spans to train.

        One sample (the whole render) where history renders stably; one per assistant turn,
        each the exact prompt the model was given plus what it generated, where the template
        rewrites history (Qwen3 and DeepSeek drop earlier reasoning). ``parts`` (content,
        reasoning, tool_calls), ``turns`` ("all" or "last") and ``end_of_turn`` choose what is
        trained; ``check`` compares each sample with the inference renders of its prompt and
        generation (:meth:`sample_skew`). See :mod:`autoparser.training` and docs/training.md.
        """
        chosen = frozenset((parts,) if isinstance(parts, str) else parts)  # one part as a name
        options = TrainingOptions(chosen, turns, end_of_turn, split, check)
        analysis = self.for_tools(tools).analyze()
        return training_samples(
            messages,
            self._prefix_renderer(tools, polyfills, template_kwargs, now),
            options,
            analysis.end_of_turn,
            analysis.generation_prompt,
        )

    def sample_skew(
        self,
        sample: TrainingSample,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None = None,
        *,
        polyfills: bool | None = None,
        now: datetime | None = None,
        **template_kwargs: object,
    ) -> list[str]:
        """How a training sample (ours, or text and turns made by another engine) differs
        from this template's inference prompt plus generation, per turn; empty when it
        matches byte for byte."""
        return sample_skew(
            sample,
            messages,
            self._prefix_renderer(tools, polyfills, template_kwargs, now),
            self.for_tools(tools).analyze().end_of_turn,
        )

    def _prefix_renderer(
        self,
        tools: Sequence[JsonMapping] | None,
        polyfills: bool | None,
        template_kwargs: Mapping[str, object],
        now: datetime | None,
    ) -> Callable[[Sequence[JsonMapping], bool], str]:
        def render(part: Sequence[JsonMapping], agp: bool) -> str:
            return self._render(part, tools, agp, polyfills, template_kwargs, now)

        return render

    def training_template(self) -> str:
        """This template with ``{% generation %}`` blocks marking :meth:`render_spans`' spans.

        It renders byte-identically to this one (checked on conversations with content,
        reasoning, tool calls and several turns); ExportError says why when it cannot.
        """

        def render(
            source: str,
            messages: Sequence[JsonMapping],
            tools: Sequence[JsonMapping] | None,
            agp: bool,
        ) -> str:
            renderer = Renderer(
                source,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                name=self.name,
                special_tokens=self.special_tokens,
                now=self.now,
                clock=self.clock,
            )
            return renderer.render(messages, tools, agp)

        analysis = self.analyze()
        return checked_training_template(
            self.source, render, analysis.end_of_turn, analysis.generation_prompt
        )

    # ------------------------------------------------------------ capabilities

    @functools.cached_property
    def caps(self) -> TemplateCaps:
        """Capabilities of this template; for tool-related fields, of its ``tool_use`` variant."""
        tool_use = None
        if TOOL_USE_VARIANT in self.variants:
            tool_use = self.variant(TOOL_USE_VARIANT).renderer
        return template_caps(self.renderer, tool_use)

    @functools.cached_property
    def quirks(self) -> TemplateQuirks:
        """Probed details the polyfills need beyond the public caps (id shape, key names)."""
        return detect_quirks(self.renderer)

    # ------------------------------------------------------ analysis, requests

    def marker_evidence(self) -> tuple[MarkerEvidence, ...]:
        """For each marker of the analysis, the two probe renders whose difference shows
        it: how the analysis found it (the studio's "how it was found")."""
        return marker_evidence(self.renderer, self.analyze())

    def analyze(self) -> TemplateAnalysis:
        """The differential analysis of this template (cached per source), verified.

        ``verification`` says whether the parser built from it reads back the template's own
        renders (see :mod:`autoparser.verify`); ``apply`` warns when it does not.
        """
        if self.analysis_cache is not None and not self._cache_consulted:
            self._cache_consulted = True
            path = cache_path(self.analysis_cache, self.renderer)
            if not self.load_analysis(path):
                analysis = verified(self.renderer, analyze_template(self.renderer))
                try:
                    save_analysis(path, self.renderer, analysis)
                except OSError as exc:  # a read-only or full disk costs the next process only
                    log.warning("analysis not saved to %s: %s", path, type(exc).__name__)
                return analysis
        return verified(self.renderer, analyze_template(self.renderer))

    def save_analysis(self, path: str | Path) -> Path:
        """Write this template's (verified) analysis to a JSON file, keyed by the template's
        hash, the library's version and, for a template that prints the date, the date."""
        return save_analysis(path, self.renderer, self.analyze())

    def load_analysis(self, path: str | Path) -> bool:
        """Use the analysis saved at ``path`` when it was saved for this template, by this
        version (today, for a dated template); False when there is none to use (a stale or
        corrupt file is ignored and logged), and ``analyze()`` computes it as before."""
        saved = load_analysis(path, self.renderer)
        if saved is None:
            return False
        remember_probed(self.renderer, saved.caps, saved.quirks)
        checked = saved.analysis
        plain = remember_analysis(self.renderer, dataclasses.replace(checked, verification=None))
        remember_verified(self.renderer, plain, checked)
        return True

    def _warn_unverified(self, analysis: TemplateAnalysis) -> None:
        check = analysis.verification
        if self._warned or check is None or check.verified:
            return
        self._warned = True
        warnings.warn(
            f"{self.name}: the template analysis did not verify, parsed output may be wrong "
            f"({check.summary()})",
            AnalysisWarning,
            stacklevel=3,
        )

    def apply(
        self,
        messages: Sequence[JsonMapping],
        tools: Sequence[JsonMapping] | None = None,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool | None = None,
        response_format: JsonMapping | None = None,
        enable_thinking: bool | None = None,
        reasoning_format: str = "auto",
        add_generation_prompt: bool = True,
        *,
        call_id_seed: int | None = None,
        polyfills: bool | None = None,
        now: datetime | None = None,
        calls_in_reasoning: bool = False,
        reasoning_budget: int | None = None,
        provenance: bool = False,
        **template_kwargs: object,
    ) -> ChatParams:
        """Prompt, grammar and output parser for one request.

        The request options are validated (``RequestError`` naming the field) before
        anything is rendered; ``call_id_seed`` makes generated call ids reproducible;
        ``polyfills`` overrides the template's default as in :meth:`render`;
        ``calls_in_reasoning=True`` reads tool calls the model writes inside its reasoning
        as calls and goes on with the reasoning after them (default: a whole call before
        the reasoning closes ends the reasoning there; see
        docs/streaming.md); ``reasoning_budget`` bounds the reasoning the grammar lets
        the model write, in characters (``None``: unbounded; see docs/grammar.md);
        ``provenance=True`` fills ``caller_spans``, where the caller's
        text is in the prompt (see :mod:`autoparser.template.provenance`).
        """
        check_messages(messages)  # a malformed request is a RequestError before anything renders
        analysis = self.analyze()
        self._warn_unverified(analysis)
        request = normalize_request(
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            response_format=response_format,
            enable_thinking=enable_thinking,
            reasoning_format=reasoning_format,
            template_supports_parallel=analysis.tools.parallel_calls,
            calls_in_reasoning=calls_in_reasoning,
            reasoning_budget=reasoning_budget,
        )
        if enable_thinking is not None:
            # Mapped onto the template's own switch; a caller's explicit kwargs win.
            template_kwargs.setdefault("enable_thinking", enable_thinking)
            switch = analysis.reasoning.switch
            if switch is not None:
                messages = switch.switch(messages, template_kwargs, enable_thinking)
        render_tools = list(tools) if tools else None
        prompt = self._render(
            messages, render_tools, add_generation_prompt, polyfills, template_kwargs, now
        )
        generation_prompt: str | Callable[[], str] = ""
        if add_generation_prompt:
            # Found when first read (another render of everything, tools and all): copies of
            # the lists, so that a caller appending to them later changes nothing.
            asked = (list(messages), render_tools and list(render_tools), dict(template_kwargs))

            def found() -> str:
                base = self._render(asked[0], asked[1], False, polyfills, asked[2], now)
                return prompt[len(base) :] if prompt.startswith(base) else ""

            generation_prompt = found
        params = params_for_request(
            analysis,
            request,
            prompt=prompt,
            generation_prompt=generation_prompt,
            call_id_seed=call_id_seed,
        )
        if not provenance:
            return params

        def render(marked: Sequence[JsonMapping]) -> str:
            return self._render(
                marked, render_tools, add_generation_prompt, polyfills, template_kwargs, now
            )

        spans = caller_spans(render, messages, prompt)
        return dataclasses.replace(params, caller_spans=spans)
