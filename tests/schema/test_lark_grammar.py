"""Lark grammars translated to a regex: llguidance's own reading of the same Lark is the
oracle (OpenAI constrains custom tools with it), over a corpus of ``apply_patch`` patches
and a small grammar per construct; what a regex cannot express is refused by name."""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest
from helpers.gbnf_oracle import accepts, byte_tokenizer
from llguidance import LLMatcher, grammar_from

from autoparser.schema import schema_to_gbnf
from autoparser.schema.lark_grammar import COMMON, LarkGrammarError, lark_to_regex

# Codex's apply_patch grammar (codex-rs tools/handlers/apply_patch.lark), as Codex sends it.
APPLY_PATCH = """start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
"""

VALID_PATCHES = [
    "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** End Patch\n",
    "*** Begin Patch\n*** Add File: a.py\n+\n+x = 1\n*** End Patch",
    "*** Begin Patch\n*** Delete File: old/obsolete.txt\n*** End Patch\n",
    '*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-print("Hi")\n'
    '+print("Hello, world!")\n*** End Patch\n',
    "*** Begin Patch\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@\n ctx\n"
    "-old\n+new\n*** End of File\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: a b/ç 文件.md\n@@ class A:\n@@     def f(self):\n"
    "-\t\treturn 1\n+\t\treturn {'k': \"v\\\\n\"}\n*** Delete File: x\n"
    "*** Add File: y\n+y\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: only_rename.txt\n*** Move to: renamed.txt\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: f\n*** End Patch\n",
]
INVALID_PATCHES = [
    "",
    "*** Begin Patch\n*** End Patch\n",  # no hunk
    "*** Begin Patch\n*** Add File: a\n*** End Patch\n",  # an added file with no line
    "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch\n",
    "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n\n",  # two newlines at the end
    "*** Begin Patch\n*** Add File: a\n+x\n",  # no end
    "*** Begin Patch\n*** Delete File: \n*** End Patch\n",  # empty file name
    "*** Begin Patch\n*** Update File: a\n@@x\n*** End Patch\n",  # '@@' then no space
    "*** Begin Patch\n*** Update File: a\n@@ \n*** End Patch\n",  # '@@ ' then nothing
    "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch\n",  # bare eof line
    "*** Begin Patch\n*** Update File: a\n@@\n*x\n*** End Patch\n",
    "*** Begin Patch\n*** Remove File: a\n*** End Patch\n",
    "*** Begin Patch\r\n*** Delete File: a\r\n*** End Patch\r\n",  # CRLF: LF only
    "*** begin patch\n*** Delete File: a\n*** End Patch\n",
    "*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore",
    " *** Begin Patch\n*** Delete File: a\n*** End Patch\n",
]


@lru_cache(maxsize=64)
def _llguidance(lark: str) -> str:
    return str(grammar_from("lark", lark))


def llguidance_accepts(lark: str, text: str) -> bool:
    """Whether llguidance, reading the Lark itself, takes the whole of ``text``."""
    tokenizer = byte_tokenizer()
    matcher = LLMatcher(tokenizer, _llguidance(lark))
    tokens = tokenizer.tokenize_bytes(text.encode())
    if matcher.try_consume_tokens(tokens) != len(tokens) or matcher.is_error():
        return False
    return bool(matcher.is_accepting())


@lru_cache(maxsize=64)
def _argument_grammar(lark: str) -> str:
    """The GBNF of the custom tool's input as the server builds it: a JSON string whose
    pattern is the translation."""
    return schema_to_gbnf({"type": "string", "pattern": f"^(?:{lark_to_regex(lark)})$"})


def ours_accept(lark: str, text: str) -> bool:
    """Whether the translation takes ``text``; Python's ``re`` and the emitted grammar (over
    the JSON-encoded string) must agree on it."""
    by_regex = re.fullmatch(lark_to_regex(lark), text) is not None
    by_grammar = accepts(_argument_grammar(lark), json.dumps(text, ensure_ascii=False))
    assert by_regex == by_grammar, f"re and the GBNF disagree on {text!r}"
    return by_regex


@pytest.mark.parametrize("patch", VALID_PATCHES)
def test_apply_patch_takes_the_patches_llguidance_takes(patch: str) -> None:
    assert llguidance_accepts(APPLY_PATCH, patch)
    assert ours_accept(APPLY_PATCH, patch)


@pytest.mark.parametrize("patch", INVALID_PATCHES)
def test_apply_patch_refuses_the_patches_llguidance_refuses(patch: str) -> None:
    assert not llguidance_accepts(APPLY_PATCH, patch)
    assert not ours_accept(APPLY_PATCH, patch)


# Codex's code-mode ``exec`` tool (codex-rs code_mode exec.lark): terminals only, a regex
# with escaped slashes, [\s\S] for any text.
EXEC = r"""start: pragma_source | plain_source
pragma_source: PRAGMA_LINE NEWLINE SOURCE
plain_source: SOURCE

PRAGMA_LINE: /[ \t]*\/\/ @exec:[^\r\n]*/
NEWLINE: /\r?\n/
SOURCE: /[\s\S]+/
"""


@pytest.mark.parametrize(
    "text",
    [
        "await tools.exec_command({cmd: 'ls'})",
        '// @exec: {"yield_time_ms": 10000}\nconst a = 1;\n',
        "  // @exec: {}\r\nx",
        "\n",
        "",
        "// @exec: {}\n",
    ],
)
def test_codex_exec_grammar_as_llguidance_reads_it(text: str) -> None:
    assert ours_accept(EXEC, text) == llguidance_accepts(EXEC, text)


# One small grammar per construct, with strings either side of its language.
CONSTRUCTS = {
    "literal and alternation": ('start: "ab" | "c" ""', ["ab", "c", "abc", "", "a"]),
    "case-folded literal": ('start: "Yes"i', ["yes", "YES", "yEs", "ye", "yess"]),
    "escapes in a literal": ('start: "a\\tb\\n\\"q\\""', ['a\tb\n"q"', "a\\tb", "a\tb\n"]),
    "regex terminal": ("start: /[0-9]{2,3}x?/", ["12", "123x", "1", "1234", "12y"]),
    "regex with a slash": ("start: /a\\/b/", ["a/b", "ab", "a\\/b"]),
    "dot-all flag": ("start: /a.b/s", ["a\nb", "axb", "ab"]),
    "dot without the flag": ("start: /a.b/", ["a\nb", "axb"]),
    "range": ('start: "a".."f"+', ["abcf", "g", "", "fa"]),
    "grouping and repeats": (
        'start: ("x" "y")+ "z"* ["w"] "v"?',
        ["xy", "xyxyzzwv", "xyv", "x", "xyww", "yx"],
    ),
    "exact repetition": ('start: "ab" ~ 2', ["abab", "ab", "ababab"]),
    "bounded repetition": ("start: DIGIT ~ 2..3\n%import common.DIGIT", ["12", "123", "1", "1234"]),
    "rules and terminals": (
        'start: greeting NAME\ngreeting: "hi " | "hello "\nNAME: UPPER LOWER+\n'
        'UPPER: "A".."Z"\nLOWER: "a".."z"',
        ["hi Bob", "hello Al", "hi bob", "hi B", "hey Bob"],
    ),
    "inlined, kept and private rules, aliases": (
        '?start: _pair | word\n_pair: KEY "=" value -> kv\nvalue: /[0-9]+/\n'
        '!word: "w"\nKEY: /[a-z]+/',
        ["a=1", "key=42", "w", "=1", "a=", "ww"],
    ),
    "continued alternatives": ('start: "a"\n     | "b"\n     | "c"', ["a", "b", "c", "d"]),
    "comments": ('// a comment\nstart: "a" // trailing\n', ["a", "b"]),
    "ignore": (
        'start: "a" "b" WORD\n%import common.WORD\n%import common.WS\n%ignore WS',
        ["abx", "a b  xy", "a\nb\tz", "a b x y", "ab"],
    ),
    "ignore a literal": ('start: "a"+ \n%ignore " "', ["aaa", "a a", "a  a", "", "a,a"]),
    "imports in parentheses and renamed": (
        "start: N SP? X\n%import common (SIGNED_NUMBER, WS_INLINE)\n"
        "%import common.SIGNED_NUMBER -> N\n%import common.WS_INLINE -> SP\n"
        "%import common.LCASE_LETTER -> X",
        ["-1.5e3 a", "42b", "+.5 c", "1.", "a", "1 A"],
    ),
    "common numbers": (
        "start: NUMBER\n%import common.NUMBER",
        ["1", "1.5", ".5", "1e5", "1.e-3", "e5", "1.5.5", "-1"],
    ),
    "common strings and names": (
        'start: ESCAPED_STRING ":" CNAME\n%import common.ESCAPED_STRING\n%import common.CNAME',
        ['"a\\"b":_x1', '"":a', '"a"b":x', '"a":1x', '"a\\\\":x'],
    ),
    "common comments": (
        "start: C_COMMENT | SH_COMMENT | CPP_COMMENT | SQL_COMMENT\n"
        "%import common (C_COMMENT, SH_COMMENT, CPP_COMMENT, SQL_COMMENT)",
        ["/* a * b */", "/**/", "/* a */ b */", "# x", "// y", "-- z", "/* open", "#\n"],
    ),
    "newlines": (
        "start: (WORD NEWLINE)+\n%import common (WORD, NEWLINE)",
        ["a\nb\r\n", "a\n\n", "a", "a\rb\n"],
    ),
}


@pytest.mark.parametrize("name", list(CONSTRUCTS))
def test_each_construct_accepts_what_llguidance_accepts(name: str) -> None:
    lark, texts = CONSTRUCTS[name]
    for text in texts:
        assert ours_accept(lark, text) == llguidance_accepts(lark, text), text
    assert any(ours_accept(lark, text) for text in texts)
    assert not all(ours_accept(lark, text) for text in texts)


def test_priorities_choose_a_parse_and_leave_the_language_alone() -> None:
    """``rule.N`` / ``TERM.N`` (Lark's, which llguidance does not read) translate as if
    absent."""
    plain = 'start: key "=" VALUE\nkey: /[a-z]+/\nVALUE: /[0-9]+/'
    ranked = 'start: key "=" VALUE\nkey.2: /[a-z]+/\nVALUE.3: /[0-9]+/'
    assert lark_to_regex(ranked) == lark_to_regex(plain)
    assert ours_accept(ranked, "a=1") and not ours_accept(ranked, "a=")


def test_every_common_terminal_is_the_one_llguidance_imports() -> None:
    """Each terminal of common.lark: the same strings as llguidance's own import."""
    samples = [
        "0", "7f", "-12", "+3.", "1.5E-2", "abc", "Ab_9", "_", " \t", "\r\n", "\n\n", "\r",
        '"x\\"y"', "# c", "// c", "/* c */", "-- c", "", "a b", "1e",
    ]  # fmt: skip
    for name in COMMON:
        if name.startswith("_"):
            continue
        lark = f"start: {name}\n%import common.{name}"
        for text in samples:
            assert ours_accept(lark, text) == llguidance_accepts(lark, text), (name, text)


@pytest.mark.parametrize(
    ("lark", "construct"),
    [
        ('start: "(" start ")" | "x"', "the recursive rule 'start' (start -> start)"),
        ('start: a\na: "[" b "]"\nb: a | "x"', "the recursive rule 'a' (a -> b -> a)"),
        ('start: "a"\n%declare X', "the directive %declare"),
        ('start: %json {"type": "integer"}', "the directive %json"),
        ('start: "a"\n%import other.X', "%import of other"),
        ('start: "a"\n%import common.NOPE', "common.NOPE"),
        ("start: /(?=a)a/", "lookaround"),
        ("start: /a(?i:b)/", "inline flag"),
        ("start: /ab/i", "the 'i' flag"),
        ('start: _sep{"a", ","}', "the template use _sep{...}"),
        ('_sep{x, s}: x (s x)*\nstart: "a"', "the template _sep{...}"),
        ("start: <[123]>", "llguidance's '<' extension"),
        ('start: "a" ~ 100000', "a repetition ~ 100000 (above 10000)"),
    ],
)
def test_what_a_regex_cannot_express_is_named(lark: str, construct: str) -> None:
    with pytest.raises(LarkGrammarError) as info:
        lark_to_regex(lark)
    assert info.value.unsupported
    assert construct in str(info.value)


@pytest.mark.parametrize(
    ("lark", "problem"),
    [
        ('rule: "a"', "no 'start' rule"),
        ("start: missing", "'missing' is not defined"),
        ("start: LF", "'LF' is not defined (import it with %import common.NAME?)"),
        ('start: "a"\nstart: "b"', "'start' is defined twice"),
        ('start: "unterminated', "unexpected '\"'"),
        ("start: /a(/", "bad regex"),
        ('start: "ab".."z"', "single characters"),
        ('start: "z".."a"', "is reversed"),
        ('start: "a" ~ 3..1', "bounds reversed"),
        ('start: ("a"', "ends too soon"),
        ('start: A\nA: b\nb: "x"', "terminal uses the rule 'b'"),
        ("start: /x/q", "unknown regex flag 'q'"),
    ],
)
def test_invalid_lark_is_refused_naming_the_problem(lark: str, problem: str) -> None:
    with pytest.raises(LarkGrammarError) as info:
        lark_to_regex(lark)
    assert not info.value.unsupported
    assert problem in str(info.value)
    assert llguidance_refuses(lark)


def llguidance_refuses(lark: str) -> bool:
    """Whether llguidance turns the grammar down (raising, or in its validation)."""
    try:
        result = LLMatcher.validate_grammar(grammar_from("lark", lark), byte_tokenizer())
    except Exception:  # llguidance raises bare Exceptions
        return True
    return bool(result[0] if isinstance(result, tuple) else result)


@pytest.mark.xfail(
    strict=True,
    reason="ignorables before the first token and after the last: Lark (and the "
    "translation) take them, llguidance does not",
)
@pytest.mark.parametrize("text", [" ab", "ab "])
def test_ignorables_at_the_ends_as_llguidance_reads_them(text: str) -> None:
    lark = 'start: "a" "b"\n%ignore " "'
    assert ours_accept(lark, text) == llguidance_accepts(lark, text)


def test_a_grammar_too_large_for_a_regex_is_refused() -> None:
    """A rule used twice at every level of a deep chain doubles each time: refused by size
    as it grows (2**60 copies would never fit in memory)."""
    rules = [f"r{i}: r{i + 1} r{i + 1}" for i in range(60)] + ['r60: "ab"']
    with pytest.raises(LarkGrammarError) as info:
        lark_to_regex("start: r0\n" + "\n".join(rules))
    assert info.value.unsupported and "characters" in str(info.value)
