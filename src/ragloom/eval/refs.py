"""Reference agreement: ragloom's code graph against jedi on sampled Python definitions.

The code graph's acceptance check (driver: ``scripts/eval_refs.py``): for a deterministic
sample of definitions of a repository, the references ragloom's graph reports must agree with
the ones jedi's ``Script.get_references`` finds, at two levels:

``lines``
    The distinct ``(path, line)`` pairs holding a reference.
``callers``
    The distinct ``(path, enclosing definition)`` pairs: each reference line mapped by
    :func:`callers_of` to the innermost function, method or class around it (by :mod:`ast`;
    ``"<module>"`` outside any). The same mapping is used for both sides, so this level says
    whether the two agree on *who* uses a definition, whatever each side's own notion of an
    enclosing chunk.

Pieces:

- :func:`sample_symbols`: the sampled definitions (:class:`SymbolSite`).
- :func:`jedi_references`: the truth, cached as JSON (jedi takes 0.1 to 0.4 s a symbol).
- :func:`ragloom_references`: the prediction, through ``CodeGraph.definition_at`` and
  ``CodeGraph.references`` (the protocols :class:`GraphIndex`, :class:`CodeGraphLike`).
- :func:`compare`: micro and macro precision, recall and F1 at both levels
  (:class:`Agreement`; :meth:`Agreement.combine` pools several repositories).

Both sides drop import statements: jedi's references on a line of an ``import`` or
``from ... import`` statement, ragloom's references of kind ``import``. Neither side counts the
definition's own name. References outside the work tree (the standard library, site-packages)
are not counted.

jedi is imported lazily: only :func:`jedi_references` needs it (``pip install jedi``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

__all__ = [
    "MODULE_SCOPE",
    "Agreement",
    "CodeGraphLike",
    "DefinitionLike",
    "GraphIndex",
    "LevelScores",
    "RefSite",
    "ReferenceLike",
    "SymbolScore",
    "SymbolSite",
    "all_symbols",
    "callers_of",
    "compare",
    "jedi_references",
    "ragloom_references",
    "sample_symbols",
]

MODULE_SCOPE = "<module>"
"""The enclosing "definition" of a reference outside any function, method or class."""

SKIP_DIRS = frozenset({"tests", "test", "docs"})
"""Folders (at any depth) whose files are never sampled (references in them still count)."""
_WALK_SKIP = frozenset({"__pycache__", "node_modules", "venv", "site-packages", "build", "dist"})
"""Folders never walked at all (with every hidden folder: ``.git``, ``.venv``, ``.ragloom``)."""
CACHE_VERSION = 2
DEFAULT_TIMEOUT_S = 60.0
PROGRESS_EVERY = 25


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class SymbolSite:
    """One sampled definition: where its name token is (what jedi is asked about)."""

    path: str
    """Relative to the work tree, posix."""
    line: int
    """1-based line of the name token (``send`` in ``def send``), not of a decorator."""
    column: int
    """0-based column of the name token, in characters (jedi's convention)."""
    qualname: str
    """Enclosing classes and functions joined with dots: ``Class.method``, ``outer.inner``."""
    kind: str
    """``function``, ``method`` (defined directly in a class body) or ``class``."""

    @property
    def key(self) -> str:
        """``path:line:column``: the site's key in the reference maps and caches."""
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]


@dataclass(frozen=True, slots=True)
class RefSite:
    """One reference: a line of a file of the work tree. ``caller`` is informative only (the
    enclosing definition's symbol as the reference's source reported it, when it did); it
    takes no part in equality or in the comparison."""

    path: str
    line: int
    caller: str | None = field(default=None, compare=False)


# --------------------------------------------------------------------------- parsing

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class _Scope:
    start: int
    """First line, decorators included."""
    end: int
    depth: int
    qualname: str


@dataclass(slots=True)
class _FileInfo:
    tree: ast.Module | None
    lines: list[str]
    import_lines: frozenset[int]
    scopes: list[_Scope]

    def enclosing(self, line: int) -> str:
        best: _Scope | None = None
        for s in self.scopes:
            if s.start <= line <= s.end and (best is None or s.depth > best.depth):
                best = s
        return best.qualname if best is not None else MODULE_SCOPE


_FILE_CACHE: dict[Path, tuple[tuple[int, int], _FileInfo]] = {}
_FILE_CACHE_LOCK = threading.Lock()

_DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _walk_defs(
    body: Iterable[ast.AST], prefix: str, depth: int, in_class: bool
) -> Iterator[tuple[_DefNode, str, int, bool]]:
    """Every def and class under ``body`` (nested in any statement: ``if``, ``try``, ``with``),
    with its qualified name, depth and whether it sits directly in a class body."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            qual = f"{prefix}.{node.name}" if prefix else node.name
            yield node, qual, depth, in_class
            yield from _walk_defs(node.body, qual, depth + 1, isinstance(node, ast.ClassDef))
        elif isinstance(node, ast.stmt):
            # Compound statements (if/for/while/try/with/match): their blocks are the same scope.
            children: list[ast.AST] = []
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                value = getattr(node, name, None)
                if isinstance(value, list):
                    children.extend(value)
            yield from _walk_defs(children, prefix, depth, in_class)
        elif isinstance(node, ast.ExceptHandler | ast.match_case):
            yield from _walk_defs(node.body, prefix, depth, in_class)


def _parse(path: Path) -> _FileInfo:
    try:
        source = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return _FileInfo(None, [], frozenset(), [])
    lines = _LINE_BREAK.split(source)
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError):
        return _FileInfo(None, lines, frozenset(), [])
    imports: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    scopes = [
        _Scope(
            min([node.lineno, *(d.lineno for d in node.decorator_list)]),
            node.end_lineno or node.lineno,
            depth,
            qual,
        )
        for node, qual, depth, _ in _walk_defs(tree.body, "", 0, False)
    ]
    return _FileInfo(tree, lines, frozenset(imports), scopes)


def _file_info(path: Path) -> _FileInfo:
    """The parsed file, cached by absolute path and (size, mtime)."""
    try:
        st = path.stat()
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        return _FileInfo(None, [], frozenset(), [])
    key = path.resolve()
    with _FILE_CACHE_LOCK:
        hit = _FILE_CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    info = _parse(key)
    with _FILE_CACHE_LOCK:
        _FILE_CACHE[key] = (stamp, info)
    return info


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _python_files(root: Path) -> list[Path]:
    """The ``.py`` files under ``root`` that may be sampled, sorted by relative path."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and d not in _WALK_SKIP and d not in SKIP_DIRS
        )
        for name in filenames:
            if name.endswith(".py") and not name.startswith("test_") and name != "conftest.py":
                out.append(Path(dirpath) / name)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def _name_position(lines: Sequence[str], node: _DefNode) -> tuple[int, int] | None:
    """(line, column) of the name token of a def or class: the first ``def``/``class`` keyword
    from the node's start followed by the name (line continuations allowed)."""
    first = node.lineno - 1
    if first >= len(lines):
        return None
    # ast's col_offset counts UTF-8 bytes; jedi's columns count characters.
    col = len(lines[first].encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))
    text = "\n".join(lines[first : (node.end_lineno or node.lineno)])
    keyword = "class" if isinstance(node, ast.ClassDef) else "def"
    pattern = re.compile(rf"\b{keyword}\b[\s\\]*({re.escape(node.name)})\b")
    m = pattern.search(text, col)
    if m is None:
        return None
    before = text[: m.start(1)]
    line = first + 1 + before.count("\n")
    column = m.start(1) - (before.rfind("\n") + 1)
    return line, column


def _posix(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


# --------------------------------------------------------------------------- sampling


def all_symbols(root: Path) -> list[SymbolSite]:
    """Every candidate definition of :func:`sample_symbols`, sorted by path and position."""
    root = Path(root).resolve()
    sites: list[SymbolSite] = []
    for path in _python_files(root):
        info = _file_info(path)
        if info.tree is None:
            continue
        rel = _posix(path, root)
        for node, qual, _depth, in_class in _walk_defs(info.tree.body, "", 0, False):
            if _is_dunder(node.name):
                continue
            pos = _name_position(info.lines, node)
            if pos is None:
                continue
            if isinstance(node, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if in_class else "function"
            sites.append(SymbolSite(rel, pos[0], pos[1], qual, kind))
    sites.sort(key=lambda s: (s.path, s.line, s.column))
    return sites


def sample_symbols(root: Path | str, n: int, seed: int = 0) -> list[SymbolSite]:
    """A deterministic sample of ``n`` definitions of the work tree at ``root`` (all of them
    when it has fewer), sorted by path and position.

    Candidates: every function, method and class (at any depth: nested functions and classes
    too), found with :mod:`ast`, in the ``.py`` files that are not test or documentation code
    (files under a ``tests``, ``test`` or ``docs`` folder, ``test_*.py``, ``conftest.py``) nor in
    a hidden or build folder, and that parse as UTF-8 Python. The only definitions left out are
    dunder methods and functions (``__init__``, ``__call__``, ``__getattr__``...): they are
    called by the language, not by name, so neither side's "references" mean much for them.
    Everything else stays in, popular or obscure names alike, so the sample is honest.

    The same tree, ``n`` and ``seed`` give the same sample (``random.Random(seed).sample``
    over the sorted candidates)."""
    candidates = all_symbols(Path(root))
    if n >= len(candidates):
        return candidates
    chosen = random.Random(seed).sample(candidates, n)
    return sorted(chosen, key=lambda s: (s.path, s.line, s.column))


# --------------------------------------------------------------------------- callers


def callers_of(root: Path | str, refs: Iterable[RefSite]) -> set[tuple[str, str]]:
    """The ``(path, qualified enclosing definition)`` of each reference: the innermost
    function, method or class whose lines (decorators included) hold the reference's line, or
    :data:`MODULE_SCOPE` outside any (or in a file that does not parse). Parsed files are cached
    (by path, size and modification time)."""
    root = Path(root)
    return {(r.path, _file_info(root / r.path).enclosing(r.line)) for r in refs}


def _is_import_line(root: Path, rel: str, line: int) -> bool:
    return line in _file_info(root / rel).import_lines


# --------------------------------------------------------------------------- jedi


class _JediTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_JediTimeout` in the block after ``seconds`` (SIGALRM: main thread of a
    POSIX process only; elsewhere, or with ``seconds <= 0``, no limit)."""
    usable = (
        seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def _raise(signum: int, frame: FrameType | None) -> None:
        raise _JediTimeout(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _import_jedi() -> Any:
    # Through importlib: jedi ships no type information, and only this module uses it.
    try:
        return importlib.import_module("jedi")
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the reference evaluation needs jedi: pip install jedi (0.19 or later)"
        ) from e


def _load_cache(cache: Path | None, meta: Mapping[str, Any]) -> dict[str, Any]:
    if cache is None or not cache.is_file():
        return {}
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("meta") != dict(meta):
        return {}
    sites = data.get("sites")
    return sites if isinstance(sites, dict) else {}


def _save_cache(cache: Path | None, meta: Mapping[str, Any], sites: Mapping[str, Any]) -> None:
    if cache is None:
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
    tmp.write_text(
        json.dumps({"meta": dict(meta), "sites": dict(sorted(sites.items()))}, indent=0),
        encoding="utf-8",
    )
    tmp.replace(cache)


def _jedi_refs_one(
    jedi: Any, project: Any, root: Path, site: SymbolSite
) -> list[tuple[str, int, bool]]:
    """(path, line, definitions only) per line: the last is true when every reference jedi
    gave on the line is another definition of the name (an overload, a setter, a rebinding)."""
    script = jedi.Script(path=str(root / site.path), project=project)
    found: dict[tuple[str, int], bool] = {}
    for ref in script.get_references(site.line, site.column, include_builtins=False):
        module_path = ref.module_path
        if module_path is None or ref.line is None:
            continue
        p = Path(module_path).resolve()
        if not p.is_relative_to(root):
            continue
        rel = _posix(p, root)
        is_def = bool(ref.is_definition())
        own = rel == site.path and ref.line == site.line and ref.column == site.column
        if own and is_def:
            continue
        if _is_import_line(root, rel, ref.line):
            continue
        key = (rel, ref.line)
        found[key] = found.get(key, True) and is_def
    return [(path, line, found[path, line]) for path, line in sorted(found)]


def jedi_references(
    root: Path | str,
    sites: Sequence[SymbolSite],
    *,
    cache: Path | str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    file_limit: int | None = 100_000,
    progress: bool = True,
    skipped: dict[str, str] | None = None,
    other_definitions: bool = True,
) -> dict[str, list[RefSite]]:
    """jedi's references of each site, by :attr:`SymbolSite.key`: ``get_references(line,
    column, include_builtins=False)`` of a ``jedi.Script`` of the site's file in a
    ``jedi.Project`` of ``root``, kept when inside the work tree, less the definition itself
    (``is_definition()`` at the site's position) and less the lines of import statements;
    sorted, one per line. jedi also answers *other* definitions of the same name (the other
    ``@overload`` signatures, a property's setter, ``name = ...`` rebindings): kept by default;
    ``other_definitions=False`` drops the lines holding nothing else (the cache serves both).

    ``file_limit``: jedi stops parsing candidate files after its ``_PARSED_FILE_LIMIT`` (30)
    files containing the name, which truncates the references of popular names in larger
    trees at an arbitrary point of the folder walk; this sets that cap for the run (None: jedi's
    own). ``timeout_s`` bounds each symbol (SIGALRM, main thread only): a symbol jedi raises on
    or times out on is left out of the result and recorded in ``skipped`` (key: reason).

    ``cache``: a JSON file of results by key, reused when the jedi version, ``file_limit`` and
    the site's qualified name match; written every :data:`PROGRESS_EVERY` computed symbols and
    at the end. Skipped symbols are cached too (delete the file to retry them). Progress goes
    to stderr every :data:`PROGRESS_EVERY` symbols."""
    jedi = _import_jedi()
    root = Path(root).resolve()
    cache_path = Path(cache) if cache is not None else None
    meta = {
        "version": CACHE_VERSION,
        "jedi": str(jedi.__version__),
        "file_limit": file_limit,
        "root": root.name,
    }
    cached = _load_cache(cache_path, meta)
    project = jedi.Project(str(root))
    out: dict[str, list[RefSite]] = {}
    n_skipped = computed = 0
    started = time.monotonic()

    jedi_refs: Any = importlib.import_module("jedi.inference.references")
    old_limit = jedi_refs._PARSED_FILE_LIMIT
    if file_limit is not None:
        jedi_refs._PARSED_FILE_LIMIT = file_limit
    try:
        for i, site in enumerate(sites, 1):
            entry = cached.get(site.key)
            if not (isinstance(entry, dict) and entry.get("qualname") == site.qualname):
                entry = {"qualname": site.qualname}
                try:
                    with _time_limit(timeout_s):
                        refs = _jedi_refs_one(jedi, project, root, site)
                    entry["refs"] = [[path, line, int(d)] for path, line, d in refs]
                except _JediTimeout as e:
                    entry["skipped"] = f"timeout: {e}"
                except Exception as e:  # jedi's own failures: any type
                    entry["skipped"] = f"{type(e).__name__}: {e}"[:300]
                cached[site.key] = entry
                computed += 1
                if computed % PROGRESS_EVERY == 0:
                    _save_cache(cache_path, meta, cached)
            if "skipped" in entry:
                n_skipped += 1
                if skipped is not None:
                    skipped[site.key] = str(entry["skipped"])
            else:
                out[site.key] = [
                    RefSite(str(p), int(ln))
                    for p, ln, only_defs in entry.get("refs", [])
                    if other_definitions or not only_defs
                ]
            if progress and (i % PROGRESS_EVERY == 0 or i == len(sites)):
                print(
                    f"jedi {root.name}: {i}/{len(sites)} symbols ({computed} computed, "
                    f"{n_skipped} skipped) in {time.monotonic() - started:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        jedi_refs._PARSED_FILE_LIMIT = old_limit
        if computed:
            _save_cache(cache_path, meta, cached)
    return out


# --------------------------------------------------------------------------- ragloom


class DefinitionLike(Protocol):
    """What :func:`ragloom_references` reads of ``ragloom.graph.Definition``."""

    @property
    def id(self) -> Any: ...
    @property
    def path(self) -> str: ...
    @property
    def symbol(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...


class ReferenceLike(Protocol):
    """What :func:`ragloom_references` reads of ``ragloom.graph.Reference``."""

    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def caller(self) -> DefinitionLike | None: ...


class CodeGraphLike(Protocol):
    """What :func:`ragloom_references` calls of ``ragloom.graph.CodeGraph``."""

    def definition_at(self, path: str, line: int) -> DefinitionLike | None: ...

    def references(
        self, definition_id: Any, /, *, min_confidence: float = ...
    ) -> Sequence[ReferenceLike]: ...


class GraphIndex(Protocol):
    """An index with a code graph (``ragloom.open(path)``)."""

    def graph(self) -> CodeGraphLike: ...


def ragloom_references(
    index: GraphIndex,
    sites: Sequence[SymbolSite],
    min_confidence: float = 0.5,
    *,
    unmatched: dict[str, str] | None = None,
) -> dict[str, list[RefSite]]:
    """ragloom's references of each site, by key: the graph's definition at the site's name
    line (``definition_at``; a definition may start at its decorator, the name line is inside
    it), then its references at ``min_confidence`` or more, less those of kind ``import``;
    sorted, one per line (``caller``: the symbol of the graph's enclosing definition,
    :data:`MODULE_SCOPE` for a ``module`` one).

    A site gets no references (an empty list) when the graph has no definition there, or when
    the innermost one there is another symbol (the definition's last name component differs
    from the site's: a nested function the graph does not index would otherwise be answered
    with its outer function's references); ``unmatched`` records those (key: reason)."""
    graph = index.graph()
    out: dict[str, list[RefSite]] = {}
    for site in sites:
        d = graph.definition_at(site.path, site.line)
        if d is None:
            out[site.key] = []
            if unmatched is not None:
                unmatched[site.key] = "no definition"
            continue
        if d.symbol.rpartition(".")[2] != site.name:
            out[site.key] = []
            if unmatched is not None:
                unmatched[site.key] = f"definition is {d.symbol!r}"
            continue
        seen: dict[tuple[str, int], RefSite] = {}
        for r in graph.references(d.id, min_confidence=min_confidence):
            if r.kind == "import":
                continue
            caller: str | None = None
            if r.caller is not None:
                caller = MODULE_SCOPE if r.caller.kind == "module" else r.caller.symbol
            seen.setdefault((r.path, r.line), RefSite(r.path, r.line, caller))
        out[site.key] = [seen[k] for k in sorted(seen)]
    return out


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True, slots=True)
class SymbolScore:
    """One symbol's counts at one level."""

    key: str
    truth: int
    predicted: int
    tp: int

    @property
    def fp(self) -> int:
        return self.predicted - self.tp

    @property
    def fn(self) -> int:
        return self.truth - self.tp


def _ratio(num: int, den: int, empty: float) -> float:
    return num / den if den else empty


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 1.0


@dataclass(frozen=True, slots=True)
class LevelScores:
    """Scores at one level over a set of symbols.

    Micro averages pool the counts of every symbol: precision ``tp / predicted``, recall
    ``tp / truth`` (1.0 when both totals are 0; a zero denominator with the other total
    non-zero gives 0.0). Macro averages are per symbol, then averaged: a symbol's precision
    counts only when it has predictions, its recall only when it has true references, except
    that a symbol with neither counts as 1.0 in both (it agrees); its F1 is 1.0 with neither, 0.0
    when only one side is empty."""

    symbols: tuple[SymbolScore, ...]

    @property
    def truth(self) -> int:
        return sum(s.truth for s in self.symbols)

    @property
    def predicted(self) -> int:
        return sum(s.predicted for s in self.symbols)

    @property
    def tp(self) -> int:
        return sum(s.tp for s in self.symbols)

    @property
    def fp(self) -> int:
        return self.predicted - self.tp

    @property
    def fn(self) -> int:
        return self.truth - self.tp

    @property
    def precision(self) -> float:
        if not self.predicted:
            return 1.0 if not self.truth else 0.0
        return self.tp / self.predicted

    @property
    def recall(self) -> float:
        if not self.truth:
            return 1.0 if not self.predicted else 0.0
        return self.tp / self.truth

    @property
    def f1(self) -> float:
        return _f1(self.precision, self.recall)

    @property
    def both_empty(self) -> int:
        return sum(1 for s in self.symbols if not s.truth and not s.predicted)

    @property
    def exact(self) -> int:
        """Symbols whose two sets are equal (both empty included)."""
        return sum(1 for s in self.symbols if s.tp == s.truth == s.predicted)

    @property
    def macro_precision(self) -> float:
        return _mean(
            [_ratio(s.tp, s.predicted, 1.0) for s in self.symbols if s.predicted or not s.truth]
        )

    @property
    def macro_recall(self) -> float:
        return _mean(
            [_ratio(s.tp, s.truth, 1.0) for s in self.symbols if s.truth or not s.predicted]
        )

    @property
    def macro_f1(self) -> float:
        values = []
        for s in self.symbols:
            if not s.truth and not s.predicted:
                values.append(1.0)
            else:
                values.append(_f1(_ratio(s.tp, s.predicted, 0.0), _ratio(s.tp, s.truth, 0.0)))
        return _mean(values)

    def as_dict(self) -> dict[str, Any]:
        return {
            "symbols": len(self.symbols),
            "truth": self.truth,
            "predicted": self.predicted,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "macro_precision": self.macro_precision,
            "macro_recall": self.macro_recall,
            "macro_f1": self.macro_f1,
            "both_empty": self.both_empty,
            "exact": self.exact,
        }


@dataclass(frozen=True, slots=True)
class Agreement:
    """Agreement of a prediction with the truth at both levels (:class:`LevelScores`)."""

    lines: LevelScores
    callers: LevelScores
    missing: tuple[str, ...] = ()
    """Keys of the truth that the prediction had no entry for (scored as empty predictions)."""

    @property
    def symbols(self) -> int:
        return len(self.lines.symbols)

    @classmethod
    def combine(cls, parts: Iterable[Agreement], prefixes: Sequence[str] = ()) -> Agreement:
        """Pool several agreements (repositories) into one; ``prefixes`` (one per part) keep
        their keys apart (``repo/path:line:col``)."""
        parts = list(parts)
        names = list(prefixes) or [""] * len(parts)

        def _pre(p: str, key: str) -> str:
            return f"{p}/{key}" if p else key

        def _level(get: Callable[[Agreement], LevelScores]) -> LevelScores:
            return LevelScores(
                tuple(
                    SymbolScore(_pre(p, s.key), s.truth, s.predicted, s.tp)
                    for p, a in zip(names, parts, strict=True)
                    for s in get(a).symbols
                )
            )

        return cls(
            _level(lambda a: a.lines),
            _level(lambda a: a.callers),
            tuple(_pre(p, k) for p, a in zip(names, parts, strict=True) for k in a.missing),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "symbols": self.symbols,
            "missing_predictions": len(self.missing),
            "lines": self.lines.as_dict(),
            "callers": self.callers.as_dict(),
        }


def _score(key: str, truth: set[Any], predicted: set[Any]) -> SymbolScore:
    return SymbolScore(key, len(truth), len(predicted), len(truth & predicted))


def compare(
    truth: Mapping[str, Sequence[RefSite]],
    predicted: Mapping[str, Sequence[RefSite]],
    root: Path | str,
) -> Agreement:
    """Score ``predicted`` against ``truth`` over the symbols of ``truth`` (a symbol missing
    from ``predicted`` counts as predicting nothing; keys only in ``predicted`` are ignored,
    e.g. symbols jedi skipped). Levels: distinct ``(path, line)`` pairs and distinct
    ``(path, enclosing definition)`` pairs (:func:`callers_of` under ``root``, the same mapping
    for both sides). See :class:`LevelScores` for the averages and the empty cases."""
    lines: list[SymbolScore] = []
    callers: list[SymbolScore] = []
    missing: list[str] = []
    for key in sorted(truth):
        t_refs = truth[key]
        if key not in predicted:
            missing.append(key)
        p_refs = predicted.get(key, ())
        t_lines = {(r.path, r.line) for r in t_refs}
        p_lines = {(r.path, r.line) for r in p_refs}
        lines.append(_score(key, t_lines, p_lines))
        callers.append(_score(key, callers_of(root, t_refs), callers_of(root, p_refs)))
    return Agreement(LevelScores(tuple(lines)), LevelScores(tuple(callers)), tuple(missing))
