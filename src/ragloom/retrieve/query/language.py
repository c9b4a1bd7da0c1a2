"""Language detection: the programming language a question names ("in rust", "python function",
".ts file"), or that the paths it names share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragloom.retrieve.query.vocabulary import EXTENSION_LANGUAGES, LANGUAGE_ALIASES

__all__ = ["detect_language", "path_language"]

_LANG_WORD = r"(c\+\+|c#|[a-z]+)"
_LANG_NOUNS = (
    r"(?:functions?|funcs?|fns?|methods?|class(?:es)?|structs?|enums?|traits?|interfaces?|"
    r"modules?|files?|code|crates?|packages?|scripts?|types?|impls?|macros?|programs?|"
    r"libraries|library|tests?|sources?|implementations?|version)"
)
_LANG_PATTERNS = (
    # "in rust", "written in go", "using python", "for typescript", "port to rust"
    re.compile(
        r"(?<![\w.])(?:in|using|with|for|to|from|into|written in)\s+" + _LANG_WORD + r"(?![\w+#])",
        re.I,
    ),
    # "python function", "the rust crate", "c++ class"
    re.compile(r"(?<![\w.])" + _LANG_WORD + r"\s+" + _LANG_NOUNS + r"\b", re.I),
)
_EXT_MENTION = re.compile(r"(?<![\w/])\.([a-z]{1,5})\s+(?:files?|sources?|modules?)\b", re.I)
"""".ts file", ".rs files": an extension named on its own."""


def detect_language(query: str) -> tuple[str | None, list[tuple[int, int]]]:
    """The programming language a question names, and the character spans that named it.

    Rules, all applied: "in/using/with/for/to/from/into/written in LANG";
    "LANG function/class/file/module/crate/..."; ".EXT file(s)". A bare language word ("go to
    the definition") is not a mention. LANG is looked up in :data:`LANGUAGE_ALIASES`, EXT in
    :data:`EXTENSION_LANGUAGES`. If the question names two different languages ("port this
    python function to rust") the answer is None: there is nothing safe to filter on.
    """
    found: list[tuple[str, tuple[int, int]]] = []
    for pat in _LANG_PATTERNS:
        for m in pat.finditer(query):
            lang = LANGUAGE_ALIASES.get(m.group(1).lower())
            if lang is not None:
                found.append((lang, (m.start(1), m.end(1))))
    for m in _EXT_MENTION.finditer(query):
        lang = EXTENSION_LANGUAGES.get(m.group(1).lower())
        if lang is not None:
            found.append((lang, (m.start(), m.end(1))))
    langs = {lang for lang, _ in found}
    if len(langs) != 1:
        return None, []
    return langs.pop(), sorted({span for _, span in found})


def path_language(paths: Iterable[str]) -> str | None:
    """The one language the extensions of ``paths`` share, else None."""
    langs = set()
    for p in paths:
        ext = p.rsplit(".", 1)[-1].lower() if "." in p.rsplit("/", 1)[-1] else ""
        lang = EXTENSION_LANGUAGES.get(ext)
        if lang is not None:
            langs.add(lang)
    return langs.pop() if len(langs) == 1 else None
