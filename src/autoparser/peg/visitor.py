"""Dispatch on the closed set of parser node kinds, below the nodes themselves.

The nodes (``peg.core``) use the facts of ``peg.facts`` to choose alternatives, and those
facts are visitors: so the visitor lives here, under both, and ``peg.core`` registers its
node kinds (``NODE_TYPES``) when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from autoparser.errors import GrammarError

if TYPE_CHECKING:
    from autoparser.peg.core import Parser


class NodeKindError(GrammarError):
    """A parser node of a kind outside ``NODE_TYPES``, or a kind a visitor does not handle."""


_R = TypeVar("_R")
# A visit_<Kind> method as stored in a visitor's table (called with the visitor first).
Handler = Callable[..., Any]

# The node kinds (``peg.core.NODE_TYPES``), registered by ``peg.core``.
_KINDS: set[type] = set()


def register_kinds(kinds: Iterable[type[Parser]]) -> None:
    """Declare the closed set of node kinds that visitors dispatch on."""
    _KINDS.update(kinds)


class NodeVisitor(Generic[_R]):
    """Dispatch on the closed set of node kinds (``NODE_TYPES``), as jinja2's NodeVisitor.

    ``visit(node, *args)`` calls ``visit_<Kind>(node, *args)``: the method named after the
    node's class, else after the nearest node kind it derives from (a Token is handled as a
    Literal unless ``visit_Token`` says otherwise). The method is looked up once per visitor
    class and node class, then read from a dict: one lookup per call, as fast as a table of
    builders. Every pass over a grammar but the matcher (each kind's ``_match``) is one of
    these: the facts of ``peg.facts``, the one-shot compiler, the GBNF emitter and its
    analyses, the leaf regexes; tests/peg/test_core_node_kinds.py checks that each handles
    every kind. A node class outside the set goes to ``foreign`` (an error unless a visitor
    says otherwise).
    """

    __slots__ = ()
    # Per visitor class: node class -> the function that handles it.
    _methods: ClassVar[dict[type, Handler]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {}

    def visit(self, node: Parser, *args: object) -> _R:
        method = self._methods.get(node.__class__)
        if method is None:
            method = type(self).method_for(node.__class__)
        result: _R = method(self, node, *args)
        return result

    @classmethod
    def method_for(cls, kind: type[Parser]) -> Handler:
        """The function handling nodes of class `kind` (raises NodeKindError if none)."""
        found = cls._methods.get(kind)
        if found is not None:
            return found
        if kind not in _KINDS:
            found = cls.foreign
        else:
            names = [f"visit_{base.__name__}" for base in kind.__mro__ if base in _KINDS]
            found = next((getattr(cls, n) for n in names if hasattr(cls, n)), None)
            if found is None:
                raise NodeKindError(f"{cls.__name__} does not handle {kind.__name__} nodes")
        cls._methods[kind] = found
        return found

    def foreign(self, node: Parser, *args: object) -> _R:
        """A node of a class outside ``NODE_TYPES`` (defined elsewhere): refused."""
        raise NodeKindError(
            f"{type(self).__name__}: {type(node).__name__} is not a parser node kind of "
            "autoparser.peg (NODE_TYPES)"
        )


__all__ = ["Handler", "NodeKindError", "NodeVisitor", "register_kinds"]
