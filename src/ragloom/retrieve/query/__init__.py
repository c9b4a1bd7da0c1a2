"""Query processing for code search (tamma phase 2): expansion, entities, decomposition,
language detection, and the exact-match boost applied to hits afterwards.

Everything here is pure and deterministic. :func:`process_query` turns one question into

* ``sparse_text``: the words to send to BM25 (filler words dropped, identifiers split, adjacent
  words joined into candidate identifiers, code-vocabulary synonyms added);
* ``dense_text``: the original question, whitespace-cleaned, for the embedding model (dense
  models understand prose; expansion would only blur the vector);
* ``sub_queries``: a compound question split into parts, each processed the same way; the
  caller retrieves each part and fuses the lists with :func:`ragloom.retrieve.fusion.rrf_fuse`;
* ``entities``: file paths and known symbol names named in the question, each with a confidence;
* ``language``: a language named in the question ("in rust", "python function", ".ts file").

Each step can be switched off in :class:`QueryConfig`. ``docs/ranking.md`` describes the rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

from ragloom.errors import ConfigError
from ragloom.index.tokenize import split_identifier

__all__ = [
    "CODE_SYNONYMS",
    "ENTITY_CONFIDENCE",
    "EXACT_MATCH_BONUS",
    "EXACT_MATCH_MIN_CONFIDENCE",
    "EXTENSION_LANGUAGES",
    "LANGUAGE_ALIASES",
    "MAX_JOINED_PHRASES",
    "QUERY_STOPWORDS",
    "Entity",
    "InMemorySymbolTable",
    "ProcessedQuery",
    "QueryConfig",
    "SymbolTable",
    "decompose_query",
    "detect_language",
    "exact_match_boost",
    "expand_query",
    "extract_entities",
    "identifier_candidates",
    "process_query",
    "query_style",
]

# --------------------------------------------------------------------------------------------
# Tables (ragloom's own; tamma phase 2 asks for "synonyms and related terms" without a list)
# --------------------------------------------------------------------------------------------

_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("remove", "delete", "del", "drop", "erase"),
    ("init", "initialize", "initialise", "constructor", "__init__", "ctor"),
    ("err", "error", "exception", "exc"),
    ("config", "configuration", "settings", "options", "opts", "cfg", "conf"),
    ("args", "arguments", "params", "parameters", "argv"),
    ("arg", "argument", "param", "parameter"),
    ("func", "function", "fn", "def"),
    ("str", "string"),
    ("dict", "dictionary", "mapping", "hashmap"),
    ("list", "array", "vec"),
    ("len", "length", "size"),
    ("auth", "authentication", "authenticate"),
    ("db", "database"),
    ("msg", "message"),
    ("req", "request"),
    ("resp", "response"),
    ("env", "environment"),
    ("dir", "directory", "folder"),
    ("tmp", "temp", "temporary"),
    ("num", "number"),
    ("idx", "index"),
    ("val", "value"),
    ("src", "source"),
    ("dst", "dest", "destination"),
    ("find", "search", "lookup", "locate"),
    ("start", "begin", "launch"),
    ("stop", "halt", "terminate", "shutdown"),
    ("update", "modify", "edit"),
    ("save", "store", "persist", "dump"),
    ("check", "validate", "verify"),
    ("log", "logger", "logging"),
    ("ptr", "pointer"),
    ("ref", "reference"),
    ("impl", "implementation"),
    ("util", "utils", "helper", "helpers"),
    ("cmd", "command"),
    ("ctx", "context"),
    ("fmt", "format"),
    ("attr", "attribute"),
)
"""Groups of interchangeable code-vocabulary words (ragloom's table). Kept small on purpose:
each pair is one a code reader would accept as the same thing in a search."""


def _synonym_table(groups: Iterable[tuple[str, ...]]) -> Mapping[str, tuple[str, ...]]:
    table: dict[str, list[str]] = {}
    for group in groups:
        for word in group:
            others = table.setdefault(word, [])
            others.extend(w for w in group if w != word and w not in others)
    return MappingProxyType({w: tuple(o) for w, o in table.items()})


CODE_SYNONYMS: Mapping[str, tuple[str, ...]] = _synonym_table(_SYNONYM_GROUPS)
"""word -> its synonyms, built from the groups above (every group is symmetric)."""

QUERY_STOPWORDS: frozenset[str] = frozenset(
    (
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "how",
        "what",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "when",
        "there",
        "here",
        "i",
        "we",
        "you",
        "me",
        "my",
        "our",
        "your",
        "it",
        "its",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "about",
        "into",
        "from",
        "for",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "please",
        "show",
        "tell",
        "find",
        "explain",
        "describe",
        "get",
        "gets",
        "got",
        "and",
        "or",
        "but",
        "also",
        "with",
        "as",
        "then",
        "so",
        "than",
        "just",
        "like",
        "use",
        "used",
        "uses",
        "using",
        "work",
        "works",
        "code",
        "codebase",
        "file",
        "files",
    )
)
"""Natural-language filler dropped from the sparse query (ragloom's list): question words,
articles, pronouns, prepositions, connectives, search verbs ("find", "show", "get") and
"code"/"file", which say nothing about *which* code. A filler word that is also a keyword
(``and``, ``or``, ``for``) is still searched when written as code (backticks). Used only to
choose BM25 terms: the dense text keeps every word."""

LANGUAGE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "python": "python",
        "py": "python",
        "rust": "rust",
        "rs": "rust",
        "typescript": "typescript",
        "ts": "typescript",
        "tsx": "tsx",
        "javascript": "javascript",
        "js": "javascript",
        "jsx": "javascript",
        "node": "javascript",
        "go": "go",
        "golang": "go",
        "java": "java",
        "kotlin": "kotlin",
        "kt": "kotlin",
        "c": "c",
        "c++": "cpp",
        "cpp": "cpp",
        "cxx": "cpp",
        "c#": "csharp",
        "csharp": "csharp",
        "cs": "csharp",
        "ruby": "ruby",
        "rb": "ruby",
        "php": "php",
        "swift": "swift",
        "scala": "scala",
        "bash": "bash",
        "shell": "bash",
        "sh": "bash",
        "markdown": "markdown",
        "md": "markdown",
    }
)
"""Language words in a question -> ragloom language id (tree-sitter-language-pack names)."""

EXTENSION_LANGUAGES: Mapping[str, str] = MappingProxyType(
    {
        "py": "python",
        "pyi": "python",
        "rs": "rust",
        "ts": "typescript",
        "tsx": "tsx",
        "js": "javascript",
        "jsx": "javascript",
        "mjs": "javascript",
        "go": "go",
        "java": "java",
        "kt": "kotlin",
        "c": "c",
        "h": "c",
        "cc": "cpp",
        "cpp": "cpp",
        "cxx": "cpp",
        "hpp": "cpp",
        "cs": "csharp",
        "rb": "ruby",
        "php": "php",
        "swift": "swift",
        "scala": "scala",
        "sh": "bash",
        "md": "markdown",
    }
)
"""File extension -> language id, for ".ts file" mentions and named paths."""

_OTHER_EXTENSIONS = ("toml", "yaml", "yml", "json", "txt", "rst", "cfg", "ini", "html", "css")
"""Extensions that make a word a file name without implying a programming language."""

MAX_JOINED_PHRASES = 8
"""At most this many runs of adjacent words are joined into identifier candidates (each gives
three spellings), so a long question cannot crowd the BM25 query (the engine keeps the first
64 distinct terms, ``ragloom.index.bm25``). ragloom's choice."""
_MAX_JOIN_WORDS = 3
"""Adjacent words joined: pairs and triples ("get user name" -> get_user_name)."""
_MIN_WORD_LEN = 2
"""Shorter words are neither joined nor looked up as symbols."""

ENTITY_CONFIDENCE: Mapping[str, float] = MappingProxyType(
    {
        "path_known": 1.0,  # a path the symbol table knows
        "path_unknown": 0.3,  # path-shaped, but the table does not know it
        "path_shaped": 0.6,  # dir/name.ext with no table to check against
        "path_weak": 0.4,  # name.ext or a/b only, no table to check against
        "symbol_typed": 1.0,  # backticked, name(), snake_case, camelCase or dotted, and known
        "symbol_joined": 0.7,  # adjacent words joined ("parse header" -> parse_header), known
        "symbol_word": 0.45,  # a plain word that happens to be a known symbol name
    }
)
"""Entity confidence heuristic (ragloom's; tamma phase 2 asks for a confidence without one).
How the name was written matters most: a name typed as code is meant as code; a plain English
word that is also a symbol name ("parse", "main") is probably not. ``symbol_word`` sits below
:data:`EXACT_MATCH_MIN_CONFIDENCE` so such words are reported but never force a result to the
top. A symbol matching more than :data:`_AMBIGUOUS_IDS` chunks has its confidence halved."""
_AMBIGUOUS_IDS = 5
"""A name defined this many times or more is ambiguous (``__init__``, ``run``): confidence / 2."""

EXACT_MATCH_MIN_CONFIDENCE = 0.75
"""Entities below this confidence do not move hits (ragloom's choice, see ENTITY_CONFIDENCE):
names typed as code and known paths (1.0) do; words joined into an identifier (0.7) only
expand the BM25 query. Tuned on the evaluation datasets (docs/ranking.md, Tuning): at 0.5 the
joined names of identifier-style queries ("create future base event loop" -> BaseEventLoop,
create_future) pushed the wrong definitions first, symbol MRR@10 0.656 vs 0.723 at 0.75."""
EXACT_MATCH_BONUS = 1.0
"""A boosted hit scores ``top score + EXACT_MATCH_BONUS * confidence`` (ragloom's choice): above
every other hit, and higher-confidence entities above lower ones."""


# --------------------------------------------------------------------------------------------
# Config and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """Which query-processing steps run (tamma phase 2), each on by default."""

    expand_identifiers: bool = True
    synonyms: bool = True
    extract_entities: bool = True
    exact_boost: bool = True
    decompose: bool = True
    detect_language: bool = True
    exact_min_confidence: float = EXACT_MATCH_MIN_CONFIDENCE

    def __post_init__(self) -> None:
        for name in (
            "expand_identifiers",
            "synonyms",
            "extract_entities",
            "exact_boost",
            "decompose",
            "detect_language",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"QueryConfig.{name} must be a bool, got {getattr(self, name)!r}")
        conf = self.exact_min_confidence
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0.0 <= conf <= 1.0:
            raise ConfigError(f"QueryConfig.exact_min_confidence must be in [0, 1], got {conf!r}")


EntityKind = Literal["file", "symbol"]


@dataclass(frozen=True, slots=True)
class Entity:
    """A file path or symbol named in the question.

    ``ids`` are the chunk ids the symbol table gave for a symbol (empty for files and when no
    table was given); ``confidence`` in [0, 1] follows :data:`ENTITY_CONFIDENCE`.
    """

    kind: EntityKind
    value: str
    confidence: float
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessedQuery:
    """What :func:`process_query` made of a question."""

    original: str
    dense_text: str
    sparse_text: str
    terms: tuple[str, ...] = ()
    identifier_candidates: tuple[str, ...] = ()
    synonyms_added: tuple[str, ...] = ()
    sub_queries: tuple[ProcessedQuery, ...] = ()
    entities: tuple[Entity, ...] = ()
    language: str | None = None
    steps: tuple[str, ...] = ()
    exact_boost: bool = True

    @property
    def is_empty(self) -> bool:
        """True when the question had no searchable words."""
        return not self.sparse_text and not self.dense_text


@runtime_checkable
class SymbolTable(Protocol):
    """What query processing needs to know about the index's names."""

    def lookup(self, name: str) -> list[str]:
        """Chunk ids of symbols called ``name`` (exactly, or as the last dotted component)."""
        ...

    def has_path(self, path: str) -> bool:
        """True when ``path`` is an indexed file path or a ``/``-aligned suffix of one."""
        ...


class InMemorySymbolTable:
    """A :class:`SymbolTable` built from ``(symbol, path, chunk id)`` rows.

    A qualified symbol ``JSONDecoder.decode`` is found as ``JSONDecoder.decode`` and as
    ``decode``; a path ``Lib/json/decoder.py`` as itself, ``json/decoder.py`` and
    ``decoder.py``. Lookups are case-sensitive (identifiers are).
    """

    __slots__ = ("_by_name", "_paths")

    def __init__(self, rows: Iterable[tuple[str, str, str]] = ()) -> None:
        self._by_name: dict[str, list[str]] = {}
        self._paths: set[str] = set()
        for symbol, path, chunk_id in rows:
            self.add(symbol, path, chunk_id)

    def add(self, symbol: str, path: str, chunk_id: str) -> None:
        """Index one chunk."""
        if symbol:
            parts = symbol.split(".")
            names = {symbol} | {".".join(parts[i:]) for i in range(1, len(parts))}
            for name in sorted(names):
                ids = self._by_name.setdefault(name, [])
                if chunk_id not in ids:
                    ids.append(chunk_id)
        if path:
            segs = _norm_path(path).split("/")
            self._paths.update("/".join(segs[i:]) for i in range(len(segs)))

    def lookup(self, name: str) -> list[str]:
        """Chunk ids for ``name`` (a copy, in insertion order)."""
        return list(self._by_name.get(name, ()))

    def has_path(self, path: str) -> bool:
        """True for an indexed path or a ``/``-aligned suffix of one."""
        return _norm_path(path) in self._paths


def _norm_path(path: str) -> str:
    p = path.replace("\\", "/").strip()
    while p.startswith("./"):
        p = p[2:]
    return p.strip("/")


# --------------------------------------------------------------------------------------------
# Lexing the question
# --------------------------------------------------------------------------------------------

_ALL_EXTENSIONS = tuple(sorted(set(EXTENSION_LANGUAGES) | set(_OTHER_EXTENSIONS), key=len))
_PATH_RE = re.compile(
    r"(?<![\w/.])"
    r"(?:(?:\.{1,2}/)?[\w.-]+/)*[\w-][\w.-]*\.(?:" + "|".join(_ALL_EXTENSIONS[::-1]) + r")\b"
    r"|(?<![\w/.])(?:[\w-]+/)+[\w-]+(?![\w.]*\()"
)
"""A file path: ``[dir/]...name.ext`` with a known extension, or ``a/b[/c...]`` with no dot."""
_WORD_RE = re.compile(r"`[^`\n]+`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?")
"""A query word: backticked text, or an identifier (dotted allowed), optionally ``name()``."""
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


@dataclass(frozen=True, slots=True)
class _Word:
    text: str  # the identifier without backticks / ()
    start: int
    end: int
    typed: bool  # written as code: backticks, name(), snake_case, camelCase or dotted


def _is_code_shaped(word: str) -> bool:
    return "_" in word or "." in word or bool(_CAMEL_RE.search(word))


def _words(text: str) -> list[_Word]:
    out: list[_Word] = []
    for m in _WORD_RE.finditer(text):
        raw = m.group(0)
        if raw.startswith("`"):
            inner = raw[1:-1].strip().removesuffix("()")
            if re.fullmatch(r"[A-Za-z_][\w.]*", inner):
                out.append(_Word(inner, m.start(), m.end(), True))
            else:  # backticked non-identifier (a path, an expression): its words, untyped
                out.extend(
                    _Word(w.group(0), m.start() + 1 + w.start(), m.start() + 1 + w.end(), False)
                    for w in re.finditer(r"[A-Za-z_]\w*", raw[1:-1])
                )
            continue
        called = raw.endswith("()")
        word = raw.removesuffix("()")
        out.append(_Word(word, m.start(), m.end(), called or _is_code_shaped(word)))
    return out


def _clean(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------
# Language detection
# --------------------------------------------------------------------------------------------

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


def _path_language(paths: Iterable[str]) -> str | None:
    langs = set()
    for p in paths:
        ext = p.rsplit(".", 1)[-1].lower() if "." in p.rsplit("/", 1)[-1] else ""
        lang = EXTENSION_LANGUAGES.get(ext)
        if lang is not None:
            langs.add(lang)
    return langs.pop() if len(langs) == 1 else None


# --------------------------------------------------------------------------------------------
# Expansion
# --------------------------------------------------------------------------------------------


def _join_forms(words: Sequence[str]) -> list[str]:
    lower = [w.lower() for w in words]
    snake = "_".join(lower)
    camel = lower[0] + "".join(w.capitalize() for w in lower[1:])
    pascal = "".join(w.capitalize() for w in lower)
    return [snake, camel, pascal]


def identifier_candidates(query: str) -> list[str]:
    """Identifiers a question may be spelling out in words: each run of 2-3 adjacent plain
    words (filler words break a run) joined as snake_case, camelCase and PascalCase:
    ``parse header`` -> ``parse_header``, ``parseHeader``, ``ParseHeader``.

    At most :data:`MAX_JOINED_PHRASES` runs, pairs before triples, in question order.
    """
    return _identifier_candidates(_words(query), query)


def _identifier_candidates(words: Sequence[_Word], text: str) -> list[str]:
    runs: list[list[str]] = [[]]
    prev_end = -1
    for w in words:
        plain = (
            not w.typed
            and w.text.isalpha()
            and w.text.isascii()
            and len(w.text) >= _MIN_WORD_LEN
            and w.text.lower() not in QUERY_STOPWORDS
        )
        # A run continues only across whitespace: "parse, header" is two runs.
        adjacent = prev_end >= 0 and not text[prev_end : w.start].strip()
        if not plain:
            runs.append([])
        else:
            if runs[-1] and not adjacent:
                runs.append([])
            runs[-1].append(w.text)
        prev_end = w.end
    phrases: list[tuple[str, ...]] = []
    for size in range(2, _MAX_JOIN_WORDS + 1):
        for run in runs:
            for i in range(len(run) - size + 1):
                phrases.append(tuple(run[i : i + size]))
    out: list[str] = []
    for phrase in phrases[:MAX_JOINED_PHRASES]:
        for form in _join_forms(phrase):
            if form not in out:
                out.append(form)
    return out


def _split_parts(word: str) -> list[str]:
    parts: list[str] = []
    for comp in word.split("."):
        for p in split_identifier(comp):
            if p not in parts:
                parts.append(p)
    return parts


def expand_query(
    query: str, *, identifiers: bool = True, synonyms: bool = True
) -> tuple[list[str], list[str], list[str]]:
    """BM25 terms for a question: ``(terms, identifier candidates, synonyms added)``.

    ``terms`` is, in order and without case-insensitive repeats: every non-filler word as
    written; with ``identifiers``, the parts of each snake_case / camelCase / dotted name and the
    joined candidates of :func:`identifier_candidates`; with ``synonyms``, the
    :data:`CODE_SYNONYMS` of every word and part. Original words come first because the BM25
    engine keeps only the first 64 distinct terms.
    """
    return _expand(_words(query), query, identifiers=identifiers, synonyms=synonyms)


def _expand(
    words: Sequence[_Word], text: str, *, identifiers: bool, synonyms: bool
) -> tuple[list[str], list[str], list[str]]:
    seen: set[str] = set()
    terms: list[str] = []

    def add(term: str) -> bool:
        key = term.lower()
        if not term or key in seen:
            return False
        seen.add(key)
        terms.append(term)
        return True

    paths = [m.group(0) for m in _PATH_RE.finditer(text)]
    path_spans = [(m.start(), m.end()) for m in _PATH_RE.finditer(text)]
    kept: list[_Word] = []
    for w in words:
        inside_path = any(s <= w.start and w.end <= e for s, e in path_spans)
        if inside_path:
            continue
        if not w.typed and w.text.lower() in QUERY_STOPWORDS:
            continue
        kept.append(w)
    for p in paths:
        add(p)
    for w in kept:
        add(w.text)
    cands: list[str] = []
    if identifiers:
        for w in kept:
            if w.typed:
                for part in _split_parts(w.text):
                    add(part)
        cands = _identifier_candidates(words, text)
        for c in cands:
            add(c)
    added: list[str] = []
    if synonyms:
        bases: list[str] = []
        for w in kept:
            bases.append(w.text.lower())
            if w.typed:
                bases.extend(_split_parts(w.text))
        for base in bases:
            for syn in CODE_SYNONYMS.get(base, ()):
                if add(syn):
                    added.append(syn)
    return terms, cands, added


# --------------------------------------------------------------------------------------------
# Entities
# --------------------------------------------------------------------------------------------


def extract_entities(query: str, symbols: SymbolTable | None = None) -> list[Entity]:
    """File paths and known symbol names in a question, most confident first.

    Paths are found by shape (``dir/name.ext`` with a known extension, ``name.ext``, or
    ``a/b/c``) and checked with ``symbols.has_path`` when a table is given. Symbols are only
    reported when a table is given and knows the name: every identifier in the question, and
    every candidate of :func:`identifier_candidates`. Confidences: :data:`ENTITY_CONFIDENCE`.
    """
    return _entities(query, _words(query), symbols)


def _entities(text: str, words: Sequence[_Word], symbols: SymbolTable | None) -> list[Entity]:
    found: dict[tuple[str, str], Entity] = {}

    def put(ent: Entity) -> None:
        key = (ent.kind, ent.value)
        prev = found.get(key)
        if prev is None or ent.confidence > prev.confidence:
            found[key] = ent

    path_spans: list[tuple[int, int]] = []
    for m in _PATH_RE.finditer(text):
        raw = m.group(0)
        path_spans.append((m.start(), m.end()))
        norm = _norm_path(raw)
        if not norm:
            continue
        last = norm.rsplit("/", 1)[-1]
        has_ext = "." in last and last.rsplit(".", 1)[-1].lower() in _ALL_EXTENSIONS
        if symbols is not None:
            conf = ENTITY_CONFIDENCE["path_known" if symbols.has_path(norm) else "path_unknown"]
        elif has_ext and "/" in norm:
            conf = ENTITY_CONFIDENCE["path_shaped"]
        else:
            conf = ENTITY_CONFIDENCE["path_weak"]
        put(Entity("file", norm, conf))
    if symbols is None:
        return _sorted_entities(found.values())
    names: list[tuple[str, float]] = []
    for w in words:
        if any(s <= w.start and w.end <= e for s, e in path_spans):
            continue
        if w.typed:
            names.append((w.text, ENTITY_CONFIDENCE["symbol_typed"]))
        elif len(w.text) > _MIN_WORD_LEN and w.text.lower() not in QUERY_STOPWORDS:
            names.append((w.text, ENTITY_CONFIDENCE["symbol_word"]))
    names.extend(
        (c, ENTITY_CONFIDENCE["symbol_joined"]) for c in _identifier_candidates(words, text)
    )
    for name, base in names:
        ids = symbols.lookup(name)
        if not ids:
            continue
        conf = base / 2 if len(ids) >= _AMBIGUOUS_IDS else base
        put(Entity("symbol", name, conf, tuple(ids)))
    return _sorted_entities(found.values())


def _sorted_entities(ents: Iterable[Entity]) -> list[Entity]:
    return sorted(ents, key=lambda e: (-e.confidence, e.kind, e.value))


# --------------------------------------------------------------------------------------------
# Decomposition
# --------------------------------------------------------------------------------------------

_QUESTION_WORDS = (
    r"(?:how|where|what|why|when|which|who|does|do|is|are|can|should|could|would|will|"
    r"was|were|did|has|have|show|find|list|explain)"
)
_SPLITTERS = (
    re.compile(r"\s*;\s*"),  # "X; Y"
    re.compile(r"\?\s+(?=\S)"),  # "X? Y?"
    re.compile(r",?\s+(?:and|but)\s+also\s+|,?\s+as\s+well\s+as\s+|,?\s+plus\s+also\s+", re.I),
    re.compile(r",?\s+(?:and|but)\s+(?=" + _QUESTION_WORDS + r"\b)", re.I),  # "... and where is Y"
    re.compile(r"\.\s+(?:also|and)\s*,?\s+", re.I),  # "X. Also, Y"
)
"""Where a compound question splits: ';', a '?' followed by more text, "and also"/"but also"/
"as well as", "and"/"but" followed by a question word, and ". Also" at a sentence start."""
_MIN_SUBQUERY_WORDS = 1
"""A part with fewer content (non-filler) words than this is glued back to the part before it
(ragloom's choice): "how is X parsed and how" has no second question."""


def decompose_query(query: str) -> list[str]:
    """Split a compound question into its parts, or ``[]`` when it is a single question.

    ``"how is X parsed and where is Y stored?"`` -> ``["how is X parsed", "where is Y stored"]``;
    ``"X; Y"`` -> ``["X", "Y"]``; ``"X and also Y"`` -> ``["X", "Y"]``. A plain "and" between two
    words ("parse and serialize") does not split. Parts keep their words; trailing punctuation
    is dropped.
    """
    parts = [_clean(query)]
    for splitter in _SPLITTERS:
        parts = [p for part in parts for p in splitter.split(part)]
    out: list[str] = []
    for part in parts:
        p = part.strip(" \t\n?.!,;:")
        if not p:
            continue
        content = [w for w in _words(p) if w.typed or w.text.lower() not in QUERY_STOPWORDS]
        if out and len(content) < _MIN_SUBQUERY_WORDS and not any(w.typed for w in content):
            out[-1] = f"{out[-1]} and {p}"
        else:
            out.append(p)
    return out if len(out) > 1 else []


# --------------------------------------------------------------------------------------------
# Query style: keywords or prose
# --------------------------------------------------------------------------------------------

_PROSE_MARKERS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "its",
        "their",
        "each",
        "every",
        "given",
        "any",
        "some",
        "whether",
        "which",
        "what",
        "how",
        "where",
        "when",
        "why",
    ]
)
"""Determiners and question words: one of them makes a question prose."""
_FUNCTION_WORDS = frozenset(
    [
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "at",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "and",
        "or",
        "if",
        "not",
        "into",
        "than",
        "then",
        "do",
        "does",
        "can",
        "should",
        "must",
        "will",
    ]
)
"""Prepositions, auxiliaries and conjunctions: identifiers contain at most one
(``is_running``, ``write_to_self``), sentences usually more."""
KEYWORD_QUERY_MAX_WORDS = 8
"""A keyword query has at most this many words (ragloom's choice)."""

QueryStyle = Literal["keyword", "prose"]


def query_style(query: str) -> QueryStyle:
    """``keyword`` for a short bag of names ("parse header http", "create future event loop"),
    ``prose`` for a sentence ("Create a Future object attached to the loop").

    Keyword: at most :data:`KEYWORD_QUERY_MAX_WORDS` words, no determiner or question word and
    at most one function word. On the evaluation datasets this labels 99.1% of the
    identifier-style queries keyword and 85.2% of the docstring queries prose
    (docs/ranking.md, Tuning); the retriever weights BM25 higher for keyword queries, where it
    is measured to be the stronger modality.
    """
    words = [w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)]
    if not words or len(words) > KEYWORD_QUERY_MAX_WORDS:
        return "prose"
    if any(w in _PROSE_MARKERS for w in words):
        return "prose"
    return "keyword" if sum(w in _FUNCTION_WORDS for w in words) <= 1 else "prose"


# --------------------------------------------------------------------------------------------
# Whole pipeline
# --------------------------------------------------------------------------------------------


def process_query(
    query: str, cfg: QueryConfig | None = None, symbols: SymbolTable | None = None
) -> ProcessedQuery:
    """Run the enabled steps of :class:`QueryConfig` on a question (tamma phase 2).

    ``steps`` lists the steps that ran, in order. A question with no searchable text gives an
    empty ProcessedQuery (``is_empty``) rather than an error: the caller decides.
    """
    c = cfg if cfg is not None else QueryConfig()
    return _process(query, c, symbols, top_level=True)


def _process(
    query: str, cfg: QueryConfig, symbols: SymbolTable | None, *, top_level: bool
) -> ProcessedQuery:
    dense = _clean(query)
    if not dense:
        return ProcessedQuery(
            original=query, dense_text="", sparse_text="", exact_boost=cfg.exact_boost
        )
    steps: list[str] = []
    language: str | None = None
    lang_spans: list[tuple[int, int]] = []
    if cfg.detect_language:
        steps.append("detect_language")
        language, lang_spans = detect_language(dense)
    words = [
        w for w in _words(dense) if not any(s <= w.start and w.end <= e for s, e in lang_spans)
    ]
    # Blank out language mentions so "in rust" does not become a BM25 term.
    text = dense
    for s, e in sorted(lang_spans, reverse=True):
        text = text[:s] + " " * (e - s) + text[e:]
    entities: list[Entity] = []
    if cfg.extract_entities:
        steps.append("extract_entities")
        entities = _entities(text, words, symbols)
        if language is None and cfg.detect_language:
            language = _path_language(e.value for e in entities if e.kind == "file")
    if cfg.expand_identifiers:
        steps.append("expand_identifiers")
    if cfg.synonyms:
        steps.append("synonyms")
    terms, cands, added = _expand(
        words, text, identifiers=cfg.expand_identifiers, synonyms=cfg.synonyms
    )
    if not terms:  # only filler words: keep them (once each) rather than search for nothing
        firsts: dict[str, str] = {}
        for w in words:
            firsts.setdefault(w.text.lower(), w.text)
        terms = list(firsts.values())
    subs: tuple[ProcessedQuery, ...] = ()
    if cfg.decompose and top_level:
        steps.append("decompose")
        parts = decompose_query(dense)
        if parts:
            sub_cfg = QueryConfig(
                expand_identifiers=cfg.expand_identifiers,
                synonyms=cfg.synonyms,
                extract_entities=cfg.extract_entities,
                exact_boost=cfg.exact_boost,
                decompose=False,
                detect_language=cfg.detect_language,
                exact_min_confidence=cfg.exact_min_confidence,
            )
            subs = tuple(_process(p, sub_cfg, symbols, top_level=False) for p in parts)
    return ProcessedQuery(
        original=query,
        dense_text=dense,
        sparse_text=" ".join(terms),
        terms=tuple(terms),
        identifier_candidates=tuple(cands),
        synonyms_added=tuple(added),
        sub_queries=subs,
        entities=tuple(entities),
        language=language,
        steps=tuple(steps),
        exact_boost=cfg.exact_boost,
    )


# --------------------------------------------------------------------------------------------
# Exact-match boost
# --------------------------------------------------------------------------------------------


def _path_matches(path: str, value: str) -> bool:
    p = _norm_path(path)
    v = _norm_path(value)
    return p == v or p.endswith("/" + v)


def _symbol_matches(symbol: str, value: str) -> bool:
    return symbol == value or symbol.endswith("." + value)


def exact_match_boost(
    hits: Sequence[tuple[str, float]],
    entities: Sequence[Entity],
    cfg: QueryConfig | None = None,
    *,
    id_paths: Mapping[str, str] | None = None,
    id_symbols: Mapping[str, str] | None = None,
) -> list[tuple[str, float]]:
    """Bring hits that are a named symbol or file to the top.

    A hit matches a symbol entity when its id is one of the entity's ``ids``, or its symbol
    (``id_symbols``) equals the name or ends with ``.name``; it matches a file entity when its
    path (``id_paths``) equals the path or ends with ``/path``. Only entities with confidence
    ``>= cfg.exact_min_confidence`` count, and nothing moves when ``cfg.exact_boost`` is off.
    A matching hit scores ``top + EXACT_MATCH_BONUS * confidence`` (its best entity), where
    ``top`` is the highest input score, so the output stays sorted by score; boosted hits are
    ordered by that score, then their original score, then their original position; the other
    hits follow in their original order with their original scores. Hits are never added or
    dropped (a named symbol that retrieval missed is for the caller to fetch: ``Entity.ids``).
    """
    c = cfg if cfg is not None else QueryConfig()
    if not hits or not c.exact_boost:
        return list(hits)
    strong = [e for e in entities if e.confidence >= c.exact_min_confidence]
    if not strong:
        return list(hits)
    paths = id_paths or {}
    syms = id_symbols or {}
    top = max(s for _, s in hits)
    boosted: list[tuple[float, float, int, str]] = []
    rest: list[tuple[str, float]] = []
    for pos, (uid, score) in enumerate(hits):
        best = 0.0
        for e in strong:
            if e.kind == "symbol":
                sym = syms.get(uid)
                hit = uid in e.ids or (sym is not None and _symbol_matches(sym, e.value))
            else:
                path = paths.get(uid)
                hit = path is not None and _path_matches(path, e.value)
            if hit and e.confidence > best:
                best = e.confidence
        if best > 0.0:
            boosted.append((top + EXACT_MATCH_BONUS * best, score, pos, uid))
        else:
            rest.append((uid, score))
    boosted.sort(key=lambda b: (-b[0], -b[1], b[2]))
    return [(uid, new) for new, _, _, uid in boosted] + rest
