"""llguidance as the grammar oracle: does a GBNF grammar accept a whole string?

Reusable by every test that checks an emitted grammar. The byte tokenizer makes the check
exact: the string is fed byte by byte, then the matcher must be in an accepting state.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from llguidance import LLMatcher, LLTokenizer, grammar_from


@lru_cache(maxsize=1)
def byte_tokenizer() -> Any:
    """The llguidance byte-level tokenizer (one token per byte)."""
    return LLTokenizer("byte")


@lru_cache(maxsize=256)
def compiled(grammar_text: str) -> Any:
    """The llguidance grammar for GBNF text; ValueError naming the problem when invalid."""
    try:
        grm = grammar_from("gbnf", grammar_text)
    except Exception as exc:  # llguidance's converter raises bare Exceptions
        raise ValueError(f"GBNF rejected by llguidance: {exc}\n{grammar_text}") from exc
    problem = validate(grm)
    if problem:
        raise ValueError(f"GBNF rejected by llguidance: {problem}\n{grammar_text}")
    return grm


def validate(grm: Any) -> str:
    """Empty string when llguidance accepts the grammar, else its error message."""
    result = LLMatcher.validate_grammar(grm, byte_tokenizer())
    if isinstance(result, tuple):  # newer llguidance: (is_error, messages)
        is_error, messages = result
        return "; ".join(messages) if is_error else ""
    return str(result)


def check_grammar(grammar_text: str) -> None:
    """Raise ValueError when llguidance refuses the grammar text."""
    compiled(grammar_text)


def accepts(grammar_text: str, s: str | bytes) -> bool:
    """True when the grammar matches the whole of `s` (UTF-8 encoded when a str)."""
    data = s.encode("utf-8") if isinstance(s, str) else s
    tok = byte_tokenizer()
    matcher = LLMatcher(tok, compiled(grammar_text))
    tokens = tok.tokenize_bytes(data)
    consumed = matcher.try_consume_tokens(tokens)
    if consumed != len(tokens) or matcher.is_error():
        return False
    return bool(matcher.is_accepting())


def accepts_prefix(grammar_text: str, s: str | bytes) -> bool:
    """True when `s` can be extended to a string the grammar accepts (not in error)."""
    data = s.encode("utf-8") if isinstance(s, str) else s
    tok = byte_tokenizer()
    matcher = LLMatcher(tok, compiled(grammar_text))
    tokens = tok.tokenize_bytes(data)
    return bool(matcher.try_consume_tokens(tokens) == len(tokens) and not matcher.is_error())


RULE_LINE = re.compile(r"^([A-Za-z0-9-]+) ::= (.+)$")
# literals and classes removed, what remains is names and operators
UNICODE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[uU]")  # an odd run of backslashes, then u
LITERALS = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')


def rules_of(grammar: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in grammar.rstrip("\n").split("\n"):
        match = RULE_LINE.match(line)
        assert match, f"not a one-line GBNF rule: {line!r}"
        assert match.group(1) not in out, f"rule defined twice: {match.group(1)}"
        out[match.group(1)] = match.group(2)
    return out


def assert_portable(grammar: str) -> None:
    """The portability rules every engine (llama.cpp, xgrammar, llguidance) needs: one-line
    rules, each defined once, ``root`` among them, every reference defined, no ``.`` or
    ``\\u`` escapes, no empty alternatives or repetitions without a lower bound; and
    llguidance reads it."""
    rules = rules_of(grammar)
    assert "root" in rules
    assert not UNICODE_ESCAPE.search(grammar), "\\u or \\U escape in the grammar"
    for name, body in rules.items():
        bare = LITERALS.sub(" L ", body)
        assert "." not in bare, f"{name}: '.' outside a literal"
        assert not re.search(r"\{\s*,", bare), f"{name}: repetition without lower bound"
        assert not re.search(r"(^|\(|\|)\s*(\||\)|$)", bare), f"{name}: empty alternative"
        for ref in re.findall(r"[A-Za-z][A-Za-z0-9-]*", bare):
            if ref != "L":
                assert ref in rules, f"{name} references undefined {ref}"
    check_grammar(grammar)
