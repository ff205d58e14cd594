"""The node visitor (peg/visitor.py): dispatch by node kind, and that every walk over parser
nodes in peg/ and generate/ goes through a visitor (the matcher, each kind's ``_match``,
aside)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoparser.peg import core
from autoparser.peg.visitor import NodeKindError, NodeVisitor

SOURCE = Path(core.__file__).resolve().parent.parent
WALKED = ("peg", "generate")
# What a walk reads of a node to reach the next ones.
NODE_LINKS = frozenset({"child", "items", "alternatives", "target"})


class _Names(NodeVisitor[str]):
    def visit_Literal(self, node: core.Literal) -> str:
        return "literal"

    def visit_Token(self, node: core.Token) -> str:
        return "token"

    def visit_Chars(self, node: core.Chars) -> str:
        return "chars"


def test_dispatch_takes_the_nearest_kind() -> None:
    names = _Names()
    assert names.visit(core.literal("a")) == "literal"
    assert names.visit(core.token("<t>")) == "token"
    assert names.visit(core.any_char()) == "chars"  # AnyChar is a Chars
    assert names.visit(core.space()) == "chars"


def test_a_kind_without_a_handler_and_a_foreign_node_are_refused() -> None:
    with pytest.raises(NodeKindError, match="does not handle Seq"):
        _Names().visit(core.seq("a", "b"))

    class Stray(core.Parser):
        pass

    with pytest.raises(NodeKindError, match="Stray is not a parser node kind"):
        _Names().visit(Stray())


def _is_visitor(cls: ast.ClassDef) -> bool:
    """A class with ``visit_<Kind>`` handlers (defined or assigned)."""
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef) and statement.name.startswith("visit_"):
            return True
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.startswith("visit_") for t in statement.targets
        ):
            return True
    return False


def _links_read(fn: ast.FunctionDef) -> set[str]:
    """The node links a function reads (``.items()``, a dict's method, is not one)."""
    called = {id(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
    return {
        n.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and n.attr in NODE_LINKS
        and not (n.attr == "items" and id(n) in called)
    }


def _recurses(fn: ast.FunctionDef) -> bool:
    """Calls itself, by name or as a method of any object (``child.first_chars()``)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            func = n.func
            if isinstance(func, ast.Name) and func.id == fn.name:
                return True
            if isinstance(func, ast.Attribute) and func.attr == fn.name:
                base = func.value  # super().__init__() is no recursion
                if not (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)):
                    return True
    return False


def walks_outside_visitors(source: str) -> Iterator[str]:
    """Functions of ``source`` that walk parser nodes themselves: outside a visitor class
    (and the matcher, ``_match``), calling ``children()``, or following node links by
    recursion or in a ``while`` loop."""
    tree = ast.parse(source)
    # Module functions a visitor class takes as handlers (``visit_Seq = _seq``).
    handlers = {
        value.id
        for top in tree.body
        if isinstance(top, ast.ClassDef) and _is_visitor(top)
        for statement in top.body
        if isinstance(statement, ast.Assign)
        for value in [statement.value]
        if isinstance(value, ast.Name)
    }
    functions: list[tuple[str, ast.FunctionDef]] = []
    for top in tree.body:
        if isinstance(top, ast.FunctionDef) and top.name not in handlers:
            functions.append(("", top))
        elif isinstance(top, ast.ClassDef) and not _is_visitor(top):
            functions += [(top.name + ".", f) for f in top.body if isinstance(f, ast.FunctionDef)]
    for owner, fn in functions:
        if fn.name == "_match":
            continue
        calls_children = any(
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "children"
            for n in ast.walk(fn)
        )
        links = _links_read(fn)
        loops = any(isinstance(n, ast.While) for n in ast.walk(fn))
        if calls_children or (links and (_recurses(fn) or loops)):
            yield f"{owner}{fn.name}"


def test_every_walk_over_parser_nodes_goes_through_a_visitor() -> None:
    found = [
        f"{path.relative_to(SOURCE)}: {name}"
        for package in WALKED
        for path in sorted((SOURCE / package).glob("*.py"))
        for name in walks_outside_visitors(path.read_text(encoding="utf-8"))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        # The four walks this replaced, in the shapes they had.
        "def fixed_text(node):\n    if isinstance(node, Seq):\n"
        "        return ''.join(fixed_text(i) for i in node.items)\n",
        "def resumable(root):\n    stack = [root]\n    while stack:\n"
        "        stack.extend(stack.pop().children())\n",
        "def single(node):\n    return [single(a) for a in node.alternatives]\n",
        "def lead(node):\n    queue = [node]\n    while queue:\n"
        "        queue.insert(0, queue.pop(0).child)\n",
        "class Seq:\n    def first_chars(self):\n        return self.items[0].first_chars()\n",
    ],
)
def test_the_walk_check_finds_a_planted_walk(source: str) -> None:
    assert list(walks_outside_visitors(source))


def test_the_walk_check_leaves_visitors_matchers_and_dict_items_alone() -> None:
    source = (
        "class Facts:\n    def visit_Seq(self, node):\n"
        "        return all(self.of(i) for i in node.items)\n"
        "    def of(self, node):\n        return self.of(node.child)\n"
        "class Seq:\n    def _match(self, ctx, pos):\n        while True:\n"
        "            return self.items[0]._call(ctx, pos)\n"
        "def freeze(value):\n    return {k: freeze(v) for k, v in value.items()}\n"
        "def _seq(c, node):\n    while True:\n        return node.items\n"
        "class Compiler:\n    visit_Seq = _seq\n"
    )
    assert list(walks_outside_visitors(source)) == []
