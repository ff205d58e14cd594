"""SGLang's OpenAI-compatible server. Its ``/v1/completions`` takes a grammar as ``ebnf``
(compiled by its grammar backend, xgrammar by default, which reads GBNF) and ignores vLLM's
``structured_outputs``; a choice names the stop string that ended it ``matched_stop``. Its
``/tokenize`` returns no token strings, so the control tokens are told by its batch
``/detokenize``, which drops special tokens with ``skip_special_tokens``. Recognised by
``GET /v1/models``, whose models SGLang lists as ``owned_by: "sglang"``.
"""

from __future__ import annotations

from autoparser.serve.engines.base import EngineInfo, Look
from autoparser.serve.engines.openai import OpenAIStyle


class SGLang(OpenAIStyle):
    """SGLang: the OpenAI-style request with its grammar field, its stop field and health."""

    kind = "sglang"
    health_path = "/health"
    stop_field = "matched_stop"

    @classmethod
    async def detect(cls, look: Look) -> EngineInfo | None:
        owner, model = await cls.owned_by(look)
        return EngineInfo(kind=cls.kind, model=model) if owner == "sglang" else None

    def grammar_fields(self, grammar: str) -> dict[str, object]:
        return {"ebnf": grammar}
