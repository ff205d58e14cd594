"""Local `$ref` resolution, shared by the grammar converter and the argument typing.

One resolver so that "what does this reference point at" has one answer everywhere: the
grammar of a tagged argument and the decision to write it as raw text must agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoparser.errors import SchemaError


def resolve_ref(ref: object, document: object, where: str = "") -> tuple[str, object]:
    """(JSON pointer, target) of a local reference `#/a/b` inside `document`.

    Raises SchemaError naming the reference and `where` it appears for remote
    references, anchors and pointers to nothing.
    """
    at = where or "#"
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise SchemaError(f"$ref {ref!r} at {at}: only local '#/...' references")
    path = ref[1:]
    if path and not path.startswith("/"):
        raise SchemaError(f"$ref {ref!r} at {at}: anchors are not supported")
    target: object = document
    for raw in path.split("/")[1:] if path else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise SchemaError(f"$ref {ref!r} at {at} points to nothing")
    return path, target
