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
  is the same), and costs a third of the code generation;
* across processes, the code can be kept on disk (``code_cache``, the directory a
  ``ChatTemplate`` saves its analysis in): a later process loads it instead of compiling
  (about 1 ms instead of 5-120). Loading code is running code, so a file is used only when
  it and its directory belong to the current user and no one else may write them (as
  Python trusts its own ``__pycache__``), and only under a key naming everything the code
  was made from: the text, jinja2's and Python's versions, and this module's and the
  environment's own source (a change to the code generator is a new key). Anything else is
  ignored with a log line and compiled again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import logging
import marshal
import os
import stat
import sys
import tempfile
from pathlib import Path
from types import CodeType

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.idtracking import VAR_LOAD_RESOLVE

from autoparser.cache import CACHES, Store
from autoparser.template import environment as _environment_module
from autoparser.template.environment import sandbox

log = logging.getLogger(__name__)

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


def compile_source(source: str, code_cache: Path | None = None) -> CompiledSource:
    """The template text compiled, once per text (``jinja2.TemplateSyntaxError`` if it
    does not compile); with ``code_cache``, a directory, the code is read from there when
    a trusted file holds it, and written there when compiled."""
    if code_cache is None:
        return _COMPILED.get_or_build(source, lambda: _compile(source))
    return _COMPILED.get_or_build(source, lambda: _cached_compile(source, code_cache))


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


# ------------------------------------------------------------------ the code kept on disk

_MAGIC = b"autoparser-code 1\n"
CODE_FOLDER = "code"


@functools.cache
def _maker_hash() -> str:
    """What the code depends on besides the text: jinja2's and Python's versions (marshal's
    format is Python's own) and the source of the code generator and the environment."""
    digest = hashlib.sha256()
    digest.update(jinja2.__version__.encode() + b"\0" + importlib.util.MAGIC_NUMBER)
    digest.update(sys.version.encode())
    for module in (sys.modules[__name__], _environment_module):
        file = getattr(module, "__file__", None)
        digest.update(Path(file).read_bytes() if file else b"?")
    return digest.hexdigest()


def code_key(source: str) -> str:
    """The key the code of ``source`` is kept under (and the file's name)."""
    return hashlib.sha256(
        _maker_hash().encode() + source.encode("utf-8", "surrogatepass")
    ).hexdigest()


def code_path(directory: Path, source: str) -> Path:
    return directory / CODE_FOLDER / f"{code_key(source)[:40]}.code"


def _owned_privately(info: os.stat_result) -> bool:
    """Owned by the current user, and writable by no one else."""
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _trusted(path: Path) -> bool:
    """Whether ``path`` (a regular file, not a link) and its folder may be loaded from."""
    if not hasattr(os, "getuid"):
        return False  # no owner to check on this platform: never load code
    try:
        file = os.lstat(path)
        folder = os.lstat(path.parent)
    except OSError:
        return False
    return (
        stat.S_ISREG(file.st_mode)
        and stat.S_ISDIR(folder.st_mode)
        and _owned_privately(file)
        and _owned_privately(folder)
    )


def _read_code(path: Path, source: str) -> CompiledSource | None:
    """The code kept at ``path`` for ``source``, or None (logged when a file was there)."""
    if not path.exists():
        return None
    if not _trusted(path):
        log.warning("compiled code %s ignored: not private to this user", path.name)
        return None
    try:
        data = path.read_bytes()
        head, _, rest = data.partition(b"\n\n")
        magic, key, names = head.split(b"\n", 2)
        if magic + b"\n" != _MAGIC or key.decode() != code_key(source):
            log.info("compiled code %s ignored: made from another text or version", path.name)
            return None
        recorded = json.loads(names)
        code = marshal.loads(rest)
    except (OSError, ValueError, EOFError, TypeError, UnicodeDecodeError) as exc:
        log.warning("compiled code %s ignored: %s", path.name, type(exc).__name__)
        return None
    if not isinstance(code, CodeType):
        return None
    environment = sandbox(mutable=False)
    return CompiledSource(
        code, _bind(code, environment), frozenset(recorded["reads"]), frozenset(recorded["tested"])
    )


def _write_code(path: Path, source: str, compiled: CompiledSource) -> None:
    """Keep the code at ``path`` (atomically, private to this user); a failure only costs
    the next process a compile."""
    names = {"reads": sorted(compiled.reads), "tested": sorted(compiled.tested)}
    data = b"".join(
        (
            _MAGIC,
            code_key(source).encode(),
            b"\n",
            json.dumps(names).encode(),
            b"\n\n",
            marshal.dumps(compiled.code),
        )
    )
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".code-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:  # mkstemp makes it 0600
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("compiled code not kept in %s: %s", path.parent, type(exc).__name__)


def _cached_compile(source: str, directory: Path) -> CompiledSource:
    path = code_path(directory, source)
    found = _read_code(path, source)
    if found is not None:
        return found
    compiled = _compile(source)
    _write_code(path, source, compiled)
    return compiled
