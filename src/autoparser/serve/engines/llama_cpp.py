"""llama.cpp's server: its native ``POST /completion``, the one engine API that takes a lazy
grammar with triggers and preserved tokens, so tool_choice auto is constrained too.

Its ``/tokenize`` parses special tokens or not (``parse_special``), which tells exactly where
a text holds a control token: where the two tokenizations differ (``protection.ExactText``).
Recognised by ``GET /props``, which also tells the chat template and special tokens, and
whether a multimodal projector is loaded (``modalities``) with the marker text that stands for
one image in a prompt (``media_marker``; servers older than that field use ``<__media__>``,
libmtmd's default). A prompt with images goes as ``{"prompt_string", "multimodal_data"}``:
the text (special tokens parsed) and the base64 images, one per marker, in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from autoparser.serve.engines.base import (
    BackendError,
    Channel,
    Dialect,
    EngineInfo,
    Finished,
    Generation,
    Hooks,
    Look,
    MediaSupport,
    Prompt,
    TokenLogprob,
    logprob_entry,
    token_ids,
    usage,
)

# llama.cpp's integer trigger kinds (common_grammar_trigger_type): token, word, pattern,
# pattern_full. A "token" trigger needs the token id, which only the engine knows; sent as
# a word, llama.cpp tokenizes it and turns a single preserved token into a token trigger.
LLAMA_TRIGGER_TYPES = {"token": 1, "word": 1, "pattern": 2, "pattern_full": 3}
DEFAULT_MEDIA_MARKER = "<__media__>"  # mtmd_default_marker(), before /props named its own


def media_support(props: Mapping[str, object]) -> MediaSupport | None:
    """What ``/props`` says of media: None when it has no ``modalities`` (a server too old
    to take images in ``/completion``)."""
    modalities = props.get("modalities")
    if not isinstance(modalities, Mapping):
        return None
    marker = props.get("media_marker")
    return MediaSupport(
        marker=marker if isinstance(marker, str) and marker else DEFAULT_MEDIA_MARKER,
        vision=modalities.get("vision") is True,
        audio=modalities.get("audio") is True,
    )


class LlamaCppTokenizer:
    """``POST /tokenize`` as llama.cpp takes it: a mixed array, special tokens parsed or
    not (a ``SplitTokenizer``)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.where = f"{channel.url}/tokenize"

    async def tokenize_many(self, texts: list[str], special: bool) -> list[list[int]]:
        """Each text tokenized, special tokens parsed or not, all in one call: separated by
        a token id (-1) no tokenization yields."""
        if not texts:
            return []
        content: list[str | int] = []
        for text in texts:
            content.extend((text, -1))
        body = {"content": content, "add_special": False, "parse_special": special}
        ids = token_ids(await self.channel.post_json(body, "/tokenize"), self.where)
        out: list[list[int]] = []
        at = 0
        with contextlib.suppress(ValueError):  # cut at each separator, no step per token
            while True:
                cut = ids.index(-1, at)
                out.append(ids[at:cut])
                at = cut + 1
        out.append(ids[at:])
        if len(out) != len(texts) + 1:
            raise BackendError(
                "the engine's tokenizer answered an unexpected token list", self.where
            )
        return out[:-1]


class LlamaCpp(Dialect):
    """llama.cpp server's ``/completion``: ``n_predict``, a lazy GBNF grammar with its
    triggers, preserved tokens; ``content`` pieces and a final ``stop`` event."""

    kind = "llama.cpp"
    path = "/completion"
    health_path = "/health"
    carries_media = True

    def __init__(self, channel: Channel, model: str = "", hooks: Hooks | None = None) -> None:
        super().__init__(channel, model, hooks)
        from autoparser.serve.engines.protection import ExactText  # see base: start-up

        self.protection = ExactText(LlamaCppTokenizer(channel), self.hooks)

    @classmethod
    async def detect(cls, look: Look) -> EngineInfo | None:
        """``GET /props``: llama.cpp's server answers with its chat template and special
        tokens; any other answer (404, not JSON, not an object) means "not llama.cpp"
        (None). A 503 is llama.cpp still loading its model. ``total_slots`` is how many
        requests it runs at once (``--parallel``)."""
        status, body = await look.get("/props")
        if status == 503:
            raise BackendError("the engine is still loading", f"{look.url}/props: HTTP 503", "http")
        if not isinstance(body, Mapping) or not (
            "chat_template" in body or "default_generation_settings" in body
        ):
            return None
        model = body.get("model_alias") or body.get("model_path") or ""
        slots = body.get("total_slots")
        return EngineInfo(
            kind=cls.kind,
            chat_template=str(body.get("chat_template") or ""),
            bos_token=str(body.get("bos_token") or ""),
            eos_token=str(body.get("eos_token") or ""),
            model=str(model).rsplit("/", 1)[-1],
            slots=slots if isinstance(slots, int) and not isinstance(slots, bool) else 0,
            media=media_support(body),
        )

    def payload(self, gen: Generation, prompt: Prompt, stream: bool) -> dict[str, object]:
        sent: object = prompt
        if gen.media:  # the prompt goes as text then (see ``Generation.media``)
            sent = {"prompt_string": gen.prompt, "multimodal_data": list(gen.media)}
        body: dict[str, object] = {**gen.sampling, "prompt": sent, "stream": stream}
        if gen.max_tokens is not None:
            body["n_predict"] = gen.max_tokens
        if gen.stop:
            body["stop"] = list(gen.stop)
        if gen.grammar:
            body["grammar"] = gen.grammar
            body["grammar_lazy"] = gen.grammar_lazy
            if gen.grammar_lazy:
                body["grammar_triggers"] = [
                    {"type": LLAMA_TRIGGER_TYPES[t.kind], "value": t.value}
                    for t in gen.grammar_triggers
                ]
        # A trigger word that is one token must be preserved (llama.cpp refuses it
        # otherwise), and preserved special tokens are the ones it prints as text.
        words = [t.value for t in gen.grammar_triggers if t.kind in ("word", "token")]
        preserved = list(dict.fromkeys([*gen.preserved_tokens, *words]))
        if preserved:
            body["preserved_tokens"] = preserved
        if gen.logprobs is not None:
            # n_probs 0 gives no probabilities at all: the chosen token's comes with one.
            body["n_probs"] = max(gen.logprobs, 1)
        return body

    def read_logprobs(self, body: object, top: int) -> list[TokenLogprob] | None:
        """``completion_probabilities``: per token ``{id, token, bytes, logprob,
        top_logprobs: [{id, token, bytes, logprob}]}`` (a stream event carries its
        token's)."""
        probs = body.get("completion_probabilities") if isinstance(body, Mapping) else None
        if not isinstance(probs, list):
            return None
        out: list[TokenLogprob] = []
        for item in probs:
            if not isinstance(item, Mapping):
                continue
            token = str(item.get("token", ""))
            entry = logprob_entry(token, item.get("logprob"), item.get("bytes"))
            alternatives = item.get("top_logprobs")
            entry["top_logprobs"] = [
                logprob_entry(str(alt.get("token", "")), alt.get("logprob"), alt.get("bytes"))
                for alt in (alternatives if isinstance(alternatives, list) else [])[:top]
                if isinstance(alt, Mapping)
            ]
            out.append(entry)
        return out

    def tokenize_body(self, prompt: Prompt) -> dict[str, object]:
        # as /completion takes a prompt: special tokens added and parsed in template text
        return {"content": prompt, "add_special": True, "parse_special": True}

    @staticmethod
    def _finished(body: Mapping[str, object]) -> Finished:
        counts = usage(body.get("tokens_evaluated"), body.get("tokens_predicted"))
        word = body.get("stopping_word") if body.get("stop_type") == "word" else ""
        return Finished(
            body.get("stop_type") == "limit", counts, word if isinstance(word, str) else ""
        )

    def read_whole(self, body: object, where: str) -> tuple[str, Finished]:
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), str):
            raise BackendError("the engine's answer has no 'content' string", where)
        return body["content"], self._finished(body)

    def read_event(self, event: object, state: dict[str, object], where: str) -> str:
        if not isinstance(event, Mapping) or not isinstance(event.get("content", ""), str):
            raise BackendError("the engine's stream events have no 'content' string", where)
        if event.get("stop"):
            state["end"] = self._finished(event)
        return str(event.get("content", ""))

    def read_end(self, state: dict[str, object], where: str) -> Finished:
        end = state.get("end")
        if not isinstance(end, Finished):
            raise BackendError("the engine's stream ended without its final event", where)
        return end
