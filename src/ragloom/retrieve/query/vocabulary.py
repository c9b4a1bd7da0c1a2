"""The word lists of query processing (ragloom's own; tamma phase 2 asks for "synonyms and
related terms" without a list): code-vocabulary synonyms, the filler words left out of the BM25
query, and the names and file extensions of programming languages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

__all__ = [
    "CODE_SYNONYMS",
    "EXTENSION_LANGUAGES",
    "LANGUAGE_ALIASES",
    "OTHER_EXTENSIONS",
    "QUERY_STOPWORDS",
]

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

OTHER_EXTENSIONS = ("toml", "yaml", "yml", "json", "txt", "rst", "cfg", "ini", "html", "css")
"""Extensions that make a word a file name without implying a programming language."""
