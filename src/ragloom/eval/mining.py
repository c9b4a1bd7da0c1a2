"""Training data for the learned ranking stage, mined from outside repositories' history
(issue 22, item 1; docs/ranking.md "Learned ranking").

For each repository of a list (``scripts/ltr_repos.toml``), the qualifying commits (the rules of
:mod:`ragloom.eval.gitdata`: a real message, 1 to 5 library source files modified) are the
questions: the cleaned commit message asks, and the library source files the commit modified
are the answer. Each question is asked *at its parent commit*: the work tree is checked out at
the parent with no ref but HEAD (so the history ragloom reads ends there), indexed
incrementally with its history, and searched with the hand-set ``hybrid``; the candidates and
their evidence are taken where the learned stage will run
(:func:`ragloom.retrieve.stages.features.candidate_features`, through ``tapped``). A group is
one question: its candidates' feature rows, their paths and their labels (1 when the path is a
gold file).

Per repository the newest ``max_questions`` qualifying commits older than ``before`` (where
given) are taken and split by time: the older ``tune_share`` to ``train``, the rest to ``test``.
Groups are written as JSON Lines with rounded features and sorted keys, so that the same
mirrors give the same bytes.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.embed.base import Embedder
from ragloom.eval.gitdata import (
    DEFAULT_TUNE_SHARE,
    MAX_SOURCE_FILES,
    MIN_WORDS,
    Commit,
    clean_message,
    path_role,
    read_commits,
    skip_reason,
    word_count,
)
from ragloom.eval.swebench import _checkout
from ragloom.retrieve.stages.features import FEATURE_NAMES, FEATURES_VERSION, tapped

__all__ = [
    "LOOKUP_KINDS",
    "LOOKUP_QUESTIONS",
    "RESERVED_REPOS",
    "MinedQuestion",
    "MiningSpec",
    "load_mining_specs",
    "lookup_commit",
    "lookup_packages",
    "mine_lookups",
    "mine_questions",
    "mine_repo",
    "qualifying_questions",
]

RESERVED_REPOS = frozenset(
    {
        # reserved for an outside check
        "pallets/click",
        "pallets/flask",
        "psf/requests",
        "encode/httpx",
        "gin-gonic/gin",
        # the SWE-bench repositories: their histories hold the fixes the evaluation asks for
        "django/django",
        "sympy/sympy",
        "scikit-learn/scikit-learn",
        "matplotlib/matplotlib",
        "sphinx-doc/sphinx",
        "astropy/astropy",
        "pydata/xarray",
        "pytest-dev/pytest",
        "pylint-dev/pylint",
        "mwaskom/seaborn",
    }
)
"""Repositories never mined (issue 22): the reserved ones and the SWE-bench ones."""
DEFAULT_QUESTIONS = 150
"""Questions per repository unless its ``[[repo]]`` says (``questions``)."""
SEARCH_TOP_K = 50
FEATURE_DECIMALS = 6


@dataclass(frozen=True, slots=True)
class MiningSpec:
    """One ``[[repo]]`` of ``scripts/ltr_repos.toml``."""

    repo: str
    """``owner/name``."""
    language: str
    git_dir: str
    """The bare git directory, relative to the mirror root."""
    commit: str
    """The pinned newest commit: questions come from its ancestors."""
    before: str = ""
    """Only commits older than this ISO date (a repository whose newer history is held back
    for another evaluation)."""
    questions: int = 0
    """Questions to mine here (0: the caller's default)."""


def load_mining_specs(data: Mapping[str, Any]) -> list[MiningSpec]:
    """Specs from parsed TOML; a reserved or repeated repository is an error."""
    rows = data.get("repo")
    if not isinstance(rows, list) or not rows:
        raise ValueError("the repository list has no [[repo]] entries")
    out: list[MiningSpec] = []
    seen: set[str] = set()
    for row in rows:
        spec = MiningSpec(
            repo=str(row["repo"]),
            language=str(row["language"]),
            git_dir=str(row["git_dir"]),
            commit=str(row["commit"]),
            before=str(row.get("before", "")),
            questions=int(row.get("questions", 0)),
        )
        if spec.repo.lower() in RESERVED_REPOS:
            raise ValueError(f"{spec.repo} may not be mined (reserved or a SWE-bench repository)")
        if spec.repo in seen:
            raise ValueError(f"{spec.repo} is listed twice")
        seen.add(spec.repo)
        out.append(spec)
    return out


@dataclass(frozen=True, slots=True)
class MinedQuestion:
    id: str
    repo: str
    language: str
    commit: str
    parent: str
    timestamp: int
    query: str
    gold_files: tuple[str, ...]
    split: str


def _parent(git_dir: Path, sha: str) -> str | None:
    proc = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "--verify", "--quiet", f"{sha}^1"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None


def _iso_ts(date: str) -> int:
    return int(datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp())


def qualifying_questions(
    commits: Iterable[Commit], max_questions: int, before: int | None = None
) -> list[tuple[int, str, str, tuple[str, ...]]]:
    """(timestamp, sha, question, gold files) of the newest ``max_questions`` qualifying commits
    of ``commits`` (newest first, as ``git log`` lists them) older than ``before`` (epoch
    seconds; None: all), oldest first: the rules of :mod:`ragloom.eval.gitdata` (a real message
    of :data:`MIN_WORDS` words or more, seen once; 1 to :data:`MAX_SOURCE_FILES` library source
    files, the modified ones the answer). The per-repository adaptation
    (:mod:`ragloom.learn.adapt`) picks its questions with the same rules."""
    chosen: list[tuple[int, str, str, tuple[str, ...]]] = []
    seen: set[str] = set()
    # newest first: the first time a text is seen is its newest commit
    for c in commits:
        if before is not None and c.timestamp >= before:
            continue
        if skip_reason(c.message, c.author, c.email) is not None:
            continue
        source = {p for _, p in c.changes if path_role(p) == "source"}
        gold = tuple(sorted({p for st, p in c.changes if st in ("M", "T") and p in source}))
        if not gold or len(source) > MAX_SOURCE_FILES:
            continue
        query = clean_message(c.message)
        key = query.lower()
        if word_count(query) < MIN_WORDS or key in seen:
            continue
        seen.add(key)
        chosen.append((c.timestamp, c.sha, query, gold))
        if len(chosen) >= max_questions:
            break
    chosen.sort()
    return chosen


def mine_questions(
    spec: MiningSpec,
    mirror_root: Path,
    *,
    max_questions: int = DEFAULT_QUESTIONS,
    tune_share: float = DEFAULT_TUNE_SHARE,
) -> list[MinedQuestion]:
    """The repository's questions, oldest first (see the module docstring)."""
    git_dir = mirror_root / spec.git_dir
    limit = _iso_ts(spec.before) if spec.before else None
    chosen = qualifying_questions(read_commits(git_dir, spec.commit), max_questions, limit)
    n_train = int(len(chosen) * tune_share)
    out: list[MinedQuestion] = []
    for i, (ts, sha, query, gold) in enumerate(chosen):
        parent = _parent(git_dir, sha)
        if parent is None:
            continue
        out.append(
            MinedQuestion(
                id=f"{spec.repo}@{sha[:12]}",
                repo=spec.repo,
                language=spec.language,
                commit=sha,
                parent=parent,
                timestamp=ts,
                query=query,
                gold_files=gold,
                split="train" if i < n_train else "test",
            )
        )
    return out


def _group(q: MinedQuestion, paths: Sequence[str], x: np.ndarray) -> dict[str, Any]:
    gold = set(q.gold_files)
    return {
        "id": q.id,
        "repo": q.repo,
        "language": q.language,
        "split": q.split,
        "query": q.query,
        "gold_files": list(q.gold_files),
        "features": FEATURES_VERSION,
        "paths": list(paths),
        "labels": [int(p in gold) for p in paths],
        "x": [[round(float(v), FEATURE_DECIMALS) for v in row] for row in x],
    }


def _capture(
    into: list[tuple[list[str], np.ndarray]],
) -> Callable[[Any, list[int], np.ndarray], None]:
    """A tap that keeps each query's candidate paths and features in ``into``."""

    def tap(state: Any, rowids: list[int], x: np.ndarray) -> None:
        info = state.source.chunk_info(rowids)
        into.append(([info[r][0] if r in info else "" for r in rowids], x))

    return tap


def mine_repo(
    spec: MiningSpec,
    questions: Iterable[MinedQuestion],
    *,
    mirror_root: Path,
    work_dir: Path,
    embedder: Embedder,
    on_group: Callable[[dict[str, Any]], None],
    done: set[str] | None = None,
    progress: Callable[[str], None] | None = None,
    on_no_history: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Ask each question at its parent commit and hand its group to ``on_group``; questions
    whose id is in ``done`` are skipped (a resumed run). With ``on_no_history`` each question is
    asked a second time with the history detached (an index without history, as ``eval_git.py
    --history none`` asks), and that group (``kind`` ``commit-no-history``) goes there. Returns
    the groups written to ``on_group``."""
    import ragloom

    mirror = mirror_root / spec.git_dir
    work = work_dir / spec.repo.replace("/", "+")
    n = 0
    for q in questions:
        if done and q.id in done:
            continue
        t0 = time.perf_counter()
        _checkout(mirror, work, q.parent)
        index = ragloom.open(work, embedder=embedder)
        try:
            index.index(history=True)
            t_index = time.perf_counter() - t0
            captured: list[tuple[list[str], np.ndarray]] = []
            with tapped(_capture(captured)):
                index.search(q.query, top_k=SEARCH_TOP_K, strategy="hybrid+handset")
            plain: list[tuple[list[str], np.ndarray]] = []
            if on_no_history is not None:
                retriever = index.retriever
                history, retriever.history = retriever.history, None
                try:
                    with tapped(_capture(plain)):
                        index.search(q.query, top_k=SEARCH_TOP_K, strategy="hybrid+handset")
                finally:
                    retriever.history = history
        finally:
            index.close()
        if captured:
            paths, x = captured[0]
            on_group(_group(q, paths, x))
            n += 1
        if plain and on_no_history is not None:
            paths, x = plain[0]
            on_no_history(
                _group(q, paths, x) | {"id": f"{q.id}:no-history", "kind": "commit-no-history"}
            )
        if progress:
            progress(
                f"{q.id}: indexed in {t_index:.1f}s, asked in "
                f"{time.perf_counter() - t0 - t_index:.1f}s"
            )
    return n


def feature_header() -> dict[str, Any]:
    """What a groups file was mined with (the first line of ``meta.json``)."""
    return {"features": FEATURES_VERSION, "names": list(FEATURE_NAMES)}


def load_groups(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Groups of one or more JSON Lines files; every group must carry this feature set."""
    out: list[dict[str, Any]] = []
    for p in paths:
        for line in p.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            g = json.loads(line)
            if g.get("features") != FEATURES_VERSION:
                raise ValueError(
                    f"{p}: group {g.get('id')} has features {g.get('features')!r}, "
                    f"not {FEATURES_VERSION!r}: mine again"
                )
            out.append(g)
    return out


LOOKUP_QUESTIONS = 400
"""Look-up questions per Python repository (:func:`mine_lookups`)."""
LOOKUP_KINDS = ("lookup", "lookup+history")
"""The two groups a look-up question gives: asked without history and with it."""
_NOT_LIBRARY = frozenset(
    {
        "test",
        "tests",
        "testing",
        "doc",
        "docs",
        "docs_src",
        "example",
        "examples",
        "bench",
        "benchmarks",
        "scripts",
        "tools",
        "build",
        "dist",
    }
)


def lookup_packages(tree: Path) -> list[str]:
    """The library packages of a Python work tree, relative to it: top-level folders (or
    folders under ``src/``) holding an ``__init__.py``, except tests, docs, examples, benchmarks
    and scripts; sorted."""
    out: list[str] = []
    for base in ("", "src/"):
        root = tree / base if base else tree
        if not root.is_dir():
            continue
        for p in sorted(root.iterdir()):
            if (
                p.is_dir()
                and not p.is_symlink()
                and not p.name.startswith((".", "_"))
                and p.name.lower() not in _NOT_LIBRARY
                and (p / "__init__.py").is_file()
            ):
                out.append(f"{base}{p.name}")
    return out


def lookup_commit(questions: Sequence[MinedQuestion]) -> str | None:
    """Where a repository's look-up questions are asked: the parent of its newest ``train``
    question, so that neither the code nor the history they see reaches a ``test`` question."""
    train = [q for q in questions if q.split == "train"]
    return max(train, key=lambda q: q.timestamp).parent if train else None


def mine_lookups(
    spec: MiningSpec,
    commit: str,
    *,
    mirror_root: Path,
    work_dir: Path,
    embedder: Embedder,
    on_group: Callable[[dict[str, Any]], None],
    n_queries: int = LOOKUP_QUESTIONS,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Look-up groups of a Python repository at ``commit``, as the standard-library sets ask
    them (:mod:`ragloom.eval.symbolset`): a documented function's docstring first sentence
    asks, the function's file is the answer, and every docstring is stripped from the indexed
    copy of the library packages (:func:`lookup_packages`). Each question is asked twice: with
    no history (``kind`` ``lookup``, as the standard-library sets are) and with the history up
    to ``commit`` (``lookup+history``, as ``scripts/eval_lookup_history.py`` asks). The split is
    the symbol set's hash split (``tune`` -> ``train``). Returns the groups written.

    Commit questions teach the model where a change goes; on look-ups alone (a paraphrase of one
    function) it would rank files over functions (docs/ranking.md, "Look-up groups")."""
    import ragloom
    from ragloom.eval.gitrun import HistoryAsOf, build_history
    from ragloom.eval.symbolset import build_symbol_set

    stem = spec.repo.replace("/", "+")
    mirror = mirror_root / spec.git_dir
    tree = work_dir / f"{stem}-lookup-tree"
    _checkout(mirror, tree, commit)
    packages = lookup_packages(tree)
    if not packages:
        return 0
    t0 = time.perf_counter()
    built = build_symbol_set(
        work_dir / f"{stem}-lookups",
        [f"repo:{p}" for p in packages],
        name=stem,
        n_queries=n_queries,
        roots={"repo": str(tree)},
    )
    root = built.corpus_dir / "repo"
    index = ragloom.open(root, embedder=embedder)
    n = 0
    try:
        index.index(history=False)
        if progress:
            progress(
                f"{spec.repo}: {len(built.queries)} look-ups over {packages}, indexed in "
                f"{time.perf_counter() - t0:.1f}s"
            )
        history = build_history(mirror, commit, 2**40, work_dir / f"{stem}-lookup-history")
        for kind in LOOKUP_KINDS:
            index.retriever.history = HistoryAsOf(history) if kind == "lookup+history" else None
            for q, split in built.queries:
                captured: list[tuple[list[str], np.ndarray]] = []
                with tapped(_capture(captured)):
                    index.search(q.query, top_k=SEARCH_TOP_K, strategy="hybrid+handset")
                if not captured:
                    continue
                paths, x = captured[0]
                mq = MinedQuestion(
                    id=f"{spec.repo}:{kind}:{q.id}",
                    repo=spec.repo,
                    language=spec.language,
                    commit=commit,
                    parent=commit,
                    timestamp=0,
                    query=q.query,
                    gold_files=tuple(g.removeprefix("repo/") for g in q.gold_files),
                    split="train" if split == "tune" else "test",
                )
                on_group(_group(mq, paths, x) | {"kind": kind})
                n += 1
    finally:
        index.close()
    return n
