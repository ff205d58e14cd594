"""The package's shape: declared layers that every import follows, no import cycles,
precisely typed public entry points.

The import graph is read with ``ast`` from every module of ``src/autoparser``: imports at
module level and inside functions count (a function-level import still needs the other module
to be importable at call time), and so does ``importlib.import_module("autoparser....")`` (a
call with anything but a literal name is itself a failure: the test could not check it).
Importing ``a.b.c`` also runs ``a/b/__init__.py``, so an import reaching into another package
adds an edge to that package's ``__init__`` too (never to the package holding the importer,
nor to the root ``autoparser``, whose ``__init__`` only re-exports the public API).

``LAYERS`` is the one list of the package's layers, bottom first; docs/architecture.md draws
it (``layer_diagram``, checked verbatim). A module belongs to the longest entry naming it or
a package holding it (the root ``autoparser`` names only its own ``__init__``). An import
must reach a strictly lower layer, or stay inside its own entry: an import up, or sideways
to another entry of the same layer, fails. Imports under ``if TYPE_CHECKING:`` follow the
same order (a type a lower layer needs belongs to a lower layer); the cycle check alone skips
them, since they never run. The outward faces (``FACES``) import only the public API, the
root ``autoparser``, besides their own package.
"""

from __future__ import annotations

import ast
import inspect
import typing
from pathlib import Path

import pytest

import autoparser
from autoparser import ChatTemplate

ROOT = Path(autoparser.__file__).parent
PACKAGE = "autoparser"

# The package's layers, bottom first. Entries of one layer never import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("jsontypes",),
    ("errors", "examples"),
    ("tags", "message", "gbnf_text", "cache", "cancel"),
    ("schema",),
    ("peg",),
    ("definition",),
    ("stream",),
    ("template.limits", "template.loading"),
    ("template.environment",),
    ("template.compiled", "template.conventions", "template.messages"),
    ("template.renderer", "template.switches"),
    ("template.probe",),
    ("template.caps",),
    ("template.polyfill",),
    ("template",),
    ("analysis",),
    ("generate",),
    ("formats",),
    ("params",),
    ("verify", "training"),
    ("chat",),
    ("session",),
    ("autoparser",),
    ("serve", "integrations", "studio"),
    ("cli",),
    ("__main__",),
)
# Outward faces: on top of the library, through its public API only.
FACES = ("serve", "integrations", "studio")


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _dynamic_import(node: ast.AST) -> ast.expr | None:
    """The name argument of an ``importlib.import_module(...)`` or ``__import__(...)`` call."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "import_module":
        return node.args[0]
    if isinstance(func, ast.Name) and func.id in ("import_module", "__import__"):
        return node.args[0]
    return None


def _imported_names(
    tree: ast.Module,
    module: str,
    is_package: bool,
    modules: set[str],
    type_checking: bool = False,
) -> set[str]:
    """Absolute names of the modules ``module`` imports (under ``TYPE_CHECKING`` blocks too
    when ``type_checking``); a dynamic import whose name is not a literal is reported as
    ``"<dynamic>"``.

    ``from pkg import name`` imports ``pkg.name`` when that is a module, else takes ``name``
    from ``pkg/__init__.py`` (a dependency on the package itself).
    """
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        dynamic = _dynamic_import(node)
        if dynamic is not None:
            if isinstance(dynamic, ast.Constant) and isinstance(dynamic.value, str):
                found.add(dynamic.value)
            else:
                found.add("<dynamic>")
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports (see the module docstring for the rules);
    ``"<dynamic>"`` among them for an import the reader could not name."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges: set[str] = set()
        names = _imported_names(tree, name, path.name == "__init__.py", set(modules), type_checking)
        if "<dynamic>" in names:
            edges.add("<dynamic>")
        for target in names:
            if target not in modules:
                continue
            edges.add(target)
            parts = target.split(".")
            for depth in range(2, len(parts)):
                ancestor = ".".join(parts[:depth])
                if not (name == ancestor or name.startswith(ancestor + ".")):
                    edges.add(ancestor)
        edges.discard(name)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete loop through a component's first module, to show in the failure."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if child not in parents:
                parents[child] = node
                queue.append(child)
    return component


def _entry_name(entry: str) -> str:
    return PACKAGE if entry == PACKAGE else f"{PACKAGE}.{entry}"


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, entry) of a module: the longest entry naming it or a package above it."""
    best: tuple[int, str] | None = None
    for index, layer in enumerate(LAYERS):
        for entry in layer:
            name = _entry_name(entry)
            inside = module == name or (name != PACKAGE and module.startswith(name + "."))
            if inside and (best is None or len(name) > len(_entry_name(best[1]))):
                best = (index, entry)
    if best is None:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it")
    return best


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes up, sideways, past the public API from a face, or cannot be read."""
    found = []
    for module in sorted(graph):
        level, entry = layer_of(module)
        for target in sorted(graph[module]):
            if target == "<dynamic>":
                found.append(f"{module}: a dynamic import of a name that is not a literal")
                continue
            target_level, target_entry = layer_of(target)
            if target_entry == entry:
                continue
            if entry in FACES and target != PACKAGE:
                found.append(f"{module} -> {target}: a face uses only the public API")
            elif target_level > level:
                found.append(f"{module} -> {target}: up ({entry} below {target_entry})")
            elif target_level == level:
                found.append(f"{module} -> {target}: sideways ({entry} beside {target_entry})")
    return found


def layer_diagram() -> str:
    """The layers as docs/architecture.md draws them, top first."""
    width = max(len(" ".join(layer)) for layer in LAYERS)
    lines = [f"{' │ '.join(layer):^{width + 10}}".rstrip() for layer in reversed(LAYERS)]
    return "\n".join(lines)


def test_every_module_is_in_a_layer_and_every_entry_names_modules() -> None:
    modules = _modules()
    for module in modules:
        layer_of(module)
    for layer in LAYERS:
        for entry in layer:
            name = _entry_name(entry)
            assert any(m == name or m.startswith(name + ".") for m in modules), entry


def test_imports_follow_the_declared_layers() -> None:
    graph = import_graph(type_checking=True)
    violations = layer_violations(graph)
    assert not violations, f"{len(violations)} import(s) against LAYERS:\n" + "\n".join(violations)


def test_the_layer_check_catches_up_sideways_face_and_dynamic_imports() -> None:
    graph = {
        "autoparser.errors": {"autoparser.peg.core"},  # up
        "autoparser.tags": {"autoparser.message"},  # sideways
        "autoparser.serve.app": {"autoparser.stream"},  # a face past the public API
        "autoparser.chat": {"<dynamic>", "autoparser.errors"},
        "autoparser.peg.core": {"autoparser.peg.status", "autoparser.schema"},  # fine
    }
    violations = layer_violations(graph)
    assert [v.split(":")[0] for v in violations] == [
        "autoparser.chat",
        "autoparser.errors -> autoparser.peg.core",
        "autoparser.serve.app -> autoparser.stream",
        "autoparser.tags -> autoparser.message",
    ]


def test_the_reader_names_importlib_imports() -> None:
    source = (
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module('autoparser.serve.app')\n"
        "    importlib.import_module(name)\n"
    )
    names = _imported_names(ast.parse(source), "autoparser.cli", False, set())
    assert {"autoparser.serve.app", "<dynamic>"} <= names


def test_docs_draw_the_declared_layers() -> None:
    docs = (ROOT.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert layer_diagram() in docs, "docs/architecture.md: redraw the layers:\n" + (layer_diagram())


def test_the_graph_reader_sees_imports_and_skips_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "from ..other.mod import thing\n"
        "import autoparser.errors\n"
        "if TYPE_CHECKING:\n"
        "    from autoparser.hidden import X\n"
        "def f():\n"
        "    from autoparser.late import Y\n"
    )
    known = {"autoparser.pkg.sibling"}
    names = _imported_names(ast.parse(source), "autoparser.pkg.mod", False, known)
    assert "autoparser.pkg" not in names  # only its submodule was imported
    assert {
        "autoparser.pkg.sibling",
        "autoparser.other.mod",
        "autoparser.errors",
        "autoparser.late",
    } <= names
    assert "autoparser.hidden" not in names


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert _cycle_path(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles_between_package_modules() -> None:
    graph = {m: edges - {"<dynamic>"} for m, edges in import_graph().items()}
    assert len(graph) > 30  # the walk found the package
    cycles = import_cycles(graph)
    report = [
        f"{len(c)} modules: {', '.join(c)}\n    e.g. {' -> '.join(_cycle_path(graph, c))}"
        for c in cycles
    ]
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(report)


# The namespace builtins: a name looked up in them by a computed key is a registry no reader
# (nor the layer check) can follow.
_NAMESPACES = ("globals", "locals", "vars")


def namespace_lookups(tree: ast.Module) -> list[int]:
    """Lines that read a module's names by a computed key: ``globals()`` (``locals()``,
    ``vars()``) subscripted, asked ``.get``, searched with ``in``, or passed on. Writing
    into it (``globals()[name] = value``, the lazy attributes of a package) and listing it
    (``[*globals()]``, for ``__dir__``) look nothing up."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _NAMESPACES
            and not node.args
        ):
            continue
        parent = parents.get(node)
        stored = isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store)
        if not (stored or isinstance(parent, ast.Starred)):
            found.append(node.lineno)
    return sorted(found)


def test_no_module_looks_names_up_in_its_namespace() -> None:
    """Registries are explicit (``serve.engines.DIALECTS`` holds classes): no kind mapped
    to a name looked up in ``globals()``."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        for line in namespace_lookups(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "names looked up in a namespace: " + ", ".join(found)


def test_the_namespace_check_catches_lookups() -> None:
    source = (
        "a = globals()[name]\n"
        "b = globals().get(name)\n"
        "c = name in vars()\n"
        "d = dict(locals())\n"
        "globals()[name] = value\n"
        "e = [*globals()]\n"
        "f = vars(obj)\n"
    )
    assert namespace_lookups(ast.parse(source)) == [1, 2, 3, 4]


def _mentions_any(annotation: object) -> bool:
    if annotation is typing.Any:
        return True
    return any(_mentions_any(arg) for arg in typing.get_args(annotation))


@pytest.mark.parametrize("method", ["analyze", "apply"])
def test_public_entry_points_are_precisely_typed(method: str) -> None:
    function = getattr(ChatTemplate, method)
    hints = typing.get_type_hints(function)
    assert "return" in hints
    parameters = inspect.signature(function).parameters
    untyped = [p for p in parameters if p != "self" and p not in hints]
    assert not untyped, f"{method}: untyped parameters {untyped}"
    loose = sorted(name for name, hint in hints.items() if _mentions_any(hint))
    assert not loose, f"ChatTemplate.{method}: Any in {loose}"


# --------------------------------------------------------------------------- delta dicts
# The message model: the one module that writes a streaming delta as an OpenAI dict and reads
# one back (``StreamDelta.to_openai`` / ``from_openai``). Everywhere else a delta is a typed
# ``StreamDelta``; its dict exists only where it is handed to the wire as it is.
DELTA_MODEL = ("autoparser.stream.delta",)
DELTA_KEYS = frozenset({"content", "reasoning_content", "tool_calls"})


def _delta_named(node: ast.expr) -> bool:
    """An expression named as a delta (``delta``, ``d``, ``self.deltas``, ``last_delta``)."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name == "d" or "delta" in name.lower()


def _key_read(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``x["key"]`` or ``x.get("key", ...)``: the object and the literal key."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.value, str(node.slice.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return node.func.value, str(node.args[0].value)
    return None


def delta_dict_uses(source: str) -> list[str]:
    """Where ``source`` builds or reads a delta as a dict: a tool-call delta entry built
    (a dict display with ``index`` and ``function``: a message's calls have no index), a
    delta's field read by key, or a typed delta made from a dict (``from_openai``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"index", "function"} <= keys:
                found.append(f"line {node.lineno}: a tool-call delta built as a dict")
        read = _key_read(node)
        if read is not None and read[1] in DELTA_KEYS and _delta_named(read[0]):
            found.append(f"line {node.lineno}: a delta's {read[1]!r} read by key")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "from_openai"
            and isinstance(node.value, ast.Name)
            and node.value.id == "StreamDelta"
        ):
            found.append(f"line {node.lineno}: a StreamDelta made from a dict")
    return found


def test_no_module_outside_the_message_model_builds_or_reads_delta_dicts() -> None:
    """Deltas are typed from the mapper to the sinks: the parser builds ``StreamDelta``
    values, serve's builders (Responses, Messages) read their attributes, and a dict is
    written only at the wire (``to_openai()``)."""
    found = [
        f"{name} {where}"
        for name, path in _modules().items()
        if name not in DELTA_MODEL
        for where in delta_dict_uses(path.read_text(encoding="utf-8"))
    ]
    assert not found, "delta dicts outside the message model:\n" + "\n".join(found)


def test_the_delta_dict_check_catches_builds_and_reads() -> None:
    planted = """
def take(events):
    return [{"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}]

def feed(deltas):
    for delta in deltas:
        text = delta.get("content")
        calls = delta["tool_calls"]
    return StreamDelta.from_openai({"content": text})
"""
    assert sorted(delta_dict_uses(planted)) == [
        "line 3: a tool-call delta built as a dict",
        "line 7: a delta's 'content' read by key",
        "line 8: a delta's 'tool_calls' read by key",
        "line 9: a StreamDelta made from a dict",
    ]
    # A message's fields and a request's are not deltas.
    assert not delta_dict_uses('turn.get("tool_calls"); message["content"]')


def test_the_stream_builders_take_typed_deltas() -> None:
    """The Responses and Messages stream builders are fed ``StreamDelta`` values."""
    from autoparser import StreamDelta
    from autoparser.serve.messages_api import MessageEvents
    from autoparser.serve.responses_api import ResponseEvents

    for builder in (ResponseEvents, MessageEvents):
        hint = typing.get_type_hints(builder.feed)["deltas"]
        assert typing.get_args(hint) == (StreamDelta,), (builder.__name__, hint)


# ------------------------------------------------------------------------ one road
# The faces that reach prompts, grammars and parsers: through ``Session`` only, never by
# calling ``ChatTemplate.apply`` or building ``ChatParams`` themselves (DESIGN.md, "One road").
ROAD_FACES = ("serve", "studio", "integrations", "cli")
# Calls that build params past the session: ``<anything>.apply(...)``, and these names.
_PARAMS_BUILDERS = frozenset({"ChatParams", "params_for_request"})


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def road_violations(sources: typing.Mapping[str, str]) -> list[str]:
    """Where a face module (name -> source) builds params itself, and the faces that
    never import ``Session``."""
    found: list[str] = []
    importers: set[str] = set()
    for module, text in sorted(sources.items()):
        face = module.split(".")[1]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and any(a.name == "Session" for a in node.names):
                importers.add(face)
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            if name == "apply" and isinstance(node.func, ast.Attribute):
                found.append(f"{module}:{node.lineno}: calls .apply() (use Session.params)")
            elif name in _PARAMS_BUILDERS:
                found.append(f"{module}:{node.lineno}: calls {name}() (use Session.params)")
    faces = {module.split(".")[1] for module in sources}
    found.extend(f"{face}: never imports Session" for face in sorted(faces - importers))
    return found


def _face_sources() -> dict[str, str]:
    return {
        module: path.read_text(encoding="utf-8")
        for module, path in _modules().items()
        if module.split(".")[1:2] and module.split(".")[1] in ROAD_FACES
    }


def test_faces_reach_params_through_the_session() -> None:
    sources = _face_sources()
    assert {m.split(".")[1] for m in sources} == set(ROAD_FACES)
    violations = road_violations(sources)
    assert not violations, "\n".join(violations)


def test_the_road_check_catches_apply_chatparams_and_a_face_without_session() -> None:
    planted = {
        "autoparser.serve.x": "from autoparser import Session\nt.apply(m)\nChatParams(p)\n",
        "autoparser.studio.y": "from autoparser import ChatTemplate\n",
    }
    assert road_violations(planted) == [
        "autoparser.serve.x:2: calls .apply() (use Session.params)",
        "autoparser.serve.x:3: calls ChatParams() (use Session.params)",
        "studio: never imports Session",
    ]


# Where a format's name may be read: the analysis (which detects it) and the formats
# package (which maps it to a ``Format``); everything else asks ``format_of(analysis)``.
_FORMAT_NAME_READERS = ("autoparser.analysis", "autoparser.formats")


def format_name_reads(sources: typing.Mapping[str, str]) -> list[str]:
    """Reads of ``<x>.handler`` (the analysis' format name) outside its two owners."""
    found = []
    for module, text in sorted(sources.items()):
        if module.startswith(_FORMAT_NAME_READERS):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr == "handler":
                found.append(f"{module}:{node.lineno}: reads .handler (ask format_of)")
    return found


def test_nothing_branches_on_a_format_name() -> None:
    sources = {m: p.read_text(encoding="utf-8") for m, p in _modules().items()}
    assert not format_name_reads(sources)
    planted = {"autoparser.verify": "if analysis.handler:\n    pass\n"}
    assert format_name_reads(planted) == ["autoparser.verify:1: reads .handler (ask format_of)"]
