"""File roles and declarations: ranking priors for questions about what code does (issue 11).

A question an agent asks ("Add support for tuples as positional arguments in rich repr") is
answered by the implementation; tests, docs, examples, build files and type declarations that
mention the same words crowd it out (docs/evaluation.md, "Real agent questions"). This module
classifies a chunk's file by its path alone (:func:`file_role`), tells whether a chunk is a
signature without a body (:func:`is_declaration`), and reads from a question which roles it asks
for (:func:`query_intent`) and whether it asks for a change (:func:`change_request`). All functions are pure and deterministic; the retriever
(``ragloom.retrieve.search``) turns them into multiplicative demotions.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Literal, get_args

__all__ = [
    "FILE_ROLES",
    "FileRole",
    "change_request",
    "file_role",
    "is_declaration",
    "query_intent",
]

FileRole = Literal[
    "implementation",
    "test",
    "documentation",
    "changelog",
    "example",
    "build",
    "generated",
    "declaration",
]
FILE_ROLES: tuple[FileRole, ...] = get_args(FileRole)
"""Every role, implementation first."""

_TEST_DIRS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "__tests__",
        "__test__",
        "spec",
        "specs",
        "testdata",
        "test_data",
        "fixtures",
        "__fixtures__",
        "__mocks__",
        "e2e",
        "integration_tests",
        "bench",
        "benches",
        "benchmark",
        "benchmarks",
        "asv_bench",
    }
)
_TEST_FILE_RE = re.compile(
    r"^(?:test_.*\.py|.*_tests?\.(?:py|go|rs|rb|c|cc|cpp|ex|exs)|conftest\.py|"
    r".*\.(?:test|spec|bench)\.[cm]?[jt]sx?|.*_(?:spec|bench)\.\w+|tests?\.rs|benches?\.rs)$",
    re.IGNORECASE,
)
_DOC_DIRS = frozenset({"doc", "docs", "documentation", "website", "site", "book", "guide"})
_PROSE_EXT = frozenset({".md", ".mdx", ".rst", ".txt", ".markdown", ".adoc", ".asciidoc"})
_CHANGELOG_RE = re.compile(
    r"^(?:changelog|changes|history|news|release[-_ ]?notes|releases|upgrading|migration)"
    r"(?:[-_.][\w.-]*)?$",
    re.IGNORECASE,
)
_EXAMPLE_DIRS = frozenset(
    {"example", "examples", "sample", "samples", "demo", "demos", "playground", "tutorial"}
)
_EXAMPLE_FILE_RE = re.compile(r"^(?:examples?|demo|sample)[-_.].*", re.IGNORECASE)
_BUILD_DIRS = frozenset(
    {"ci", "scripts", "script", "tools", "build", "hack", "xtask", "bin", "gulp", "grunt"}
)
_BUILD_EXT = frozenset(
    {".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".lock", ".xml", ".mk", ".cmake"}
)
_BUILD_FILE_RE = re.compile(
    r"^(?:build\.rs|makefile|dockerfile.*|"
    r"justfile|magefile\.go|mage\.go|"
    r"(?:.*\.)?(?:config|conf|rc)\.[cm]?[jt]s|\.?[\w-]*rc(?:\.[cm]?js)?|"
    r"(?:gulpfile|gruntfile|webpack|rollup|vite|vitest|jest|karma|tsup|esbuild|eslint|"
    r"prettier|babel|commitlint|lint-staged|playwright|tsdown|tsconfig)\b.*)$",
    re.IGNORECASE,
)
_ROOT_BUILD_FILE_RE = re.compile(r"^(?:setup|noxfile|tasks|fabfile)\.py$", re.IGNORECASE)
"""Python build and task scripts, build files only at the repository root: ``tasks.py`` there
is an invoke file, but ``asyncio/tasks.py`` is the implementation of asyncio's tasks (the stdlib
docstring set lost 0.010 file MRR@10 while it was demoted as build)."""
_GENERATED_DIRS = frozenset({"dist", "vendor", "node_modules", "generated", "__generated__"})
_GENERATED_FILE_RE = re.compile(
    r"(?:_pb2(?:_grpc)?\.pyi?|\.pb(?:\.gw)?\.go|^zz_generated.*|_generated\.\w+|"
    r"\.generated\.\w+|\.gen\.\w+|_gen\.go|\.min\.[cm]?js|-min\.js|\.bundle\.[cm]?js|"
    r"\.map)$",
    re.IGNORECASE,
)
_DECLARATION_FILE_RE = re.compile(r"(?:\.d\.[cm]?ts|\.pyi|\.h|\.hh|\.hpp|\.hxx)$", re.IGNORECASE)


@lru_cache(maxsize=65536)
def file_role(path: str) -> FileRole:
    """The role of a repository-relative file, from its folders, name and extension.

    Order of the checks (the first that matches wins): test (a test folder or test file name,
    benchmarks included), changelog (``CHANGELOG.md``, ``HISTORY.rst``, ``release-notes``),
    documentation (a docs folder or a prose extension), example, generated (``dist/``,
    ``vendor/``, ``_pb2.py``, ``.min.js``), build (CI and script folders, hidden folders,
    config files and data formats), declaration (``.d.ts``, ``.pyi``, C/C++ headers), and
    implementation for the rest.
    """
    p = PurePosixPath(path.replace("\\", "/"))
    # Go hides folders from the build with a leading "_" ("_examples")
    dirs = [d.lower().lstrip("_") or d.lower() for d in p.parts[:-1]]
    name = p.name
    low = name.lower()
    ext = p.suffix.lower()
    if _TEST_FILE_RE.match(name) or any(d in _TEST_DIRS for d in dirs):
        return "test"
    if _CHANGELOG_RE.match(p.stem if ext in _PROSE_EXT else name) and (
        ext in _PROSE_EXT or not ext
    ):
        return "changelog"
    if (ext != ".go" and any(d in _DOC_DIRS for d in dirs)) or ext in _PROSE_EXT:
        # a Go file in a folder is a package of the module (cobra's `doc` package writes man
        # pages): code, whatever the folder is called
        return "documentation"
    if any(d in _EXAMPLE_DIRS for d in dirs) or _EXAMPLE_FILE_RE.match(low):
        return "example"
    if any(d in _GENERATED_DIRS for d in dirs) or _GENERATED_FILE_RE.search(name):
        return "generated"
    if (
        any(d.startswith(".") for d in dirs)
        or any(d in _BUILD_DIRS for d in dirs)
        or ext in _BUILD_EXT
        or _BUILD_FILE_RE.match(name)
        or (not dirs and _ROOT_BUILD_FILE_RE.match(name))
    ):
        return "build"
    if _DECLARATION_FILE_RE.search(name):
        return "declaration"
    return "implementation"


_DECLARATION_KINDS = frozenset({"interface", "type_alias", "type", "signature", "declaration"})
"""Chunk kinds that hold a shape without behaviour (TypeScript and Go interfaces)."""
_PY_DEF_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+", re.MULTILINE)
_PY_STUB_DEF_RE = re.compile(
    r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[^\n]*:[ \t]*(?:\.\.\.|pass)[ \t]*(?:#[^\n]*)?$",
    re.MULTILINE,
)
_PY_BODY_LINE_RE = re.compile(
    r"^[ \t]+(?!(?:\.\.\.|pass|@|#|\"\"\"|'''|def |async def |[\w.]+[ \t]*:[^=\n]*$))\S",
    re.MULTILINE,
)
_ABSTRACT_RE = re.compile(
    r"@(?:abc\.)?abstract(?:method|property)|raise[ \t]+NotImplementedError|\babstract[ \t]+\w"
)
_TS_DECLARE_RE = re.compile(r"^\s*(?:export\s+)?declare\s", re.MULTILINE)


def is_declaration(path: str, kind: str, text: str | None = None) -> bool:
    """True for a chunk that states a signature or a shape but holds no implementation.

    From the path and kind alone: a chunk of a declaration file (``.d.ts``, ``.pyi``, a C/C++
    header) or of an interface kind. With the text: a Python class skeleton whose methods are
    all ``...``/``pass`` (the chunker's class chunks elide method bodies, which are their own
    chunks) and with no other statements than annotations and docstrings, an abstract method
    (``@abstractmethod``, ``raise NotImplementedError``, TypeScript ``abstract``), or an ambient
    TypeScript ``declare``.
    """
    if file_role(path) == "declaration" or kind.lower() in _DECLARATION_KINDS:
        return True
    if not text:
        return False
    # each pattern needs a literal word: a substring test (C, no regex machine) rules most
    # texts out first (the priors stage asks this of ~70 candidates per question)
    if (
        kind in ("class", "method", "function")
        and ("abstract" in text or "NotImplementedError" in text)
        and _ABSTRACT_RE.search(text) is not None
    ):
        first = text.split("\n", 1)[0]
        return kind != "class" or "Protocol" in first or "ABC" in first
    if "declare" in text and _TS_DECLARE_RE.search(text) is not None:
        return True
    if kind == "class" and path.endswith((".py", ".pyi")):
        defs = len(_PY_DEF_RE.findall(text))
        stubs = len(_PY_STUB_DEF_RE.findall(text))
        body = text.split("\n", 1)[1] if "\n" in text else ""
        return defs > 0 and defs == stubs and _PY_BODY_LINE_RE.search(body) is None
    return False


_INTENT_WORDS: dict[FileRole, frozenset[str]] = {
    "test": frozenset(
        {
            "test",
            "tests",
            "testing",
            "tested",
            "unittest",
            "unittests",
            "pytest",
            "spec",
            "specs",
            "fixture",
            "fixtures",
            "coverage",
            "benchmark",
            "benchmarks",
            "bench",
            "flaky",
        }
    ),
    "documentation": frozenset(
        {
            "doc",
            "docs",
            "documentation",
            "documented",
            "readme",
            "tutorial",
            "guide",
            "typo",
            "typos",
            "wording",
        }
    ),
    "changelog": frozenset({"changelog", "changes", "release", "releases", "history", "news"}),
    "example": frozenset({"example", "examples", "demo", "demos", "sample", "samples"}),
    "build": frozenset(
        {
            "build",
            "ci",
            "workflow",
            "workflows",
            "lint",
            "linter",
            "eslint",
            "ruff",
            "mypy",
            "makefile",
            "docker",
            "dockerfile",
            "packaging",
            "dependency",
            "dependencies",
            "deps",
            "bump",
            "tsconfig",
            "pyproject",
            "cargo",
        }
    ),
    "generated": frozenset({"generated", "generate", "codegen", "vendor", "vendored", "bundle"}),
    "declaration": frozenset(
        {
            "declaration",
            "declarations",
            "typing",
            "typings",
            "types",
            "stub",
            "stubs",
            "signature",
            "signatures",
            "interface",
            "interfaces",
            "abstract",
            "d.ts",
        }
    ),
}
"""Words that make a question ask for a role (ragloom's lists). Left out on purpose, because
on the issue-11 tune split they name something else far more often: "header(s)" and
"protocol" (HTTP, 31 and 3 of 700 questions), "config" and "setup" (a library's own options
and set-up code, 11)."""
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z]+)?")


@lru_cache(maxsize=4096)
def query_intent(query: str) -> frozenset[FileRole]:
    """The non-implementation roles a question asks for, by its words (case-insensitive):
    ``"fix flaky test for the router"`` -> ``{"test"}``; ``"add types for the d.ts"`` ->
    ``{"declaration"}``. A role in the result is not demoted for this question."""
    words = {w.lower() for w in _WORD_RE.findall(query)}
    words |= {w.split(".", 1)[0] for w in words if "." in w}
    return frozenset(role for role, vocab in _INTENT_WORDS.items() if words & vocab)


_CHANGE_VERBS = frozenset(
    [
        "add",
        "adds",
        "added",
        "adding",
        "fix",
        "fixes",
        "fixed",
        "fixing",
        "bugfix",
        "hotfix",
        "remove",
        "removes",
        "removed",
        "removing",
        "update",
        "updates",
        "updated",
        "updating",
        "use",
        "make",
        "allow",
        "allows",
        "allowed",
        "support",
        "supports",
        "supported",
        "replace",
        "replaced",
        "replacing",
        "rename",
        "renamed",
        "renaming",
        "move",
        "moved",
        "moving",
        "change",
        "changed",
        "changing",
        "avoid",
        "avoids",
        "don't",
        "dont",
        "implement",
        "implements",
        "implemented",
        "improve",
        "improves",
        "improved",
        "improving",
        "refactor",
        "refactored",
        "refactoring",
        "handle",
        "handles",
        "handled",
        "deprecate",
        "deprecated",
        "bump",
        "bumped",
        "drop",
        "dropped",
        "stop",
        "stopped",
        "prevent",
        "prevented",
        "ensure",
        "introduce",
        "introduced",
        "cleanup",
        "clean",
        "simplify",
        "simplified",
        "optimize",
        "optimized",
        "correct",
        "corrected",
        "revert",
        "reverted",
        "restore",
        "restored",
        "tweak",
        "tweaked",
        "enable",
        "enabled",
        "disable",
        "disabled",
        "expose",
        "exposed",
        "preserve",
        "respect",
        "tighten",
        "relax",
        "migrate",
        "upgrade",
        "upgraded",
        "downgrade",
    ]
)
"""First words of a change request (the imperative and past forms commit subjects and task
titles open with). Ambiguous on purpose: "Remove the converter from the path" is a docstring
and a change request alike, and asked of an agent it is the change."""
_SCOPE_RE = re.compile(r"^([A-Za-z][\w./@-]*)(?:\([\w./@-]+\))?!?:\s+")
"""A conventional-commit or Go-style scope (``fix(router): ``, ``middleware: ``)."""
_TYPE_PREFIXES = frozenset(
    [
        "bool",
        "int",
        "float",
        "str",
        "bytes",
        "list",
        "dict",
        "tuple",
        "set",
        "none",
        "any",
        "optional",
        "callable",
        "iterable",
    ]
)
"""A docstring's return-type prefix (``float: Get the time``) is not a scope."""
_CHANGE_WORDS_RE = re.compile(
    r"\b(?:fix(?:es|ed|ing)?|bug|typo|crash(?:es)?|regression|instead of|no longer|should)\b",
    re.IGNORECASE,
)
"""Words that make a question a change request wherever they stand."""


@lru_cache(maxsize=4096)
def change_request(query: str) -> bool:
    """True when ``query`` reads as a change to make rather than a question about where or what
    code is: it opens with a lower-case ``scope:`` prefix, or (after any prefix) with a change verb ("Fix ...",
    "Add support for ...", "router: remove ..."), or names a bug ("... crashes on ...", "...
    should ..."). The history step weighs past changes more for these (``ragloom.retrieve.
    history.CHANGE_WEIGHTS``). Issue-11 data: 73% of the git questions (commit subjects), 14% of
    the lookup questions (docstring first sentences such as "Move the cursor up a cell")."""
    text = query.strip()
    scope = _SCOPE_RE.match(text)
    if scope is not None:
        name = scope.group(1)
        if name[:1].islower() and name.split(".")[0].lower() not in _TYPE_PREFIXES:
            return True  # "middleware: new SetHeader handler", "fix(router): ..."
        text = text[scope.end() :]
    words = text.split()
    first = words[0].lower().rstrip(":,.!") if words else ""
    return first in _CHANGE_VERBS or bool(_CHANGE_WORDS_RE.search(query))
