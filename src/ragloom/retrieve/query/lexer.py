"""Lexing a question: its words (identifiers, dotted names, ``name()``, backticked code), which
of them are written as code, file paths by shape, and path normalisation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragloom.retrieve.query.vocabulary import EXTENSION_LANGUAGES, OTHER_EXTENSIONS

__all__ = ["ALL_EXTENSIONS", "MIN_WORD_LEN", "PATH_RE", "Word", "clean_text", "lex", "norm_path"]

MIN_WORD_LEN = 2
"""Shorter words are neither joined nor looked up as symbols."""

ALL_EXTENSIONS = tuple(sorted(set(EXTENSION_LANGUAGES) | set(OTHER_EXTENSIONS), key=len))
PATH_RE = re.compile(
    r"(?<![\w/.])"
    r"(?:(?:\.{1,2}/)?[\w.-]+/)*[\w-][\w.-]*\.(?:" + "|".join(ALL_EXTENSIONS[::-1]) + r")\b"
    r"|(?<![\w/.])(?:[\w-]+/)+[\w-]+(?![\w.]*\()"
)
"""A file path: ``[dir/]...name.ext`` with a known extension, or ``a/b[/c...]`` with no dot."""
_IDENT = r"\$*[^\W\d][\w$]*"
"""An identifier: letters of any script, digits and ``_`` (``расчёт_налога``, as the BM25
tokenizer reads them since ``code-v2``), not starting with a digit; ``$`` is a letter of
JavaScript and TypeScript names (``$ZodType``, ``$ref``), but ``$5`` is not a name."""
_WORD_RE = re.compile(r"`[^`\n]+`|" + _IDENT + r"(?:\." + _IDENT + r")*(?:\(\))?")
"""A query word: backticked text, or an identifier (dotted allowed), optionally ``name()``."""
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a question and where it is (character offsets)."""

    text: str  # the identifier without backticks / ()
    start: int
    end: int
    typed: bool  # written as code: backticks, name(), snake_case, camelCase or dotted


def _is_code_shaped(word: str) -> bool:
    return "_" in word or "." in word or "$" in word or bool(_CAMEL_RE.search(word))


def lex(text: str) -> list[Word]:
    """The words of ``text`` in order; a backticked identifier is one typed word."""
    out: list[Word] = []
    for m in _WORD_RE.finditer(text):
        raw = m.group(0)
        if raw.startswith("`"):
            inner = raw[1:-1].strip().removesuffix("()")
            if re.fullmatch(r"\$*[^\W\d][\w.$]*", inner):
                out.append(Word(inner, m.start(), m.end(), True))
            else:  # backticked non-identifier (a path, an expression): its words, untyped
                out.extend(
                    Word(w.group(0), m.start() + 1 + w.start(), m.start() + 1 + w.end(), False)
                    for w in re.finditer(r"[^\W\d]\w*", raw[1:-1])
                )
            continue
        called = raw.endswith("()")
        word = raw.removesuffix("()")
        out.append(Word(word, m.start(), m.end(), called or _is_code_shaped(word)))
    return out


def clean_text(text: str) -> str:
    """``text`` with runs of whitespace collapsed to one space, trimmed."""
    return " ".join(text.split())


def norm_path(path: str) -> str:
    """A path with ``/`` separators and no leading ``./`` or surrounding slashes."""
    p = path.replace("\\", "/").strip()
    while p.startswith("./"):
        p = p[2:]
    return p.strip("/")
