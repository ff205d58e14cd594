"""Agent frameworks nobody here wrote, end to end against ``autoparser serve`` and the
stand-in engine replaying model outputs rendered by the project's templates: the OpenAI
Agents SDK through ``/v1/responses``, pydantic-ai through ``/v1/messages``.

The stand-in answers with the output registered under the last ``[[key]]`` of the prompt.
The first turn's key makes the model call the tool; the tool's result carries the key of
the final answer, so that answer comes back only if the tool was called and its result
reached the prompt.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")
pytest.importorskip("agents", reason="openai-agents is not installed")
pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim[anthropic] is not installed")

import agents
import anthropic
import openai
import pydantic_ai
from helpers.generate_cases import CASE_BY_NAME, TOOLS, call
from helpers.serve_standin import LoopThread, StandIn, as_text
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from autoparser.serve import create_app
from autoparser.serve.app import ServeConfig

ANSWER = "It is sunny in Paris, 21 degrees."


def serve(loop: LoopThread, family: str) -> tuple[StandIn, str]:
    standin = StandIn("llama.cpp")
    config = ServeConfig(loop.serve(standin.app()), template=CASE_BY_NAME[family].load())
    return standin, loop.serve(create_app(config))


def script(standin: StandIn, family: str, tag: str) -> tuple[str, str]:
    """Register the two turns: a get_weather call for Paris, then the answer. Returns the
    key of the first turn and the tool result that carries the second's."""
    case = CASE_BY_NAME[family]
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("get_weather", {"city": "Paris"})],
    }
    if case.reasoning:
        turn["reasoning_content"] = "The user wants the weather."
    first = standin.add(f"{tag}_call", case.output(turn, TOOLS))
    second = standin.add(f"{tag}_answer", case.output({"role": "assistant", "content": ANSWER}))
    return first, f"sunny, 21 degrees {second}"


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
def test_openai_agents_sdk_runs_a_function_tool_through_responses(
    loop: LoopThread, stream: bool
) -> None:
    standin, url = serve(loop, "hermes")
    first, result = script(standin, "hermes", f"agents_{stream}")
    calls: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return result

    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="Answer with the weather.",
        tools=[get_weather],
        model=agents.OpenAIResponsesModel(model="local", openai_client=client),
    )

    async def run() -> Any:
        if not stream:
            return await agents.Runner.run(agent, f"Weather in Paris? {first}")
        streamed = agents.Runner.run_streamed(agent, f"Weather in Paris? {first}")
        async for _ in streamed.stream_events():
            pass
        return streamed

    outcome = asyncio.run(run())
    assert calls == ["Paris"]
    assert outcome.final_output == ANSWER
    assert standin.received[-1][0] == "/completion"
    # the tool's result reached the model
    assert result in as_text(standin.received[-1][1]["prompt"])
    kinds = [item.type for item in outcome.new_items]
    assert kinds == ["tool_call_item", "tool_call_output_item", "message_output_item"]


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
def test_pydantic_ai_runs_a_tool_through_messages(loop: LoopThread, stream: bool) -> None:
    """GLM-like template: the model reasons, then calls the tool; the thinking block goes
    back to the server in the history."""
    standin, url = serve(loop, "glm")
    first, result = script(standin, "glm", f"pai_{stream}")
    calls: list[str] = []
    client = anthropic.AsyncAnthropic(base_url=url, api_key="unused", max_retries=0)
    model = AnthropicModel("local", provider=AnthropicProvider(anthropic_client=client))
    agent = pydantic_ai.Agent(model, instructions="Answer with the weather.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return result

    async def run() -> str:
        if not stream:
            return str((await agent.run(f"Weather in Paris? {first}")).output)
        async with agent.run_stream(f"Weather in Paris? {first}") as streamed:
            return str(await streamed.get_output())

    assert asyncio.run(run()) == ANSWER
    assert calls == ["Paris"]
    prompt = as_text(standin.received[-1][1]["prompt"])
    assert result in prompt
    assert "The user wants the weather." in prompt  # the thinking block came back
