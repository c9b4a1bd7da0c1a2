"""File-level runs of the git-history evaluation: ragloom's strategies and the plain BM25 baseline.

One implementation for ``scripts/eval_git.py`` (the full evaluation, docs/evaluation-git.md) and
``tests/golden/test_git_sample.py`` (its golden sample in the default test run), so the two
cannot drift apart. Each method gives, per question, a ranked list of distinct files:

- the baseline (:class:`ragloom.eval.baseline.Bm25Baseline`) ranks every file with a chunk that
  matches a query word, by its best chunk;
- a ragloom strategy ranks the files of its ``top_k`` hits (default 50, the fusion depth of the
  hybrid strategies, so asking for 50 reorders nothing) in first-seen order. When those hits hold
  fewer than :data:`MIN_FILES` distinct files (large files with many chunks), the files of a
  :data:`DEEP_TOP_K`-hit search follow, after the ones already ranked: the scores look at the
  first 10 files, and a list shorter than that would count as a miss what a deeper look finds.

Scoring is :func:`ragloom.eval.baseline.file_metrics` (R@1, R@5, R@10, MRR@10 over files).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ragloom.eval.baseline import Bm25Baseline, file_metrics, load_chunks, mean_metrics
from ragloom.eval.dataset import EvalQuery
from ragloom.eval.gitdata import Commit
from ragloom.eval.runner import SearchIndex, run_eval
from ragloom.sources.commit_history import CommitHistory

__all__ = [
    "BASELINE",
    "DEEP_TOP_K",
    "DEFAULT_TOP_K",
    "MIN_FILES",
    "AsOfIndex",
    "FileRun",
    "GitEvalRun",
    "HistoryAsOf",
    "baseline_runs",
    "build_history",
    "evaluate_files",
    "history_from_commits",
    "load_commits",
    "method_means",
    "question_times",
    "ragloom_runs",
    "split_starts",
]

BASELINE = "bm25"
"""Method name of the plain BM25 baseline in runs and tables."""
DEFAULT_TOP_K = 50
"""Hits per ragloom search: the hybrid fusion depth, so the order is the strategy's own."""
MIN_FILES = 10
"""A ragloom run listing fewer distinct files is completed from a deeper search."""
DEEP_TOP_K = 300
"""Hits of the completing search: enough for 10 distinct files in every evaluated repository."""


@dataclass(frozen=True, slots=True)
class FileRun:
    """One question under one method: the ranked distinct files, and the error if it failed."""

    id: str
    method: str
    files: list[str]
    error: str | None = None


@dataclass(slots=True)
class GitEvalRun:
    """Every run of one repository (baseline first, then each strategy in the order asked)."""

    runs: list[FileRun] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """``bm25_build``, ``bm25_queries``, ``ragloom`` (wall seconds) and ``extended_runs``."""
    notes: list[str] = field(default_factory=list)
    """Notes of the ragloom runner (an unavailable strategy, incomplete embeddings)."""


def baseline_runs(chunks_index_dir: Path, dataset: Sequence[EvalQuery]) -> GitEvalRun:
    """The BM25 baseline over the chunks stored in ``chunks_index_dir`` (a ``.ragloom``)."""
    out = GitEvalRun()
    t0 = time.perf_counter()
    baseline = Bm25Baseline(load_chunks(chunks_index_dir))
    out.seconds["bm25_build"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out.runs = [FileRun(q.id, BASELINE, baseline.rank_files(q.query)) for q in dataset]
    out.seconds["bm25_queries"] = time.perf_counter() - t0
    return out


def ragloom_runs(
    index: SearchIndex,
    dataset: Sequence[EvalQuery],
    strategies: Sequence[str],
    top_k: int = DEFAULT_TOP_K,
) -> GitEvalRun:
    """Each strategy's file ranking per question, completed from a deeper search when short."""
    out = GitEvalRun()
    t0 = time.perf_counter()
    by_id = {q.id: q for q in dataset}
    report = run_eval(index, dataset, list(strategies), top_k=top_k, assembly_budgets=())
    extended = 0
    for r in report.results:
        if len(r.files) < MIN_FILES and r.error is None:
            deep: Any = index.search(by_id[r.id].query, top_k=DEEP_TOP_K, strategy=r.strategy)
            r.files.extend(dict.fromkeys(h.path for h in deep.hits if h.path not in r.files))
            extended += 1
    out.seconds["ragloom"] = time.perf_counter() - t0
    out.seconds["extended_runs"] = extended
    out.notes = list(report.notes)
    out.runs = [FileRun(r.id, r.strategy, list(r.files), r.error) for r in report.results]
    return out


def evaluate_files(
    index: SearchIndex,
    chunks_index_dir: Path,
    dataset: Sequence[EvalQuery],
    strategies: Sequence[str],
    top_k: int = DEFAULT_TOP_K,
) -> GitEvalRun:
    """The baseline over the index's chunks, then every strategy through ``index``."""
    base = baseline_runs(chunks_index_dir, dataset)
    rag = ragloom_runs(index, dataset, strategies, top_k)
    return GitEvalRun(
        runs=[*base.runs, *rag.runs],
        seconds={**base.seconds, **rag.seconds},
        notes=rag.notes,
    )


def method_means(
    runs: Iterable[FileRun], gold: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Method -> mean file-level metrics over its runs (``gold``: question id -> gold files)."""
    per: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        per.setdefault(run.method, []).append(file_metrics(run.files, gold[run.id]))
    return {method: mean_metrics(rows) for method, rows in per.items()}


# --- history as it stood before the questions ---------------------------------------------


def split_starts(questions_file: Path) -> dict[str, int]:
    """Split -> committer time (epoch seconds) of its oldest question, from a questions file
    of ``scripts/build_git_eval.py`` (its ``date`` and ``split`` fields)."""
    starts: dict[str, int] = {}
    for line in questions_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        when = int(datetime.fromisoformat(str(obj["date"]).replace("Z", "+00:00")).timestamp())
        split = str(obj.get("split", "test"))
        starts[split] = min(starts.get(split, when), when)
    return starts


def build_history(git_dir: Path, pinned: str, before: int, data_dir: Path) -> CommitHistory:
    """The ``commits`` source of ``pinned``'s history cut at ``before`` (commits strictly older;
    every question of a split is at least that new), written once to ``data_dir`` and reused
    while ``pinned`` and ``before`` are the same.

    This is what an index synced just before the first question of the split would hold: the
    evaluation never lets ranking see the commit a question was made from, or any later one.
    """
    from ragloom.eval.gitdata import read_commits
    from ragloom.sources.commits import numstat
    from ragloom.sources.itemstore import ItemStore

    stamp = f"{pinned}:{before}"
    if (data_dir / "commits.db").is_file():
        store = ItemStore(data_dir, "commits")
        built = store.get_meta("eval_history")
        store.close()
        if built == stamp:
            return CommitHistory(data_dir)
    commits = [c for c in read_commits(git_dir, pinned) if c.timestamp < before]
    return history_from_commits(commits, data_dir, numstat(git_dir, [pinned]), stamp)


def history_from_commits(
    commits: Sequence[Commit],
    data_dir: Path,
    stats: Mapping[str, Mapping[str, tuple[str, str]]] | None = None,
    stamp: str = "",
) -> CommitHistory:
    """A fresh ``commits`` store in ``data_dir`` (replaced if there) holding ``commits``
    (newest first, as ``git log`` lists them), opened as a history."""
    from ragloom.sources.commits import store_commits
    from ragloom.sources.itemstore import ItemStore

    if data_dir.exists():
        shutil.rmtree(data_dir)
    store = ItemStore(data_dir, "commits")
    try:
        store_commits(store, commits, stats)
        store.set_meta("last_commit", commits[0].sha if commits else "")
        store.set_meta("eval_history", stamp)
    finally:
        store.close()
    return CommitHistory(data_dir)


def load_commits(path: Path) -> list[Commit]:
    """Commits of a JSON-lines file (``sha``, ``timestamp``, ``message``, ``changes`` as
    ``[status, path]`` pairs, optional ``author`` and ``email``), in file order."""
    out: list[Commit] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            o = json.loads(line)
            out.append(
                Commit(
                    str(o["sha"]),
                    int(o["timestamp"]),
                    str(o.get("author", "")),
                    str(o.get("email", "")),
                    str(o["message"]),
                    tuple((str(st), str(p)) for st, p in o["changes"]),
                )
            )
    return out


class HistoryAsOf:
    """A :class:`~ragloom.retrieve.history.ChangeHistory` that shows only the commits strictly
    older than :attr:`before` (epoch seconds; None shows all): the history an index kept in
    sync holds when a question is asked. :class:`AsOfIndex` sets it per question."""

    def __init__(self, base: CommitHistory) -> None:
        self.base = base
        self.before: float | None = None

    def _until(self) -> float | None:
        return None if self.before is None else self.before - 1

    def similar(self, query: str, k: int) -> list[tuple[float, Sequence[str]]]:
        from ragloom.sources.base import SourceFilter

        flt = SourceFilter(until=self._until())
        return [(h.score, h.paths) for h in self.base.store.search(query, k, flt)]

    def changes(self) -> Iterable[Sequence[str]]:
        return self.base.store.path_lists(self._until())

    def recent(self, n: int) -> list[Sequence[str]]:
        return list(self.base.store.recent_path_lists(n, self._until()))

    def version(self) -> str:
        return f"{self.base.version()}@{self.before}"


class AsOfIndex:
    """An index whose searches see the history as it stood when each question was asked:
    ``times`` maps a question's text to its commit time (texts are unique per repository)."""

    def __init__(self, index: Any, history: HistoryAsOf, times: Mapping[str, float]) -> None:
        self.index = index
        self.history = history
        self.times = times

    def search(self, query: str, **kw: Any) -> Any:
        self.history.before = self.times.get(query)
        return self.index.search(query, **kw)

    def get_context(self, query: str, **kw: Any) -> Any:
        self.history.before = self.times.get(query)
        return self.index.get_context(query, **kw)


def question_times(questions_file: Path) -> dict[str, float]:
    """Question text -> commit time (epoch seconds) of a questions file."""
    out: dict[str, float] = {}
    for line in questions_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            when = datetime.fromisoformat(str(obj["date"]).replace("Z", "+00:00"))
            out[str(obj["query"])] = when.timestamp()
    return out
