"""Which hand-written format a template needs, by a fingerprint of its source.

The analysis needs only the names (``TemplateAnalysis.handler``); the handlers themselves
live in ``autoparser.formats``, above ``generate`` whose primitives they build with, and are
listed there under the same names.
"""

from __future__ import annotations

# The handler name of the generated format (``generate.assembly.build_standard``), used
# when the analysis names no hand-written one: every format is dispatched by its name.
STANDARD = ""

# Hand-written formats, by fingerprint: (handler name, substring of the template source).
FINGERPRINTS: tuple[tuple[str, str], ...] = (
    # gpt-oss "harmony": <|start|>assistant<|channel|>analysis<|message|>...; tool calls are
    # addressed by "to=functions.f" in the header, so no marker brackets the call.
    ("harmony", "<|channel|>"),
    # functionary v3.2: ">>>recipient\n" switches between "all" (text) and a function name;
    # the name is itself the delimiter, which the tag families cannot express.
    ("functionary_v3_2", ">>>${recipient}"),
    # gemma-4: call:NAME{key:<|"|>text<|"|>,n:3} -- bare keys, <|"|>-quoted strings, None:
    # the arguments are not JSON, so no generated format can express them.
    ("gemma4", "<|tool_call>call:"),
)


def detect_format(source: str) -> str:
    """The hand-written format whose fingerprint the template source holds ("" if none)."""
    for name, fingerprint in FINGERPRINTS:
        if fingerprint in source:
            return name
    return ""
