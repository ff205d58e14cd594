"""Shared types of the data that crosses the package's boundaries: JSON, OpenAI messages and
tools, JSON Schema.

The bottom layer: every other module may import it, it imports nothing of the package. The
types say what flows where ``Any`` said nothing: a value only passed through is ``object``, a
read-only input a ``Mapping[str, object]``, JSON built here a ``JsonValue``. The TypedDicts are
``total=False`` where OpenAI or JSON Schema make a field optional; they describe the shape the
package writes, and readers of a caller's data still narrow (a caller may send anything).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, TypedDict

# JSON as ``json.loads`` returns it and ``json.dumps`` accepts it.
JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]
# A read-only object from a caller: keys are strings, values are checked where they are read.
JsonMapping: TypeAlias = Mapping[str, object]


class FunctionCallDict(TypedDict):
    """A call's function as OpenAI writes it: ``arguments`` is the JSON text of an object."""

    name: str
    arguments: str


class ToolCallDict(TypedDict):
    """One entry of an assistant message's ``tool_calls``."""

    id: str
    type: Literal["function"]
    function: FunctionCallDict


class MessageDict(TypedDict, total=False):
    """An OpenAI chat message as the package writes it (templates may read more keys)."""

    role: str
    content: str | None
    reasoning_content: str
    tool_calls: list[ToolCallDict]
    tool_call_id: str
    name: str


class FunctionDict(TypedDict, total=False):
    """A tool's function definition: ``parameters`` is a JSON Schema."""

    name: str
    description: str
    parameters: JsonSchema
    strict: bool


class ToolDict(TypedDict):
    """One entry of a request's ``tools``."""

    type: Literal["function"]
    function: FunctionDict


# JSON Schema is open-ended (any keyword, nested anywhere): an object read key by key.
JsonSchema: TypeAlias = Mapping[str, object]
