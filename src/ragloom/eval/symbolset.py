"""Large symbol-level docstring evaluation sets: many packages, test code as distractors.

Two fixed sets (docs/evaluation-symbols.md), built from code on this machine:

``sym10k``
    Thirteen standard-library packages and modules (the built-in docstring set's
    :data:`~ragloom.eval.datasets.DEFAULT_PACKAGES`), the parts of ``Lib/test`` that test them,
    and five third-party packages from the running interpreter's ``site-packages`` (anyio,
    markdown_it, packaging, pyparsing, rich): over 10,000 functions and methods. No package of
    a repository kept for an outside check (:data:`RESERVED_PACKAGES`: click and requests were
    in the set until the eighth session).
``sym50k``
    A superset: the whole standard library except ``Lib/test`` (whose ``sym10k`` parts stay
    in), plus numpy, matplotlib, mpl_toolkits, hypothesis, _pytest, pluggy, pygments and
    dateutil: over 50,000 functions and methods.

Every file is copied with **every** docstring stripped exactly as
:func:`~ragloom.eval.datasets.strip_docstrings` does (replaced by ``pass`` plus the newlines it
spanned, so line numbers hold), under ``corpus/<source>/<path>`` (``stdlib/json/decoder.py``,
``site-packages/rich/console.py``). Files that do not parse, are not UTF-8, or exceed the
indexer's size cap are left out (they could not be stripped or indexed), and so are ``.pyi``
stubs and non-Python files.

*Test code* (a folder named ``test``, ``tests`` or ``idle_test`` on the path, or a file named
``test_*.py``, ``*_test.py`` or ``conftest.py``) is indexed as a distractor and is never gold.

Queries: every module-level function and method (of classes at any depth) outside test code
whose docstring's first sentence (:func:`~ragloom.eval.datasets.first_sentence`) has at least
:data:`MIN_WORDS` words is a candidate. Dropped: a text shared (case-insensitively) by several
documented functions of the corpus, test code included (an ambiguous answer); a text still found
verbatim in the stripped corpus (case and whitespace ignored: a test asserting a docstring, a
comment repeating it), because the query would then not be a paraphrase task; a function in a
file the indexer's walker would skip. The candidates are shuffled with a fixed seed and the
first ``n_queries`` kept, then sorted by path and line. Gold: ``gold_files = [file]``,
``gold_symbols = [Class.method]``. Each query carries ``"split"``: ``"tune"`` or ``"test"``
from a SHA-256 of its id (about half each), so defaults can be tuned on one half and reported
on the other.

Output (byte-for-byte the same on every run with the same interpreter and packages):
``corpus/``, ``queries.jsonl`` (both splits), ``tune.jsonl``, ``test.jsonl`` and ``meta.json``
(entries, counts per entry, skipped files, candidate and drop counts).

:func:`bm25_runs` is the plain BM25 baseline over an index's chunks (``bm25s`` defaults, lower
case split on non-alphanumerics, as in :mod:`ragloom.eval.baseline`), written in the
``ragloom eval --runs-out`` format; :func:`score_run_file` scores any such run file per split;
:func:`analyze_errors` says what ranks above the gold function.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import sysconfig
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragloom.errors import InputError
from ragloom.eval.dataset import EvalQuery, load_dataset
from ragloom.eval.datasets import _qualified_functions, first_sentence, strip_docstrings
from ragloom.eval.metrics import symbol_matches
from ragloom.eval.runner import MRR_K, score_hits
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES, walk

__all__ = [
    "MIN_WORDS",
    "N_QUERIES",
    "RESERVED_PACKAGES",
    "SEED",
    "SETS",
    "BuiltSymbolSet",
    "EntryStats",
    "ErrorStats",
    "SourceEntry",
    "analyze_errors",
    "bm25_runs",
    "build_symbol_set",
    "default_roots",
    "is_test_path",
    "load_split",
    "parse_entry",
    "score_run_file",
    "split_of",
]

SEED = 20261123
"""Seed of the query sampling; fixed so every machine draws the same queries."""
N_QUERIES = 500
"""Queries per set."""
MIN_WORDS = 5
"""A first sentence with fewer words is too generic to single out one function."""
TEST_DIRS: frozenset[str] = frozenset({"test", "tests", "idle_test"})
"""A folder of this name anywhere on the path makes a file test code."""
SKIP_DIRS: frozenset[str] = frozenset({"__pycache__"})
STDLIB_EXCLUDE: frozenset[str] = frozenset({"test", "site-packages", "lib-dynload", "__pycache__"})
"""Top-level stdlib entries ``stdlib:*`` leaves out (``Lib/test`` comes in by named parts)."""

_SYM10K_STDLIB = (
    "asyncio",
    "collections",
    "concurrent",
    "csv.py",
    "email",
    "http",
    "importlib",
    "json",
    "logging",
    "textwrap.py",
    "unittest",
    "urllib",
    "xml",
    "test/test_asyncio",
    "test/test_collections.py",
    "test/test_csv.py",
    "test/test_email",
    "test/test_httplib.py",
    "test/test_httpservers.py",
    "test/test_importlib",
    "test/test_json",
    "test/test_logging.py",
    "test/test_minidom.py",
    "test/test_textwrap.py",
    "test/test_urllib.py",
    "test/test_urllib2.py",
    "test/test_xml_etree.py",
)
RESERVED_PACKAGES: frozenset[str] = frozenset({"click", "flask", "requests", "httpx"})
"""The import packages of the repositories kept for an outside check (pallets/click,
pallets/flask, psf/requests, encode/httpx): never in a set, as corpus or as gold. Until the
eighth session ``sym10k`` and ``sym50k`` held click and requests; anyio and markdown_it (of a
like size: 701 and 269 ``def`` lines against 590 and 267) took their places."""
_SYM10K_SITE = ("anyio", "markdown_it", "packaging", "pyparsing", "rich")
_SYM50K_SITE_EXTRA = (
    "_pytest",
    "dateutil",
    "hypothesis",
    "matplotlib",
    "mpl_toolkits",
    "numpy",
    "pluggy",
    "pygments",
)
SYM10K: tuple[str, ...] = tuple(
    [f"stdlib:{p}" for p in _SYM10K_STDLIB] + [f"site-packages:{p}" for p in _SYM10K_SITE]
)
SYM50K: tuple[str, ...] = (
    "stdlib:*",
    *(e for e in SYM10K if e.startswith("stdlib:test/")),
    *sorted([f"site-packages:{p}" for p in _SYM10K_SITE + _SYM50K_SITE_EXTRA]),
)
SETS: dict[str, tuple[tuple[str, ...], int]] = {
    "sym10k": (SYM10K, 10_000),
    "sym50k": (SYM50K, 50_000),
}
"""Set name -> (corpus entries, minimum number of functions and methods the corpus must hold)."""

_WS = re.compile(r"\s+")


def default_roots() -> dict[str, Path]:
    """Source name -> folder: the running interpreter's stdlib and (venv) site-packages."""
    paths = sysconfig.get_paths()
    return {"stdlib": Path(paths["stdlib"]), "site-packages": Path(paths["purelib"])}


def is_test_path(rel: str) -> bool:
    """Whether a corpus-relative POSIX path is test code (see the module docstring)."""
    parts = rel.split("/")
    name = parts[-1]
    if any(p in TEST_DIRS for p in parts[:-1]):
        return True
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def split_of(query_id: str) -> str:
    """``"tune"`` or ``"test"``: the parity of the first 32 bits of SHA-256(id)."""
    digest = hashlib.sha256(query_id.encode("utf-8")).digest()
    return "tune" if int.from_bytes(digest[:4], "big") % 2 == 0 else "test"


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One corpus entry: a source (``stdlib``/``site-packages``) and a path or ``*``."""

    source: str
    path: str

    def __str__(self) -> str:
        return f"{self.source}:{self.path}"


def parse_entry(spec: str) -> SourceEntry:
    """``"stdlib:json"`` -> :class:`SourceEntry`; InputError when malformed."""
    source, sep, path = spec.partition(":")
    if not sep or not source or not path or path.startswith("/") or ".." in path.split("/"):
        raise InputError(f"bad corpus entry {spec!r}: expected SOURCE:RELATIVE_PATH")
    top = path.strip("/").split("/")[0].removesuffix(".py")
    if source == "site-packages" and top in RESERVED_PACKAGES:
        raise InputError(
            f"corpus entry {spec!r}: {top} belongs to a repository kept for an outside check "
            "and is never evaluated or tuned on"
        )
    return SourceEntry(source, path.strip("/"))


def _expand(entry: SourceEntry, root: Path) -> list[str]:
    """Top-level paths (relative to ``root``) an entry stands for."""
    if entry.path != "*":
        return [entry.path]
    out: list[str] = []
    for name in sorted(os.listdir(root)):
        if name in STDLIB_EXCLUDE or name.startswith(("config-", ".")):
            continue
        p = root / name
        if (p.is_dir() and not p.is_symlink()) or (p.is_file() and name.endswith(".py")):
            out.append(name)
    return out


def _files_of(root: Path, rel: str) -> list[str]:
    """Root-relative POSIX paths of the ``.py`` files under ``rel`` (a folder or a file)."""
    p = root / rel
    if p.is_file():
        if not rel.endswith(".py"):
            raise InputError(f"{p} is not a Python file")
        return [rel]
    if not p.is_dir():
        raise InputError(f"no package or module {rel!r} in {root}")
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(p):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            if name.endswith(".py"):
                out.append((Path(dirpath) / name).relative_to(root).as_posix())
    return sorted(out)


@dataclass(frozen=True, slots=True)
class _Function:
    path: str
    qualname: str
    lineno: int
    sentence: str | None
    test: bool


@dataclass(slots=True)
class EntryStats:
    """Counts of one corpus entry."""

    entry: str
    files: int = 0
    functions: int = 0
    test_functions: int = 0
    candidates: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "entry": self.entry,
            "files": self.files,
            "functions": self.functions,
            "test_functions": self.test_functions,
            "candidates": self.candidates,
        }


@dataclass(slots=True)
class BuiltSymbolSet:
    """What :func:`build_symbol_set` wrote."""

    name: str
    out_dir: Path
    corpus_dir: Path
    queries: list[tuple[EvalQuery, str]]
    entries: list[EntryStats] = field(default_factory=list)
    files: int = 0
    test_files: int = 0
    functions: int = 0
    test_functions: int = 0
    candidates: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    skipped_files: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The ``meta.json`` record (no timings, no absolute paths: byte-stable)."""
        splits = Counter(s for _, s in self.queries)
        return {
            "name": self.name,
            "python": ".".join(map(str, sys.version_info[:3])),
            "files": self.files,
            "test_files": self.test_files,
            "functions": self.functions,
            "test_functions": self.test_functions,
            "candidates": self.candidates,
            "dropped": dict(sorted(self.dropped.items())),
            "queries": len(self.queries),
            "tune": splits.get("tune", 0),
            "test": splits.get("test", 0),
            "entries": [e.to_dict() for e in self.entries],
            "skipped_files": {k: v for k, v in sorted(self.skipped_files.items())},
        }


def _norm(text: str) -> str:
    return _WS.sub(" ", text.lower()).strip()


def _functions(source: bytes, rel: str) -> list[_Function]:
    """Every module-level function and method (first definition of a name wins)."""
    tree = ast.parse(source)
    test = is_test_path(rel)
    found: dict[str, _Function] = {}
    for qualname, node in _qualified_functions(tree):
        if qualname in found:
            continue
        doc = ast.get_docstring(node, clean=False)
        found[qualname] = _Function(
            path=rel,
            qualname=qualname,
            lineno=node.lineno,
            sentence=first_sentence(doc) if doc else None,
            test=test,
        )
    return list(found.values())


def _query_line(q: EvalQuery, split: str) -> str:
    record = q.to_dict()
    record["split"] = split
    return json.dumps(record, ensure_ascii=False) + "\n"


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(lines)


def build_symbol_set(
    out_dir: str | os.PathLike[str],
    entries: Sequence[str],
    *,
    name: str = "custom",
    n_queries: int = N_QUERIES,
    seed: int = SEED,
    roots: Mapping[str, str | os.PathLike[str]] | None = None,
    min_functions: int = 0,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> BuiltSymbolSet:
    """Write ``out_dir/corpus/``, ``queries.jsonl``, ``tune.jsonl``, ``test.jsonl``, ``meta.json``.

    An existing ``out_dir/corpus`` is replaced. InputError when an entry is missing, the corpus
    holds fewer than ``min_functions`` functions, or no query qualifies.
    """
    if n_queries < 1:
        raise InputError(f"n_queries must be >= 1, got {n_queries}")
    if not entries:
        raise InputError("no corpus entries")
    source_roots = {k: Path(v) for k, v in (roots or default_roots()).items()}
    parsed = [parse_entry(e) for e in entries]
    out = Path(out_dir)
    corpus = out / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    built = BuiltSymbolSet(name=name, out_dir=out, corpus_dir=corpus, queries=[])
    functions: list[_Function] = []
    owner: dict[str, EntryStats] = {}
    texts: list[str] = []
    skipped: dict[str, list[str]] = {}
    for entry in parsed:
        root = source_roots.get(entry.source)
        if root is None:
            raise InputError(f"unknown source {entry.source!r} in entry {entry}")
        stats = EntryStats(str(entry))
        built.entries.append(stats)
        for top in _expand(entry, root):
            for rel in _files_of(root, top):
                dest_rel = f"{entry.source}/{rel}"
                if dest_rel in owner:
                    continue
                owner[dest_rel] = stats
                data = (root / rel).read_bytes()
                reason = None
                stripped = b""
                found: list[_Function] = []
                if len(data) > max_file_bytes:
                    reason = "too_large"
                else:
                    try:
                        data.decode("utf-8")
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            stripped = strip_docstrings(data)
                            found = _functions(data, dest_rel)
                    except UnicodeDecodeError:
                        reason = "not_utf8"
                    except (SyntaxError, ValueError, RecursionError, MemoryError):
                        reason = "syntax_error"
                if reason is not None:
                    skipped.setdefault(reason, []).append(dest_rel)
                    continue
                dest = corpus / dest_rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(stripped)
                texts.append(_norm(stripped.decode("utf-8")))
                stats.files += 1
                built.test_files += is_test_path(dest_rel)
                stats.functions += len(found)
                stats.test_functions += sum(1 for f in found if f.test)
                functions.extend(found)
    built.skipped_files = skipped
    built.files = sum(e.files for e in built.entries)
    built.functions = len(functions)
    built.test_functions = sum(1 for f in functions if f.test)
    if built.functions < min_functions:
        raise InputError(
            f"{name}: the corpus holds {built.functions} functions, fewer than {min_functions}"
        )
    indexable = {sf.rel for sf in walk(corpus, max_file_bytes=max_file_bytes).files}
    counts = Counter(_norm(f.sentence) for f in functions if f.sentence)
    candidates: list[_Function] = []
    dropped: Counter[str] = Counter()
    for f in functions:
        if f.test or f.sentence is None or len(f.sentence.split()) < MIN_WORDS:
            continue
        if counts[_norm(f.sentence)] > 1:
            dropped["ambiguous"] += 1
        elif f.path not in indexable:
            dropped["not_indexed"] += 1
        else:
            candidates.append(f)
    built.candidates = len(candidates)
    for f in candidates:
        owner[f.path].candidates += 1
    order = list(candidates)
    random.Random(seed).shuffle(order)
    haystack = "\n\0\n".join(texts)
    chosen: list[_Function] = []
    for f in order:
        if len(chosen) >= n_queries:
            break
        assert f.sentence is not None
        if _norm(f.sentence) in haystack:
            dropped["in_corpus"] += 1
            continue
        chosen.append(f)
    built.dropped = dict(dropped)
    if not chosen:
        raise InputError(f"{name}: no function qualifies as a query")
    chosen.sort(key=lambda f: (f.path, f.lineno, f.qualname))
    for f in chosen:
        assert f.sentence is not None
        qid = f"sym:{f.path}:{f.qualname}"
        q = EvalQuery(id=qid, query=f.sentence, gold_files=(f.path,), gold_symbols=(f.qualname,))
        built.queries.append((q, split_of(qid)))
    _write_lines(out / "queries.jsonl", (_query_line(q, s) for q, s in built.queries))
    for split in ("tune", "test"):
        _write_lines(
            out / f"{split}.jsonl",
            (_query_line(q, s) for q, s in built.queries if s == split),
        )
    (out / "meta.json").write_text(
        json.dumps(built.to_dict(), indent=1, sort_keys=False) + "\n", encoding="utf-8"
    )
    return built


def load_split(path: str | os.PathLike[str]) -> dict[str, str]:
    """Query id -> split of a ``queries.jsonl`` (lines without ``split`` count as ``test``)."""
    out: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            out[str(obj["id"])] = str(obj.get("split", "test"))
    return out


# --------------------------------------------------------------------------- baseline, scoring


@dataclass(frozen=True, slots=True)
class _Chunk:
    id: str
    path: str
    symbol: str
    kind: str
    start_line: int
    end_line: int
    node_hash: str
    text: str


_TOKEN_SPLIT = re.compile(r"[^0-9a-z]+")


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN_SPLIT.split(text.lower()) if t]


def _load_chunks(index_dir: Path, *, with_text: bool = True) -> list[_Chunk]:
    db = Path(index_dir) / "index.sqlite"
    if not db.exists():
        raise InputError(f"no ragloom index database at {db}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in con.execute("PRAGMA table_info(chunks)")}
        where = " WHERE gen_removed IS NULL" if "gen_removed" in cols else ""
        text = "text" if with_text else "''"
        rows = con.execute(
            "SELECT id, path, symbol, kind, start_line, end_line, node_hash, "
            f"{text} FROM chunks{where} ORDER BY rowid"
        ).fetchall()
    finally:
        con.close()
    return [
        _Chunk(str(a), str(b), str(c), str(d), int(e), int(f), str(g), str(h))
        for a, b, c, d, e, f, g, h in rows
    ]


def bm25_runs(
    index_dir: str | os.PathLike[str],
    queries: Sequence[EvalQuery],
    out_path: str | os.PathLike[str],
    *,
    top_k: int = 10,
    strategy: str = "bm25-baseline",
) -> int:
    """Rank every query with plain BM25 over the index's chunks; write a runs file (lines)."""
    bm25s = importlib.import_module("bm25s")
    chunks = _load_chunks(Path(index_dir))
    if not chunks:
        raise InputError(f"index {index_dir} holds no chunks")
    retriever: Any = bm25s.BM25()
    retriever.index([_tokens(c.text) for c in chunks], show_progress=False)
    vocab: Mapping[str, int] = retriever.vocab_dict
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for q in queries:
            toks = [t for t in _tokens(q.query) if t in vocab]
            ranked: list[tuple[int, float]] = []
            if toks:
                scores = retriever.get_scores(toks).tolist()
                ranked = sorted(
                    ((i, float(s)) for i, s in enumerate(scores) if s > 0),
                    key=lambda h: (-h[1], h[0]),
                )[:top_k]
            hits = [
                {
                    "id": chunks[i].id,
                    "path": chunks[i].path,
                    "start_line": chunks[i].start_line,
                    "end_line": chunks[i].end_line,
                    "symbol": chunks[i].symbol,
                    "score": s,
                    "ranks": {"bm25": r},
                }
                for r, (i, s) in enumerate(ranked, 1)
            ]
            files = list(dict.fromkeys(h["path"] for h in hits))
            line = {"id": q.id, "strategy": strategy, "files": files, "hits": hits}
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
            n += 1
    return n


@dataclass(frozen=True, slots=True)
class _RunHit:
    path: str
    symbol: str
    start_line: int
    end_line: int
    node_hash: str = ""


def _run_hits(line: Mapping[str, Any]) -> list[_RunHit]:
    return [
        _RunHit(str(h["path"]), str(h["symbol"]), int(h["start_line"]), int(h["end_line"]))
        for h in line.get("hits", [])
    ]


REPORT_METRICS: tuple[tuple[str, str], ...] = (
    ("mrr@10", "MRR@10"),
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("sym_mrr@10", "sym MRR@10"),
    ("sym_recall@1", "sym R@1"),
    ("sym_recall@5", "sym R@5"),
    ("sym_recall@10", "sym R@10"),
)
"""Runner metric key -> column label of the report tables."""


def score_run_file(
    dataset_path: str | os.PathLike[str], runs_path: str | os.PathLike[str], top_k: int = 10
) -> dict[str, dict[str, dict[str, float]]]:
    """Strategy -> split (``tune``/``test``/``all``) -> mean metric, from a runs file.

    Scores with :func:`ragloom.eval.runner.score_hits` (hits = chunks in rank order), the same
    definitions ``ragloom eval`` reports. Every query of the dataset counts (a query missing
    from the runs scores 0).
    """
    dataset = load_dataset(dataset_path)
    splits = load_split(dataset_path)
    by_strategy: dict[str, dict[str, list[_RunHit]]] = {}
    for raw in Path(runs_path).read_text(encoding="utf-8").splitlines():
        if raw.strip():
            line = json.loads(raw)
            by_strategy.setdefault(str(line["strategy"]), {})[str(line["id"])] = _run_hits(line)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for strategy, runs in by_strategy.items():
        rows: dict[str, list[dict[str, float | None]]] = {"tune": [], "test": [], "all": []}
        for q in dataset:
            metrics = score_hits(q, runs.get(q.id, [])[:top_k], top_k)
            rows[splits.get(q.id, "test")].append(metrics)
            rows["all"].append(metrics)
        out[strategy] = {}
        for split, ms in rows.items():
            if not ms:
                continue
            out[strategy][split] = {
                key: statistics.fmean(v for m in ms if (v := m.get(key)) is not None)
                for key, _ in REPORT_METRICS
            }
            out[strategy][split]["queries"] = float(len(ms))
    return out


# --------------------------------------------------------------------------- error analysis

ERROR_CATEGORIES: tuple[str, ...] = (
    "enclosing class skeleton",
    "module remainder",
    "test code",
    "same-named function elsewhere",
    "other symbol, same file",
    "other file, same package",
    "other package",
)
"""What a hit ranked above the gold function is, first matching category wins."""


def _category(hit: Mapping[str, Any], kind: str, gold_file: str, gold_symbol: str) -> str:
    path, symbol = str(hit["path"]), str(hit["symbol"])
    if path == gold_file and kind != "module" and gold_symbol.startswith(symbol + "."):
        return "enclosing class skeleton"
    if kind == "module":
        return "module remainder"
    if is_test_path(path):
        return "test code"
    if symbol.rsplit(".", 1)[-1] == gold_symbol.rsplit(".", 1)[-1]:
        return "same-named function elsewhere"
    if path == gold_file:
        return "other symbol, same file"
    if path.split("/")[:2] == gold_file.split("/")[:2]:
        return "other file, same package"
    return "other package"


@dataclass(slots=True)
class ErrorStats:
    """What :func:`analyze_errors` counts for one strategy."""

    queries: int = 0
    no_gold_chunk: int = 0
    rank: Counter[str] = field(default_factory=Counter)
    above: Counter[str] = field(default_factory=Counter)
    top1: Counter[str] = field(default_factory=Counter)
    above_mentioning: Counter[str] = field(default_factory=Counter)
    """Hits of ``above`` whose text holds the gold function's name (a call, a test of it, a
    namesake's definition), by category."""

    def to_dict(self) -> dict[str, object]:
        return {
            "queries": self.queries,
            "no_gold_chunk": self.no_gold_chunk,
            "rank": dict(sorted(self.rank.items())),
            "above": {c: self.above[c] for c in ERROR_CATEGORIES if self.above[c]},
            "top1": {c: self.top1[c] for c in ERROR_CATEGORIES if self.top1[c]},
            "above_mentioning": {
                c: self.above_mentioning[c] for c in ERROR_CATEGORIES if self.above_mentioning[c]
            },
        }


def analyze_errors(
    dataset_path: str | os.PathLike[str],
    runs_path: str | os.PathLike[str],
    index_dir: str | os.PathLike[str],
    *,
    split: str = "tune",
    k: int = MRR_K,
) -> dict[str, ErrorStats]:
    """Per strategy: where the gold function ranks, and what the hits above it are (counts).

    ``rank``: ``1``, ``2-5``, ``6-10`` or a miss (not in the top ``k``), split into
    ``miss, gold file found`` and ``miss, gold file missed``. ``above``: every hit ranked above
    the first hit of the gold function (all top-``k`` hits on a miss) by category;
    ``top1``: the category of the rank-1 hit when it is not the gold function.
    ``above_mentioning``: those of ``above`` whose text holds the gold function's name as a
    word. ``no_gold_chunk``: queries whose gold function has no chunk of its own in the index.
    """
    dataset = {q.id: q for q in load_dataset(dataset_path)}
    splits = load_split(dataset_path)
    chunks = _load_chunks(Path(index_dir))
    kind_of = {c.id: c.kind for c in chunks}
    text_of = {c.id: c.text for c in chunks}
    symbols_by_path: dict[str, set[str]] = {}
    for c in chunks:
        if c.kind != "module":
            symbols_by_path.setdefault(c.path, set()).add(c.symbol)
    out: dict[str, ErrorStats] = {}
    for raw in Path(runs_path).read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        q = dataset.get(str(line["id"]))
        if q is None or splits.get(q.id) != split:
            continue
        rec = out.setdefault(str(line["strategy"]), ErrorStats())
        gold_file, gold_symbol = q.gold_files[0], q.gold_symbols[0]
        hits = list(line.get("hits", []))[:k]
        first = next(
            (
                i
                for i, h in enumerate(hits)
                if h["path"] == gold_file and symbol_matches(str(h["symbol"]), gold_symbol)
            ),
            None,
        )
        rec.queries += 1
        own = symbols_by_path.get(gold_file, set())
        if not any(symbol_matches(s, gold_symbol) for s in own):
            rec.no_gold_chunk += 1
        if first is None:
            found_file = any(h["path"] == gold_file for h in hits)
            bucket = "miss, gold file found" if found_file else "miss, gold file missed"
        elif first == 0:
            bucket = "1"
        else:
            bucket = "2-5" if first < 5 else "6-10"
        rec.rank[bucket] += 1
        stop = len(hits) if first is None else first
        name = re.compile(r"\b" + re.escape(gold_symbol.rsplit(".", 1)[-1]) + r"\b")
        for h in hits[:stop]:
            cat = _category(h, kind_of.get(str(h["id"]), ""), gold_file, gold_symbol)
            rec.above[cat] += 1
            if name.search(text_of.get(str(h["id"]), "")):
                rec.above_mentioning[cat] += 1
        if stop > 0:
            h = hits[0]
            rec.top1[_category(h, kind_of.get(str(h["id"]), ""), gold_file, gold_symbol)] += 1
    return out
