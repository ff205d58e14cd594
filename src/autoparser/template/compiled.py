"""A chat template compiled once: jinja2's parse and code generation, a single time per text.

Compiling is most of what a new template costs (the lexer, the parser and above all
jinja2's code generator, which walks the tree again for every loop and frame), so nothing
compiles a text twice:

* the Python code is the same for both sandboxes (they differ only at run time, in what a
  template may change), so a template that mutates a list runs the same code bound to the
  mutable sandbox instead of being compiled again;
* the variables a template reads from its caller and those it tests in conditions (where a
  reasoning switch hides, see ``switches``) are recorded by the code generator as it goes,
  instead of parsing the text again and walking it with ``jinja2.meta`` (which runs a whole
  second code generation to answer);
* jinja2's optimizer is off: it only folds constant expressions ahead of time (the output
  is the same), and costs a third of the code generation.
"""

from __future__ import annotations

import dataclasses
import functools
import io
from types import CodeType

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.idtracking import VAR_LOAD_RESOLVE

from autoparser.cache import CACHES, Store
from autoparser.template.environment import sandbox

# The file name jinja2 gives template code; the renderer finds template lines by it.
TEMPLATE_FILENAME = "<template>"


def _names_in(test: nodes.Node) -> set[str]:
    if isinstance(test, nodes.Name):
        return {test.name}  # find_all() yields only the descendants of a node
    return {name.name for name in test.find_all(nodes.Name)}


class _RecordingGenerator(CodeGenerator):
    """jinja2's code generator, also noting the variables the template reads from its
    caller (what ``jinja2.meta.find_undeclared_variables`` answers) and the variables read
    in the test of an ``if`` (with its ``elif``s) or a conditional expression."""

    def __init__(self, environment: jinja2.Environment) -> None:
        self.code = io.StringIO()
        super().__init__(environment, None, TEMPLATE_FILENAME, self.code, optimized=False)
        self.reads: set[str] = set()
        self.tested: set[str] = set()

    def enter_frame(self, frame: Frame) -> None:
        super().enter_frame(frame)
        for action, name in frame.symbols.loads.values():
            if action == VAR_LOAD_RESOLVE and name not in self.environment.globals:
                self.reads.add(name)

    def visit_If(self, node: nodes.If, frame: Frame) -> None:
        self.tested |= _names_in(node.test)
        for branch in node.elif_:
            self.tested |= _names_in(branch.test)
        super().visit_If(node, frame)

    def visit_CondExpr(self, node: nodes.CondExpr, frame: Frame) -> None:
        self.tested |= _names_in(node.test)
        super().visit_CondExpr(node, frame)


@dataclasses.dataclass(frozen=True)
class CompiledSource:
    """One template text compiled: its code, ready in the immutable sandbox (transformers')
    and bound on demand to the mutable one, plus what the code generator saw."""

    code: CodeType
    template: jinja2.Template
    # Variables the template reads from its caller (not set by the template, not a global).
    reads: frozenset[str]
    # Variables read in the test of an if / elif or of a conditional expression.
    tested: frozenset[str]

    @functools.cached_property
    def mutable_template(self) -> jinja2.Template:
        """The same code in the sandbox that lets a template change lists and dicts."""
        return _bind(self.code, sandbox(mutable=True))


def _bind(code: CodeType, environment: jinja2.Environment) -> jinja2.Template:
    return environment.template_class.from_code(
        environment, code, environment.make_globals(None), None
    )


_COMPILED: Store[CompiledSource] = CACHES.store("compile", 512)


def compile_source(source: str) -> CompiledSource:
    """The template text compiled, once per text (``jinja2.TemplateSyntaxError`` if it
    does not compile)."""
    return _COMPILED.get_or_build(source, lambda: _compile(source))


def _compile(source: str) -> CompiledSource:
    environment = sandbox(mutable=False)
    tree = environment.parse(source)
    generator = _RecordingGenerator(environment)
    try:
        generator.visit(tree)
    except jinja2.TemplateSyntaxError:
        environment.handle_exception(source=source)  # raises it, with the template's lines
    code = compile(generator.code.getvalue(), TEMPLATE_FILENAME, "exec")
    return CompiledSource(
        code,
        _bind(code, environment),
        frozenset(generator.reads),
        frozenset(generator.tested),
    )
