"""Language detection and the per-language tables the chunker walks syntax trees with.

Language names are tree-sitter-language-pack names (``get_parser(name)`` accepts them).
Only the languages in :data:`CODE_SPECS` are chunked into symbols; markdown is split by
headings; every other detected language (and unknown text) is cut into line windows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Final

from ragloom.types import ChunkKind

__all__ = [
    "CODE_SPECS",
    "EXTENSIONS",
    "FILENAMES",
    "LangSpec",
    "detect_language",
]


@dataclass(frozen=True, slots=True)
class LangSpec:
    """How to find symbols in one language's tree-sitter tree.

    Node type names come from each grammar's ``node-types.json`` as shipped in
    tree-sitter-language-pack 0.13.0 (checked by parsing samples, see the fixtures).
    """

    name: str
    functions: frozenset[str]
    """Node types that define a function (a method when inside a container)."""
    containers: dict[str, ChunkKind] = field(default_factory=dict)
    """Node types that define a container symbol, with the chunk kind they produce."""
    namespaces: frozenset[str] = frozenset()
    """Named scopes that qualify the symbols inside but get no chunk of their own."""
    wrappers: frozenset[str] = frozenset()
    """Transparent wrappers (decorators, ``export``, ``template<>``) around a definition."""
    descend: frozenset[str] = frozenset()
    """Statements whose children may hold definitions (``if``/``try``/preprocessor blocks)."""
    comments: frozenset[str] = frozenset()
    """Sibling nodes attached to the definition right below them (comments, attributes)."""
    brace: bool = True
    """True when bodies are ``{ ... }`` blocks (decides how an elided member is rendered)."""
    line_comment: str = "//"
    """Line comment marker: the part label of a split symbol is written as such a comment."""


_C_DESCEND: Final = frozenset(
    {
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "declaration_list",
        "ERROR",
    }
)
_JS_DESCEND: Final = frozenset(
    {
        "if_statement",
        "else_clause",
        "statement_block",
        "try_statement",
        "catch_clause",
        "finally_clause",
        "expression_statement",
        "ambient_declaration",
        "ERROR",
    }
)
_JS_FUNCTIONS: Final = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "lexical_declaration",  # only `const f = () => ...`; filtered by the chunker
        "variable_declaration",
        "assignment_expression",  # only `a.b = function ...`; filtered by the chunker
    }
)
_TS_CONTAINERS: Final[dict[str, ChunkKind]] = {
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "enum_declaration": "enum",
}

_TS_SPEC = LangSpec(
    name="typescript",
    functions=_JS_FUNCTIONS,
    containers=_TS_CONTAINERS,
    namespaces=frozenset({"internal_module", "module"}),
    wrappers=frozenset({"export_statement"}),
    descend=_JS_DESCEND,
    comments=frozenset({"comment"}),
)

CODE_SPECS: Final[dict[str, LangSpec]] = {
    "python": LangSpec(
        name="python",
        functions=frozenset({"function_definition"}),
        containers={"class_definition": "class"},
        wrappers=frozenset({"decorated_definition"}),
        descend=frozenset(
            {
                "if_statement",
                "elif_clause",
                "else_clause",
                "try_statement",
                "except_clause",
                "except_group_clause",
                "finally_clause",
                "with_statement",
                "for_statement",
                "while_statement",
                "block",
                "ERROR",
            }
        ),
        comments=frozenset({"comment"}),
        brace=False,
        line_comment="#",
    ),
    "javascript": LangSpec(
        name="javascript",
        functions=_JS_FUNCTIONS,
        containers={"class_declaration": "class"},
        wrappers=frozenset({"export_statement"}),
        descend=_JS_DESCEND,
        comments=frozenset({"comment"}),
    ),
    "typescript": _TS_SPEC,
    "tsx": replace(_TS_SPEC, name="tsx"),  # TSX is TypeScript's grammar plus JSX
    "go": LangSpec(
        name="go",
        functions=frozenset({"function_declaration", "method_declaration"}),
        containers={"type_declaration": "struct"},  # struct or interface, see the chunker
        descend=frozenset({"ERROR"}),
        comments=frozenset({"comment"}),
    ),
    "rust": LangSpec(
        name="rust",
        functions=frozenset({"function_item"}),
        containers={
            "struct_item": "struct",
            "union_item": "struct",
            "enum_item": "enum",
            "trait_item": "trait",
            "impl_item": "impl",
        },
        namespaces=frozenset({"mod_item"}),
        descend=frozenset({"ERROR"}),
        comments=frozenset({"line_comment", "block_comment", "attribute_item"}),
    ),
    "java": LangSpec(
        name="java",
        functions=frozenset({"method_declaration", "constructor_declaration"}),
        containers={
            "class_declaration": "class",
            "record_declaration": "class",
            "interface_declaration": "interface",
            "annotation_type_declaration": "interface",
            "enum_declaration": "enum",
        },
        descend=frozenset({"enum_body_declarations", "ERROR"}),
        comments=frozenset({"line_comment", "block_comment"}),
    ),
    "c": LangSpec(
        name="c",
        functions=frozenset({"function_definition"}),
        containers={
            "struct_specifier": "struct",
            "union_specifier": "struct",
            "enum_specifier": "enum",
            "type_definition": "struct",  # typedef struct {...} T; kind from the inner type
        },
        descend=_C_DESCEND,
        comments=frozenset({"comment"}),
    ),
    "cpp": LangSpec(
        name="cpp",
        functions=frozenset({"function_definition"}),
        containers={
            "class_specifier": "class",
            "struct_specifier": "struct",
            "union_specifier": "struct",
            "enum_specifier": "enum",
            "type_definition": "struct",
        },
        namespaces=frozenset({"namespace_definition"}),
        wrappers=frozenset({"template_declaration"}),
        descend=_C_DESCEND,
        comments=frozenset({"comment"}),
    ),
    "ruby": LangSpec(
        name="ruby",
        functions=frozenset({"method", "singleton_method"}),
        containers={"class": "class"},
        namespaces=frozenset({"module"}),
        descend=frozenset({"body_statement", "if", "unless", "begin", "ERROR"}),
        comments=frozenset({"comment"}),
        brace=False,
        line_comment="#",
    ),
    "bash": LangSpec(
        name="bash",
        functions=frozenset({"function_definition"}),
        descend=frozenset({"if_statement", "else_clause", "elif_clause", "ERROR"}),
        comments=frozenset({"comment"}),
        line_comment="#",
    ),
}
"""Languages chunked into symbols."""

EXTENSIONS: Final[dict[str, str]] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
    ".ipp": "cpp",
    ".rb": "ruby",
    ".rake": "ruby",
    ".gemspec": "ruby",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdown": "markdown",
    ".sh": "bash",
    ".bash": "bash",
    ".zsh": "bash",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".rst": "rst",
    ".cs": "csharp",
    ".php": "php",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".swift": "swift",
    ".lua": "lua",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".sql": "sql",
    ".xml": "xml",
    ".ini": "ini",
    ".cfg": "ini",
    ".proto": "proto",
    ".cmake": "cmake",
}
"""File extension (lower case, with the dot) to language name."""

FILENAMES: Final[dict[str, str]] = {
    "Dockerfile": "dockerfile",
    "Makefile": "make",
    "GNUmakefile": "make",
    "CMakeLists.txt": "cmake",
    "Rakefile": "ruby",
    "Gemfile": "ruby",
    ".bashrc": "bash",
    ".profile": "bash",
}
"""Exact file names that carry no telling extension."""


def detect_language(path: str) -> str:
    """Return the tree-sitter-language-pack name of ``path``'s language, or ``"text"``."""
    p = PurePosixPath(path)
    by_name = FILENAMES.get(p.name)
    if by_name is not None:
        return by_name
    return EXTENSIONS.get(p.suffix.lower(), "text")
