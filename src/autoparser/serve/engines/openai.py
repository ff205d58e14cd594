"""Any OpenAI-compatible ``POST /v1/completions`` (TGI, and whatever engine no other dialect
recognises): the dialect the vLLM and SGLang ones build on.

These engines take no lazy grammar, so a grammar is sent only when it applies from the first
token (tool_choice required or named, response_format), as vLLM takes it:
``structured_outputs: {"grammar": ...}``. With tool_choice auto the output is parsed
unconstrained.

With caller spans, an engine whose ``/tokenize`` answers token ids (vLLM's and SGLang's
body) has them checked (``protection.PlainIds``): the prompt goes as text when none would
become a control token, else as ids. Others (TGI, an engine without ``/tokenize``) get the
text; a log line says so once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from autoparser.serve.engines.base import (
    BackendError,
    Channel,
    Dialect,
    EngineInfo,
    Finished,
    Generation,
    Hooks,
    Look,
    Prompt,
    TokenLogprob,
    Tokens,
    logprob_entry,
    token_ids,
    usage,
)

if TYPE_CHECKING:
    from autoparser.serve.openai_format import Usage


class OpenAITokenizer:
    """``POST /tokenize`` and ``/detokenize`` with vLLM's and SGLang's bodies (a
    ``NamingTokenizer``): special tokens always parsed, the token strings asked for (vLLM
    returns them), the detokenizer's batch form (SGLang's: a list per id)."""

    def __init__(self, channel: Channel, model: str) -> None:
        self.channel = channel
        self.model = model
        self.where = f"{channel.url}/tokenize"

    async def tokenize(self, text: str, add_special: bool = False) -> Tokens:
        body = {
            "model": self.model,
            "prompt": text,
            "add_special_tokens": add_special,
            "return_token_strs": True,
        }
        answer = await self.channel.post_json(body, "/tokenize")
        ids = token_ids(answer, self.where)
        strings = answer.get("token_strs") if isinstance(answer, Mapping) else None
        if not isinstance(strings, list) or len(strings) != len(ids):
            return Tokens(ids)
        return Tokens(ids, [s if isinstance(s, str) else "" for s in strings])

    async def detokenize(self, ids: Sequence[int], skip_special: bool) -> list[str]:
        body = {
            "model": self.model,
            "tokens": [[i] for i in ids],
            "skip_special_tokens": skip_special,
        }
        answer = await self.channel.post_json(body, "/detokenize")
        texts = answer.get("text") if isinstance(answer, Mapping) else None
        if not isinstance(texts, list) or len(texts) != len(ids):
            raise BackendError(
                "the engine's detokenizer answered no text list", f"{self.channel.url}/detokenize"
            )
        return [t if isinstance(t, str) else "" for t in texts]


def model_cards(body: object) -> list[Mapping[str, object]]:
    """The model entries of a ``GET /v1/models`` answer (none when it is not one)."""
    data = body.get("data") if isinstance(body, Mapping) else None
    return [m for m in data if isinstance(m, Mapping)] if isinstance(data, list) else []


def completion_logprobs(found: object, top: int) -> list[TokenLogprob] | None:
    """The completions API's ``logprobs`` object (``tokens``, ``token_logprobs``,
    ``top_logprobs``) as one entry per token in OpenAI's chat shape, the alternatives
    most likely first, at most ``top``; None when it is not one."""
    if not isinstance(found, Mapping):
        return None
    tokens, values = found.get("tokens"), found.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list):
        return None
    tops = found.get("top_logprobs")
    tops = tops if isinstance(tops, list) else []
    out: list[TokenLogprob] = []
    for i, (token, value) in enumerate(zip(tokens, values, strict=False)):
        entry = logprob_entry(str(token), value)
        alternatives = tops[i] if i < len(tops) and isinstance(tops[i], Mapping) else {}
        ranked = sorted(alternatives.items(), key=lambda kv: -_number(kv[1]))[:top]
        entry["top_logprobs"] = [logprob_entry(str(t), v) for t, v in ranked]
        out.append(entry)
    return out


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else float("-inf")


class OpenAIStyle(Dialect):
    """``/v1/completions`` as OpenAI specifies it, the fields vLLM and SGLang share, and a
    grammar as vLLM takes it. Matches any engine: the last dialect auto-detection tries."""

    kind = "openai"
    path = "/v1/completions"
    health_path = "/v1/models"
    names_model = True
    stop_field = "stop_reason"  # a choice's field naming the stop string that ended it (vLLM)

    def __init__(self, channel: Channel, model: str = "", hooks: Hooks | None = None) -> None:
        super().__init__(channel, model, hooks)
        from autoparser.serve.engines.protection import PlainIds  # see base: start-up

        self.protection = PlainIds(OpenAITokenizer(channel, model), self.hooks)

    @classmethod
    async def detect(cls, look: Look) -> EngineInfo | None:
        return EngineInfo(kind=cls.kind)

    @classmethod
    async def owned_by(cls, look: Look) -> tuple[str, str]:
        """Who ``GET /v1/models`` says owns the first model (``owned_by``, vLLM and SGLang
        write their names), and its id; ("", "") when it lists none."""
        status, body = await look.get("/v1/models")
        cards = model_cards(body) if status == 200 else []
        if not cards:
            return "", ""
        return str(cards[0].get("owned_by") or ""), str(cards[0].get("id") or "")

    def grammar_fields(self, grammar: str) -> dict[str, object]:
        """The body fields that constrain the output to ``grammar`` (GBNF) from its first
        token."""
        return {"structured_outputs": {"grammar": grammar}}

    def payload(self, gen: Generation, prompt: Prompt, stream: bool) -> dict[str, object]:
        body: dict[str, object] = {
            **gen.sampling,
            "model": self.model,
            "prompt": prompt,
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        # The parser needs the markers (``[TOOL_CALLS]``, ``<|channel|>``...), which are
        # special tokens these engines drop from the text by default, and exactly as
        # written (no spaces added around them).
        body["skip_special_tokens"] = False
        body["spaces_between_special_tokens"] = False
        if gen.max_tokens is not None:
            body["max_tokens"] = gen.max_tokens
        if gen.stop:
            body["stop"] = list(gen.stop)
        if gen.grammar and not gen.grammar_lazy:
            body.update(self.grammar_fields(gen.grammar))
        if gen.logprobs is not None:
            body["logprobs"] = gen.logprobs
        return body

    def read_logprobs(self, body: object, top: int) -> list[TokenLogprob] | None:
        """The first choice's ``logprobs`` of the completions API: ``tokens``,
        ``token_logprobs`` and ``top_logprobs`` (one ``{token: logprob}`` object per
        token, the chosen one included, as vLLM writes it), side by side."""
        choices = body.get("choices") if isinstance(body, Mapping) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        found = choice.get("logprobs") if isinstance(choice, Mapping) else None
        return completion_logprobs(found, top)

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        return {"model": self.model, "prompt": prompt}  # vLLM's /tokenize

    @staticmethod
    def _usage(body: object) -> Usage:
        counts = body.get("usage") if isinstance(body, Mapping) else None
        if not isinstance(counts, Mapping):
            return usage()
        return usage(counts.get("prompt_tokens"), counts.get("completion_tokens"))

    @staticmethod
    def _choice(body: object, where: str) -> Mapping[str, object] | None:
        if not isinstance(body, Mapping) or not isinstance(body.get("choices"), list):
            raise BackendError("the engine's answer has no 'choices' list", where)
        choices = body["choices"]
        if not choices:
            return None
        choice = choices[0]
        if not isinstance(choice, Mapping) or not isinstance(choice.get("text", ""), str):
            raise BackendError("the engine's choices have no 'text' string", where)
        return choice

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        choice = self._choice(body, where)
        if choice is None:
            raise BackendError("the engine's answer has no choices", where)
        word = choice.get(self.stop_field)  # the stop string (or a token id) that ended it
        finished = Finished(
            choice.get("finish_reason") == "length",
            self._usage(body),
            word if isinstance(word, str) else "",
        )
        return str(choice.get("text", "")), finished

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        choice = self._choice(event, where)
        if isinstance(event, Mapping) and isinstance(event.get("usage"), Mapping):
            state["usage"] = event["usage"]
        if choice is None:
            return ""
        if choice.get("finish_reason"):
            state["reason"] = choice["finish_reason"]
            if isinstance(choice.get(self.stop_field), str):
                state["stop_word"] = choice[self.stop_field]
        return str(choice.get("text", ""))

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        return Finished(
            state.get("reason") == "length",
            self._usage(state),  # the last usage an event carried, if any
            str(state.get("stop_word", "")),
        )
