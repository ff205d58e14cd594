"""Bad arguments to apply / parse / feed are RequestErrors naming the argument."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.generate_cases import TEMPLATES

from autoparser import ChatTemplate, RequestError

TEMPLATE = ChatTemplate.from_file(TEMPLATES / "formats/qwen3coder_like.jinja")
USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("tools", ["x", {"name": "f"}, [1]])
def test_apply_with_malformed_tools(tools: Any) -> None:
    with pytest.raises(RequestError, match=r"^tools"):
        TEMPLATE.apply(USER, tools=tools)


@pytest.mark.parametrize("messages", ["hi", {"role": "user"}, ["hi"], None])
def test_apply_with_malformed_messages(messages: Any) -> None:
    with pytest.raises(RequestError, match=r"^messages"):
        TEMPLATE.apply(messages)


@pytest.mark.parametrize("text", [b"hi", None, 5])
def test_parse_and_feed_need_a_str(text: Any) -> None:
    params = TEMPLATE.apply(USER)
    with pytest.raises(RequestError, match="model output must be a str"):
        params.parse(text)
    with pytest.raises(RequestError, match="model output must be a str"):
        params.stream().feed(text)
