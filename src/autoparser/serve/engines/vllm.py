"""vLLM's OpenAI-compatible server: ``/v1/completions`` as the OpenAI-style dialect sends it
(vLLM is the engine that dialect's grammar field and stop reason follow), its ``/health``,
and its ``/tokenize``, which returns each token's vocabulary string (``return_token_strs``):
the control tokens are told by their spelling. Recognised by ``GET /v1/models``, whose
models vLLM lists as ``owned_by: "vllm"``.
"""

from __future__ import annotations

from autoparser.serve.engines.base import EngineInfo, Look
from autoparser.serve.engines.openai import OpenAIStyle


class VLLM(OpenAIStyle):
    """vLLM: the OpenAI-style request and readers, its own health route."""

    kind = "vllm"
    health_path = "/health"

    @classmethod
    async def detect(cls, look: Look) -> EngineInfo | None:
        owner, model = await cls.owned_by(look)
        return EngineInfo(kind=cls.kind, model=model) if owner == "vllm" else None
