"""Issue localisation on SWE-bench questions (docs/evaluation.md, "SWE-bench localisation").

The question is an issue's problem statement; the gold is what the fix (the instance's
``patch``) edited: its files, and the functions whose lines it changed (each hunk mapped to the
innermost ``def``/``class`` enclosing the edited lines at the base commit).

Two protocols score every method:

- **product**: every file of the repository is indexed and ranked (what a user of ragloom gets);
  the gold is every file of the patch that exists at the base commit;
- **papers**: only the functions of non-test ``.py`` files rank (SweRank, arXiv 2505.07849, and
  LocAgent, arXiv 2503.09089): ragloom's hits are kept when they lie in such a file, ranked
  functions are collapsed to files in order of first appearance; the gold is the non-test
  ``.py`` files of the patch.

Metrics (per repository and overall): file Acc@1/3/5/10 (every gold file among the first k
files; with one gold file, the usual "the edited file is in the top k"), file MRR@10 (first gold
file), function Acc@5/10 (every gold function among the first k functions), and context recall
at a budget: the share of gold functions whose edited lines all lie inside the context that
``get_context`` assembles at 4k/8k/13k/27k tokens (cl100k) from the first
:func:`context_hits` hits.

The baseline (``bm25``) is a function-level BM25 with the papers' protocol: ``bm25s`` with its
defaults over every function, method and class body of the non-test ``.py`` files, tokenised as
:func:`ragloom.eval.baseline.simple_tokenize`; its context is whole functions in rank order.

Data: ``build_questions`` reads a SWE-bench-format file (JSON array or JSON lines with
``instance_id``, ``repo``, ``base_commit``, ``problem_statement``, ``patch``) and the bare
mirrors ``fetch`` brings (``<mirror_root>/<owner>+<name>/repo``), drops the reserved instances
(ids of a SWE-bench Lite file, read for their ``instance_id`` only, and reserved repositories),
orders each repository's instances by their base commit's committer time and splits them: the
older half (``n // 2``) is ``tune``, the rest ``test``. Its output is byte-identical when rebuilt.

A run (:func:`run_repo`) checks each base commit out into one work tree with a ``.git`` that
holds only the base commit's history (no ref points later), indexes it incrementally with the
commit history (only chunks whose text changed are re-embedded; an :class:`EmbeddingCache`
keyed by text makes a second run embed nothing), then asks every method.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ragloom.assemble.structure import StructureMode
    from ragloom.embed.base import Embedder, ProgressCallback
    from ragloom.retrieve.stages.base import IssueWeights
    from ragloom.types import Hit

__all__ = [
    "BUDGETS",
    "FILE_KS",
    "FUNCTION_KS",
    "PROTOCOLS",
    "RESERVED_REPOS",
    "EmbeddingCache",
    "FunctionBm25",
    "FunctionDef",
    "GoldFunction",
    "Instance",
    "SweQuestion",
    "build_questions",
    "definitions",
    "dump_questions",
    "edited_lines",
    "enclosing",
    "is_test_path",
    "load_instances",
    "load_questions",
    "mirror_dir",
    "protocol_gold",
    "reserved_ids",
    "run_repo",
    "score_run",
    "summarize",
]

log = logging.getLogger("ragloom.eval.swebench")

RESERVED_REPOS: frozenset[str] = frozenset(
    {"psf/requests", "pallets/flask", "pallets/click", "encode/httpx", "gin-gonic/gin"}
)
"""Repositories kept for an outside check: never evaluated or tuned on."""
PROTOCOLS = ("product", "papers")
FILE_KS: tuple[int, ...] = (1, 3, 5, 10)
FUNCTION_KS: tuple[int, ...] = (5, 10)
BUDGETS: tuple[int, ...] = (4000, 8000, 13000, 27000)
"""Context budgets (tokens): 13k and 27k are the SWE-bench paper's BM25 retrieval settings."""
SEARCH_DEPTH = 200
"""Hits asked of ragloom per question: deep enough for 10 distinct files under both protocols."""
CONTEXT_TOP_K = 15
"""``get_context``'s default number of hits."""
TOKENS_PER_HIT = 500
"""Budget tokens per hit handed to assembly above the default (:func:`context_hits`)."""
TEST_DIRS: frozenset[str] = frozenset({"test", "tests", "testing"})
"""A folder of this name anywhere on the path makes a file test code (pytest keeps its own
tests in ``testing/``)."""


# --- data -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Instance:
    """One SWE-bench instance (the fields this evaluation reads)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str


@dataclass(frozen=True, slots=True)
class GoldFunction:
    """A definition the fix edited: file, qualified name (``Class.method``), its line span at
    the base commit and the old-side lines the patch touched inside it."""

    path: str
    name: str
    start: int
    end: int
    lines: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass(frozen=True, slots=True)
class SweQuestion:
    """One question of the evaluation, with its gold and split."""

    id: str
    repo: str
    base_commit: str
    time: int
    split: str
    query: str
    gold_files: tuple[str, ...]
    gold_functions: tuple[GoldFunction, ...]
    edited: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Old-side edited lines per gold file (module-level edits included)."""


def is_test_path(rel: str) -> bool:
    """Test code: a folder in :data:`TEST_DIRS`, ``test_*.py``, ``*_test.py`` or conftest."""
    parts = rel.split("/")
    name = parts[-1]
    if any(p in TEST_DIRS for p in parts[:-1]):
        return True
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def load_instances(path: Path) -> list[Instance]:
    """Instances of a JSON array or JSON-lines file, in file order."""
    text = path.read_text(encoding="utf-8")
    rows: list[Any]
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for i, row in enumerate(rows, 1):
        try:
            out.append(
                Instance(
                    str(row["instance_id"]),
                    str(row["repo"]),
                    str(row["base_commit"]),
                    str(row["problem_statement"]),
                    str(row["patch"]),
                )
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: instance {i} lacks a field: {exc}") from exc
    return out


def reserved_ids(path: Path) -> set[str]:
    """The ``instance_id`` of every line of a reserved (SWE-bench Lite) file; nothing else of
    it is kept."""
    ids: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            ids.add(str(json.loads(line)["instance_id"]))
    return ids


def mirror_dir(mirror_root: Path, repo: str) -> Path:
    """The bare git directory ``fetch`` made for ``owner/name``."""
    return mirror_root / repo.replace("/", "+") / "repo"


def _git(git_dir: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {git_dir}: {proc.stderr.strip()}")
    return proc.stdout


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def edited_lines(patch: str) -> dict[str, tuple[int, ...]]:
    """Old-side lines each file of a unified diff edits: removed lines, and for a pure insertion
    the old line it follows (at least line 1). Added files (``--- /dev/null``) are left out:
    nothing of them exists at the base commit."""
    out: dict[str, set[int]] = {}
    current: set[int] | None = None
    old_line = 0
    old_path: str | None = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            src = line[4:].split("\t")[0].strip()
            old_path = None if src == "/dev/null" else src.removeprefix("a/")
            current = None
            continue
        if line.startswith("+++ "):
            current = out.setdefault(old_path, set()) if old_path else None
            continue
        m = _HUNK.match(line)
        if m:
            old_line = int(m.group(1))
            continue
        if current is None or line.startswith("\\"):
            continue
        if line.startswith("-"):
            current.add(old_line)
            old_line += 1
        elif line.startswith("+"):
            current.add(max(old_line - 1, 1))
        else:
            old_line += 1
    return {p: tuple(sorted(v)) for p, v in out.items()}


@dataclass(frozen=True, slots=True)
class FunctionDef:
    """A definition of a Python file: qualified name, kind, line span (1-based, inclusive)."""

    name: str
    kind: str
    start: int
    end: int


def definitions(source: str) -> list[FunctionDef]:
    """Every function, method and class of a Python source, in source order: classes are
    entered (methods, nested classes), functions are not (a function nested in a function is
    part of it, as in the papers' corpora); a file that does not parse gives none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[FunctionDef] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append(FunctionDef(name, kind, start, child.end_lineno or child.lineno))
                if kind == "class":
                    visit(child, f"{name}.")
            elif not isinstance(child, ast.expr):
                visit(child, prefix)

    visit(tree, "")
    return out


def enclosing(defs: Sequence[FunctionDef], first: int, last: int) -> FunctionDef | None:
    """The innermost definition whose span holds lines ``first``..``last``."""
    best: FunctionDef | None = None
    for d in defs:
        if d.start <= first and last <= d.end and (best is None or d.start >= best.start):
            best = d
    return best


def _gold_functions(path: str, source: str, lines: Sequence[int]) -> list[GoldFunction]:
    defs = definitions(source)
    grouped: dict[FunctionDef, list[int]] = {}
    for ln in lines:
        d = enclosing(defs, ln, ln)
        if d is not None:
            grouped.setdefault(d, []).append(ln)
    return [
        GoldFunction(path, d.name, d.start, d.end, tuple(v))
        for d, v in sorted(grouped.items(), key=lambda kv: kv[0].start)
    ]


def build_questions(
    instances: Sequence[Instance],
    mirror_root: Path,
    reserved: set[str],
    on_missing: Callable[[str, str], None] | None = None,
) -> list[SweQuestion]:
    """Questions and gold of the instances whose mirror holds the base commit (reserved ones
    dropped), per repository in time order, split older half ``tune``, newer half ``test``."""
    by_repo: dict[str, list[tuple[int, str, Instance]]] = {}
    for inst in instances:
        if inst.instance_id in reserved or inst.repo in RESERVED_REPOS:
            continue
        git_dir = mirror_dir(mirror_root, inst.repo)
        if not git_dir.is_dir():
            if on_missing:
                on_missing(inst.instance_id, f"no mirror of {inst.repo}")
            continue
        out = _git(git_dir, "show", "-s", "--format=%ct", inst.base_commit, check=False)
        if not out.strip():
            if on_missing:
                on_missing(inst.instance_id, f"base commit {inst.base_commit} not in the mirror")
            continue
        by_repo.setdefault(inst.repo, []).append((int(out.strip()), inst.instance_id, inst))
    questions: list[SweQuestion] = []
    for repo in sorted(by_repo):
        rows = sorted(by_repo[repo], key=lambda r: (r[0], r[1]))
        git_dir = mirror_dir(mirror_root, repo)
        n_tune = len(rows) // 2
        for i, (when, _, inst) in enumerate(rows):
            edited = edited_lines(inst.patch)
            present = {p for p in edited if _exists(git_dir, inst.base_commit, p)}
            gold_fns: list[GoldFunction] = []
            for p in sorted(present):
                if p.endswith(".py"):
                    src = _git(git_dir, "show", f"{inst.base_commit}:{p}")
                    gold_fns.extend(_gold_functions(p, src, edited[p]))
            questions.append(
                SweQuestion(
                    inst.instance_id,
                    repo,
                    inst.base_commit,
                    when,
                    "tune" if i < n_tune else "test",
                    inst.problem_statement,
                    tuple(sorted(present)),
                    tuple(gold_fns),
                    {p: edited[p] for p in sorted(present)},
                )
            )
    return questions


def _exists(git_dir: Path, commit: str, path: str) -> bool:
    out = _git(git_dir, "cat-file", "-t", f"{commit}:{path}", check=False)
    return out.strip() == "blob"


def dump_questions(questions: Iterable[SweQuestion], path: Path) -> int:
    """Write questions as JSON lines (sorted keys: a rebuild gives the same bytes)."""
    lines = [json.dumps(asdict(q), sort_keys=True, ensure_ascii=False) for q in questions]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return len(lines)


def load_questions(path: Path) -> list[SweQuestion]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        o = json.loads(line)
        out.append(
            SweQuestion(
                o["id"],
                o["repo"],
                o["base_commit"],
                int(o["time"]),
                o["split"],
                o["query"],
                tuple(o["gold_files"]),
                tuple(
                    GoldFunction(g["path"], g["name"], g["start"], g["end"], tuple(g["lines"]))
                    for g in o["gold_functions"]
                ),
                {k: tuple(v) for k, v in o["edited"].items()},
            )
        )
    return out


# --- an embedding cache keyed by text -------------------------------------------------------


class EmbeddingCache:
    """An :class:`~ragloom.embed.base.Embedder` that keeps every vector it computes in SQLite,
    keyed by (model, SHA-256 of the text): a text embedded once is never embedded again, so a
    second walk over the same base commits costs parsing and BM25 only."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.spec = getattr(inner, "spec", None)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
        )
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def _key(self, text: str) -> str:
        h = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{self.model_id}:{h}"

    def embed_documents(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        import numpy as np

        keys = [self._key(t) for t in texts]
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            marks = ",".join("?" * len(part))
            found.update(
                self._db.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", part).fetchall()
            )
        todo = [i for i, k in enumerate(keys) if k not in found]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            if k in found:
                out[i] = np.frombuffer(found[k], dtype=np.float32)
        if todo:
            vecs = self.inner.embed_documents(
                [texts[i] for i in todo], batch_size=batch_size, progress=progress
            )
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vec VALUES (?, ?)",
                    [(keys[i], vecs[j].astype(np.float32).tobytes()) for j, i in enumerate(todo)],
                )
            for j, i in enumerate(todo):
                out[i] = vecs[j]
        elif progress is not None:
            progress(len(texts))
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def close(self) -> None:
        self._db.close()


# --- the function-level BM25 baseline (papers' protocol) -----------------------------------


@dataclass(frozen=True, slots=True)
class _FnDoc:
    path: str
    name: str
    start: int
    end: int


class FunctionBm25:
    """``bm25s`` over every definition of the non-test ``.py`` files of a work tree."""

    def __init__(self, root: Path, files: Sequence[str]) -> None:
        import importlib

        from ragloom.eval.baseline import simple_tokenize

        bm25s = importlib.import_module("bm25s")

        self.docs: list[_FnDoc] = []
        texts: list[list[str]] = []
        for rel in files:
            try:
                src = (root / rel).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            lines = src.splitlines()
            for d in definitions(src):
                self.docs.append(_FnDoc(rel, d.name, d.start, d.end))
                texts.append(simple_tokenize("\n".join(lines[d.start - 1 : d.end])))
        self._retriever: Any = bm25s.BM25()
        self._retriever.index(texts or [["empty"]], show_progress=False)
        self._vocab: Mapping[str, int] = self._retriever.vocab_dict

    def rank(self, query: str) -> list[_FnDoc]:
        from ragloom.eval.baseline import simple_tokenize

        tokens = [t for t in simple_tokenize(query) if t in self._vocab]
        if not tokens or not self.docs:
            return []
        scores = self._retriever.get_scores(tokens).tolist()
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        return [self.docs[i] for i in order]


# --- scoring ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Ranked:
    """One method's answer to one question under one protocol."""

    files: list[str]
    functions: list[str]
    context: dict[int, list[tuple[str, int, int]]] = field(default_factory=dict)
    """Budget -> the (path, first line, last line) ranges of the assembled context."""


def _acc(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    g = set(gold)
    return 1.0 if g and g.issubset(ranked[:k]) else 0.0


def _covered(fn: GoldFunction, ranges: Sequence[tuple[str, int, int]]) -> bool:
    spans = [(a, b) for p, a, b in ranges if p == fn.path]
    return all(any(a <= ln <= b for a, b in spans) for ln in fn.lines)


def score_run(q: SweQuestion, protocol: str, r: Ranked) -> dict[str, float | None]:
    """The metrics of one answer; None where the question has no gold under the protocol."""
    gold_files = protocol_gold(q, protocol)
    gold_fns = [g for g in q.gold_functions if g.path in gold_files]
    out: dict[str, float | None] = {}
    for k in FILE_KS:
        out[f"file_acc@{k}"] = _acc(r.files, gold_files, k) if gold_files else None
    rr = 0.0
    for i, f in enumerate(r.files[:10], 1):
        if f in gold_files:
            rr = 1.0 / i
            break
    out["file_mrr@10"] = rr if gold_files else None
    keys = [g.key for g in gold_fns]
    for k in FUNCTION_KS:
        out[f"fn_acc@{k}"] = _acc(r.functions, keys, k) if keys else None
    for b in BUDGETS:
        if b in r.context and gold_fns:
            out[f"ctx@{b // 1000}k"] = sum(_covered(g, r.context[b]) for g in gold_fns) / len(
                gold_fns
            )
        else:
            out[f"ctx@{b // 1000}k"] = None
    return out


def protocol_gold(q: SweQuestion, protocol: str) -> list[str]:
    """The gold files of ``q`` under ``protocol``: every file of the patch (``product``), or
    its non-test ``.py`` files (``papers``)."""
    if protocol == "product":
        return list(q.gold_files)
    return [p for p in q.gold_files if p.endswith(".py") and not is_test_path(p)]


def summarize(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean of every metric (ignoring None) per (method, protocol) of score rows; each row
    has ``method``, ``protocol`` and ``metrics``; ``n`` is the question count."""
    acc: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        key = f"{row['method']}|{row['protocol']}"
        per = acc.setdefault(key, {})
        per.setdefault("n", []).append(1.0)
        for m, v in row["metrics"].items():
            if v is not None:
                per.setdefault(m, []).append(float(v))
    return {
        key: {m: (len(v) if m == "n" else sum(v) / len(v)) for m, v in per.items()}
        for key, per in acc.items()
    }


# --- a run over one repository --------------------------------------------------------------


def _checkout(mirror: Path, work: Path, commit: str) -> None:
    """Put ``commit`` in ``work`` (a clone sharing the mirror's objects) with no ref but HEAD,
    so the history ragloom reads is the base commit's and nothing later."""
    if not (work / ".git").is_dir():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "clone", "-q", "--no-checkout", "--shared", str(mirror), str(work)],
            check=True,
            capture_output=True,
        )
    gd = work / ".git"
    # A snapshot may lack its largest blobs (``fetch`` leaves them out): those paths are kept
    # out of the work tree by a sparse checkout, as a file too large to index would be.
    missing = _missing_blobs(gd, commit)
    patterns = ["/*", *(f"!/{p}" for p in missing)]
    _git(gd, "config", "core.sparseCheckout", "true")
    (gd / "info").mkdir(exist_ok=True)
    (gd / "info" / "sparse-checkout").write_text("\n".join(patterns) + "\n", encoding="utf-8")
    subprocess.run(
        ["git", "-C", str(work), "checkout", "-q", "-f", "--detach", commit],
        check=True,
        capture_output=True,
    )
    if missing:
        log.info("%s: %d blobs absent from the snapshot left out", commit, len(missing))
    subprocess.run(
        ["git", "-C", str(work), "clean", "-q", "-ffdx", "-e", ".ragloom"],
        check=True,
        capture_output=True,
    )
    refs = _git(gd, "for-each-ref", "--format=%(refname)").split()
    for ref in refs:
        _git(gd, "update-ref", "-d", ref)
    (gd / "packed-refs").unlink(missing_ok=True)


def _missing_blobs(git_dir: Path, commit: str) -> list[str]:
    """Paths of ``commit`` whose blob the object store does not hold."""
    tree = _git(git_dir, "ls-tree", "-r", "-z", commit)
    entries = [e.split("\t", 1) for e in tree.split("\0") if e]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    if not blobs:
        return []
    proc = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch-check"],
        input="".join(f"{sha}\n" for sha, _ in blobs),
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.splitlines()
    return sorted(path for (_, path), line in zip(blobs, lines, strict=True) if "missing" in line)


def _tracked_files(work: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(work), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    return sorted(p for p in out.split("\0") if p)


class _Defs:
    """Definitions of the work tree's ``.py`` files, cached by content hash."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[tuple[str, int, int], list[FunctionDef]] = {}

    def of(self, rel: str) -> list[FunctionDef]:
        if not rel.endswith(".py"):
            return []
        p = self.root / rel
        try:
            st = p.stat()
        except OSError:
            return []
        key = (rel, st.st_mtime_ns, st.st_size)
        if key not in self._cache:
            self._cache[key] = definitions(p.read_text(encoding="utf-8", errors="replace"))
        return self._cache[key]


def _functions_of_hits(hits: Sequence[Hit], defs: _Defs) -> list[str]:
    """Ranked functions of ranked hits: each hit's innermost enclosing definition (first seen)."""
    seen: dict[str, None] = {}
    for h in hits:
        d = enclosing(defs.of(h.path), h.start_line, h.end_line)
        if d is not None:
            seen.setdefault(f"{h.path}::{d.name}", None)
    return list(seen)


def _paper_hit(path: str) -> bool:
    return path.endswith(".py") and not is_test_path(path)


def context_hits(budget: int) -> int:
    """Hits handed to assembly for a budget: ``get_context``'s default of 15, or one per
    :data:`TOKENS_PER_HIT` tokens of a larger budget (a 27k context from 15 chunks would leave
    most of it empty, where the BM25 baseline fills it)."""
    return max(CONTEXT_TOP_K, budget // TOKENS_PER_HIT)


def _context_ranges(ctx: Any) -> list[tuple[str, int, int]]:
    return [(p.file_path, a, b) for p in ctx.parts for a, b in p.ranges]


def _ragloom_answers(
    index: Any,
    q: SweQuestion,
    strategy: str,
    defs: _Defs,
    budgets: Sequence[int],
    variant: IssueWeights | None = None,
    structure: StructureMode = "off",
) -> dict[str, Ranked]:
    from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
    from ragloom.assemble.structure import structure_budget

    retriever = index.retriever
    if variant is not None:
        saved = retriever.issue_weights
        retriever.issue_weights = variant
        try:
            res = index.search(q.query, top_k=SEARCH_DEPTH, strategy=strategy)
        finally:
            retriever.issue_weights = saved
    else:
        res = index.search(q.query, top_k=SEARCH_DEPTH, strategy=strategy)
    counter = get_counter("cl100k")
    out: dict[str, Ranked] = {}
    for protocol in PROTOCOLS:
        hits = res.hits if protocol == "product" else [h for h in res.hits if _paper_hit(h.path)]
        files = list(dict.fromkeys(h.path for h in hits))
        r = Ranked(files, _functions_of_hits(hits, defs))
        for b in budgets:
            top = hits[: context_hits(b)]
            full = TokenBudget.for_total(b)
            policy = AssemblyPolicy(format="xml")
            ctx = assemble_context(
                q.query,
                top,
                root=index.root,
                budget=structure_budget(full, structure),
                policy=policy,
                counter=counter,
                embeddings=retriever.embeddings_for_hits(top),
            )
            if structure != "off":  # a signature part covers its own lines only
                ctx = index.add_structure(ctx, structure, full, policy, counter)
            r.context[b] = _context_ranges(ctx)
        out[protocol] = r
    return out


def _bm25_answer(bm: FunctionBm25, root: Path, q: SweQuestion, budgets: Sequence[int]) -> Ranked:
    from ragloom.assemble import get_counter

    docs = bm.rank(q.query)
    files = list(dict.fromkeys(d.path for d in docs))
    r = Ranked(files, list(dict.fromkeys(f"{d.path}::{d.name}" for d in docs)))
    counter = get_counter("cl100k")
    texts: dict[str, list[str]] = {}
    for b in budgets:
        used = 0
        ranges: list[tuple[str, int, int]] = []
        for d in docs[:400]:
            if d.path not in texts:
                texts[d.path] = (root / d.path).read_text("utf-8", "replace").splitlines()
            n = counter.count("\n".join(texts[d.path][d.start - 1 : d.end]))
            if used + n > b:
                continue
            used += n
            ranges.append((d.path, d.start, d.end))
        r.context[b] = ranges
    return r


def run_repo(
    questions: Sequence[SweQuestion],
    *,
    mirror_root: Path,
    work_dir: Path,
    strategies: Sequence[str],
    embedder: Embedder,
    variants: Mapping[str, tuple[str, IssueWeights]] | None = None,
    candidates: Mapping[str, tuple[str, IssueWeights]] | None = None,
    budgets: Sequence[int] = BUDGETS,
    baseline: bool = True,
    on_result: Callable[[dict[str, Any]], None],
    progress: Callable[[str], None] | None = None,
    structure: Sequence[StructureMode] = (),
) -> None:
    """Walk one repository's questions in time order: check out, index incrementally, ask.

    ``on_result`` gets one row per (question, method, protocol) with the metrics and the first
    files (``files``) and functions (``functions``) of the ranking. ``variants`` (name ->
    strategy and issue weights, for tuning) are asked too, without context recall;
    ``candidates`` (the same) with it; ``structure`` modes ask each strategy again with
    structural context on (method ``"<strategy> [structure <mode>]"``, docs/graph.md)."""
    import ragloom

    if not questions:
        return
    repo = questions[0].repo
    mirror = mirror_dir(mirror_root, repo)
    work = work_dir / repo.replace("/", "+")
    for q in sorted(questions, key=lambda x: (x.time, x.id)):
        t0 = time.perf_counter()
        _checkout(mirror, work, q.base_commit)
        index = ragloom.open(work, embedder=embedder)
        stats = index.index(history=True)
        t_index = time.perf_counter() - t0
        defs = _Defs(work)
        answers: dict[str, dict[str, Ranked]] = {}
        if baseline:
            py = [p for p in _tracked_files(work) if _paper_hit(p)]
            bm = FunctionBm25(work, py)
            answers["bm25"] = {"papers": _bm25_answer(bm, work, q, budgets)}
        for strategy in strategies:
            answers[strategy] = _ragloom_answers(index, q, strategy, defs, budgets)
            for mode in structure:  # the same ranking, structural context on (issue 24)
                answers[f"{strategy} [structure {mode}]"] = _ragloom_answers(
                    index, q, strategy, defs, budgets, structure=mode
                )
        for name, (strategy, weights) in (variants or {}).items():
            answers[name] = _ragloom_answers(index, q, strategy, defs, (), weights)
        for name, (strategy, weights) in (candidates or {}).items():
            answers[name] = _ragloom_answers(index, q, strategy, defs, budgets, weights)
        index.close()
        for method, per in answers.items():
            for protocol, r in per.items():
                on_result(
                    {
                        "id": q.id,
                        "repo": q.repo,
                        "split": q.split,
                        "method": method,
                        "protocol": protocol,
                        "metrics": score_run(q, protocol, r),
                        "files": r.files[:20],
                        "functions": r.functions[:20],
                    }
                )
        if progress:
            progress(
                f"{q.id}: indexed {stats.files_changed} changed files in {t_index:.1f}s, "
                f"asked in {time.perf_counter() - t0 - t_index:.1f}s"
            )
