"""Drive SGLang's own parser classes with autoparser's SGLang plug-in (runs in the SGLang venv).

``python tests/helpers/sglang_driver.py CASES.json RESULTS.json`` (with ``PYTHONPATH=src``),
started by the adapter contract suite in the environment scripts/setup_sglang.sh builds
(SGLang's wheel without its GPU requirements: only its parser modules are imported). The
case format is tests/helpers/vllm_driver.py's. The plug-in is registered as SGLang loads
plug-ins (``sglang.srt.plugins.load_plugins`` over the ``sglang.srt.plugins`` entry point);
then for each case it does what SGLang's chat serving does with ``--reasoning-parser
autoparser --tool-call-parser autoparser``:

- whole output: ``ReasoningParser(...).parse_non_stream``, then, when
  ``FunctionCallParser.has_tool_call``, ``parse_non_stream`` of the text after the reasoning;
- streamed in chunks: ``parse_stream_chunk`` of each, ``parse_stream_end`` at the end, the
  reasoning parser's normal text feeding the function-call parser, call items gathered by
  their index as SGLang's stream does.

``force_reasoning`` is what SGLang decides for a template whose reasoning switch it does not
know (the detector's ``reasoning_default``, ``enable_thinking``): on unless the request's
``chat_template_kwargs.enable_thinking`` is false. Call ids are SGLang's own (not compared).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from entry_points import declare_entry_point


def message_view(reasoning: Any, content: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"reasoning": reasoning or None, "content": content or None, "tool_calls": calls}


def pieces(text: str, cuts: list[int]) -> list[str]:
    """The output cut at the given character positions (modulo its length)."""
    at = sorted({c % len(text) for c in cuts if len(text) > 1} - {0})
    return [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)]


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    tok = SimpleNamespace(
        chat_template=case["template"], bos_token=case["bos"], eos_token=case["eos"]
    )
    req = case["request"]
    tools = [Tool(**t) for t in req.get("tools") or []]
    kwargs = req.get("chat_template_kwargs") or {}
    force = kwargs.get("enable_thinking") is not False
    use_reasoning = case.get("reasoning_parser", True)

    def reasoning_parser(stream: bool) -> Any:
        request = SimpleNamespace(chat_template_kwargs=kwargs)
        return ReasoningParser("autoparser", stream, force, request, tokenizer=tok)

    text = case["text"]
    reasoning, rest = (
        reasoning_parser(False).parse_non_stream(text) if use_reasoning else (None, text)
    )
    calls: list[dict[str, Any]] = []
    tool_parser = FunctionCallParser(tools, "autoparser", tokenizer=tok)
    if tools and tool_parser.has_tool_call(rest or ""):
        rest, items = tool_parser.parse_non_stream(rest or "")
        calls = [{"id": None, "name": c.name, "arguments": c.parameters} for c in items]
    result: dict[str, Any] = {"id": case["id"], "parse": message_view(reasoning, rest, calls)}

    streams = []
    for cuts in case["splits"]:
        rp = reasoning_parser(True) if use_reasoning else None
        fp = FunctionCallParser(tools, "autoparser", tokenizer=tok)
        acc_r, acc_c = [], []
        acc_calls: dict[int, dict[str, Any]] = {}
        chunks = pieces(text, cuts)
        for n, chunk in enumerate(chunks):
            steps = [(chunk, False)] + ([("", True)] if n == len(chunks) - 1 else [])
            for delta, end in steps:
                r, normal = (None, delta) if rp is None else rp.parse_stream_chunk(delta)
                if end and rp is not None:
                    end_r, end_normal = rp.parse_stream_end()
                    r, normal = (r or "") + (end_r or ""), (normal or "") + (end_normal or "")
                acc_r.append(r or "")
                found: list[Any] = []
                if tools:
                    normal, found = fp.parse_stream_chunk(normal or "")
                    if end:
                        end_text, end_calls = fp.parse_stream_end()
                        normal, found = (normal or "") + end_text, [*found, *end_calls]
                acc_c.append(normal or "")
                for item in found:
                    entry = acc_calls.setdefault(
                        item.tool_index, {"id": None, "name": None, "arguments": ""}
                    )
                    entry["name"] = item.name or entry["name"]
                    entry["arguments"] += item.parameters or ""
        streams.append(
            message_view("".join(acc_r), "".join(acc_c), [acc_calls[i] for i in sorted(acc_calls)])
        )
    result["streams"] = streams
    return result


def load_plugin(entry_point: str, work: Path) -> dict[str, bool]:
    """Register the plug-in as SGLang does: its ``sglang.srt.plugins`` entry point (declared
    here in a distribution's metadata, as an installed autoparser has it)."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser
    from sglang.srt.plugins import load_plugins

    def registered() -> bool:
        return "autoparser" in FunctionCallParser.ToolCallParserEnum and (
            "autoparser" in ReasoningParser.DetectorMap
        )

    before = registered()
    declare_entry_point(work, "sglang.srt.plugins", entry_point)
    load_plugins()
    return {"before": before, "entry_point": registered(), "plugin_module": registered()}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    results: list[dict[str, Any]] = [
        {"id": "__plugin__", **load_plugin(spec["entry_point"], Path(sys.argv[2]).parent / "ep")}
    ]
    for case in spec["cases"]:
        try:
            results.append(run_case(case))
        except Exception:
            results.append({"id": case["id"], "error": traceback.format_exc()})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
