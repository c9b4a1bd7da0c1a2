"""Golden sample of the git-history evaluation (docs/evaluation-git.md) in the default test run.

The full evaluation needs seven outside repositories fetched into a local mirror, which a clean
clone does not have. This test keeps one of them in the repository: go-chi/chi at its pinned
commit (tests/data/git-sample/chi/, MIT, provenance in its README.md), with the 100 held-back
(test split) questions. It copies the tree, indexes it with the default embedding model that
ships in the package, and scores files the way ``scripts/eval_git.py`` does, through the same
code (:mod:`ragloom.eval.gitrun`): ragloom's ``hybrid`` (default), ``hybrid+seed``, ``dense``,
``sparse`` and the plain BM25 baseline.

It guards two things: each method's file-level R@1/R@5/R@10/MRR@10 stays above its measured
value minus :data:`MARGIN`, and the relations issue 11 cares about hold: the default is not
behind the seed's fusion defaults nor behind either single modality, and its lead over plain
BM25 stays. Raise the figures when ranking improves (docs/evaluation-git.md says how).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ragloom.api import Index
from ragloom.eval.dataset import EvalQuery, load_dataset
from ragloom.eval.gitrun import (
    BASELINE,
    MIN_FILES,
    AsOfIndex,
    FileRun,
    GitEvalRun,
    HistoryAsOf,
    evaluate_files,
    history_from_commits,
    load_commits,
    method_means,
    question_times,
    ragloom_runs,
)
from ragloom.index.indexer import IndexStats

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
"""A real corpus and a real index. The first test carries the module fixture (indexing 558
chunks with the model: ~50 s of CPU, 2 minutes of wall time on the shared 2-core machine at load
6-8), hence more than the suite's 300 s timeout as headroom on a loaded machine."""

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "git-sample" / "chi"
COMMIT_TIME = 1787227434
"""Committer time of the pinned commit (735ae2b8, 2026-08-20T12:03:54Z): every file's mtime,
as ``scripts/build_git_eval.py`` writes the corpus (a checkout's mtimes are arbitrary)."""
STRATEGIES = ("sparse", "dense", "hybrid", "hybrid+seed")
HISTORY = "hybrid+history"
"""The default ``hybrid`` with chi's commit history as it stood when each question was asked
(``history.jsonl``, strictly older commits only: ``ragloom.eval.gitrun.HistoryAsOf``); the
other methods run without history, as an index of a folder that is not a git work tree does."""
MARGIN = 0.03
"""Slack below each measured value (one question of 100 moving from rank 1 to 2 is 0.005 of
MRR@10): absorbs float differences of the quantized model between CPUs, not a ranking change."""
SLACK = 0.02
"""Slack of the relations between methods (hybrid vs hybrid+seed, hybrid vs sparse and dense)."""
RATIO_SLACK = 0.05
"""Slack of hybrid's MRR@10 lead over BM25 (a ratio)."""

# Measured on 2026-11-23 at ragloom commit 9587bd3 (Python 3.11, default embedder
# all-MiniLM-L6-v2 ONNX int8), 100 test-split questions, 96 files, 573 chunks; the same figures
# as `scripts/eval_git.py --repo chi --split test` on the mirror-built corpus (dense MRR@10 there
# 0.648: its index was built earlier). ~50 s of CPU, most of it embedding the chunks; wall time
# depends on the load (docs/evaluation-git.md "Golden sample in the default test run").
MEASURED: dict[str, dict[str, float]] = {
    BASELINE: {"R@1": 0.452, "R@5": 0.693, "R@10": 0.828, "MRR@10": 0.593},
    "sparse": {"R@1": 0.516, "R@5": 0.744, "R@10": 0.842, "MRR@10": 0.641},
    "dense": {"R@1": 0.517, "R@5": 0.706, "R@10": 0.803, "MRR@10": 0.649},
    "hybrid": {"R@1": 0.591, "R@5": 0.839, "R@10": 0.929, "MRR@10": 0.739},
    "hybrid+seed": {"R@1": 0.557, "R@5": 0.757, "R@10": 0.865, "MRR@10": 0.697},
    # measured after 220f8c6 (history step, weights picked per question: change requests get
    # CHANGE_WEIGHTS); the full evaluation's chi test split gives 0.756 / 0.935 (MRR@10 / R@10)
    # with the same history (0.763 / 0.950 with the lookup weights for every question)
    HISTORY: {"R@1": 0.566, "R@5": 0.862, "R@10": 0.938, "MRR@10": 0.751},
}
MEASURED_RATIO = MEASURED["hybrid"]["MRR@10"] / MEASURED[BASELINE]["MRR@10"]
"""hybrid MRR@10 / BM25 MRR@10 as measured (1.25x)."""


def _copy_tree(dest: Path) -> Path:
    root = dest / "chi"
    shutil.copytree(SAMPLE / "tree", root)
    for dirpath, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(dirpath, name), (COMMIT_TIME, COMMIT_TIME))
    return root


@pytest.fixture(scope="module")
def questions() -> list[EvalQuery]:
    return load_dataset(SAMPLE / "test.jsonl")


@pytest.fixture(scope="module")
def sample(
    tmp_path_factory: pytest.TempPathFactory, questions: list[EvalQuery]
) -> tuple[IndexStats, GitEvalRun]:
    root = _copy_tree(tmp_path_factory.mktemp("git-sample"))
    idx = Index.at(root, embedder="default")
    try:
        stats = idx.index()
        run = evaluate_files(idx, idx.index_dir, questions, STRATEGIES)
        history = HistoryAsOf(
            history_from_commits(
                load_commits(SAMPLE / "history.jsonl"), tmp_path_factory.mktemp("history")
            )
        )
        idx.retriever.history = history
        searched = AsOfIndex(idx, history, question_times(SAMPLE / "test.jsonl"))
        with_history = ragloom_runs(searched, questions, ["hybrid"])
        run.runs.extend(FileRun(r.id, HISTORY, r.files, r.error) for r in with_history.runs)
        history.base.close()
    finally:
        idx.close()
    return stats, run


@pytest.fixture(scope="module")
def means(
    sample: tuple[IndexStats, GitEvalRun], questions: list[EvalQuery]
) -> dict[str, dict[str, float]]:
    return method_means(sample[1].runs, {q.id: q.gold_files for q in questions})


def test_sample_is_the_pinned_tree(questions: list[EvalQuery]) -> None:
    assert len(questions) == 100
    assert len({q.id for q in questions}) == 100
    for q in questions:
        for f in q.gold_files:
            assert (SAMPLE / "tree" / f).is_file(), f"{q.id}: gold file {f} not in the sample"


def test_sample_indexed_completely(sample: tuple[IndexStats, GitEvalRun]) -> None:
    stats, run = sample
    assert stats.files_scanned == 96
    assert 540 <= stats.chunks_total <= 610, stats.chunks_total
    assert stats.embeddings_pending == 0
    assert not run.notes, run.notes  # an unavailable strategy or missing embeddings
    methods = [BASELINE, *STRATEGIES, HISTORY]
    for method in methods:
        done = [r for r in run.runs if r.method == method]
        assert len(done) == 100, method
        assert not [r.id for r in done if r.error is not None], method
    # 50 hits of a large file's chunks can hold fewer than 10 files: the deeper search completes
    # them (31 runs when measured), so a fused or dense ranking always lists 10 files here (a
    # sparse one may not: fewer than 10 files may match a query's words)
    assert run.seconds["extended_runs"] > 0
    short = [
        (r.method, r.id)
        for r in run.runs
        if r.method not in (BASELINE, "sparse") and len(r.files) < MIN_FILES
    ]
    assert not short, short


def test_file_level_thresholds(means: dict[str, dict[str, float]]) -> None:
    failures = [
        f"{method} {metric} {means[method][metric]:.3f} < {value:.3f} - {MARGIN}"
        for method, figures in MEASURED.items()
        for metric, value in figures.items()
        if means[method][metric] < value - MARGIN
    ]
    assert not failures, "; ".join(failures)


def test_default_beats_seed_defaults_and_single_modalities(
    means: dict[str, dict[str, float]],
) -> None:
    mrr = {method: figures["MRR@10"] for method, figures in means.items()}
    hybrid = mrr["hybrid"]
    assert hybrid >= mrr["hybrid+seed"] - SLACK, f"hybrid behind hybrid+seed (MRR@10): {mrr}"
    best_single = max(mrr["sparse"], mrr["dense"])
    assert hybrid >= best_single - SLACK, f"hybrid behind a single modality (MRR@10): {mrr}"


ONE_QUESTION = 0.01
"""Recall@10 of one question of the 100. With the seventh session's model (which re-orders
every question and reads the history's evidence) the history costs chi's sample 0.007 of
recall@10 while it adds 0.026 of MRR@10; the held-back chi questions show the same (0.932
against 0.942, docs/evaluation-git.md), while over the seven held-back repositories the history
adds 0.048 of recall@10."""


def test_history_keeps_recall_within_a_question_and_mrr(means: dict[str, dict[str, float]]) -> None:
    with_h, without = means[HISTORY], means["hybrid"]
    assert with_h["R@10"] >= without["R@10"] - ONE_QUESTION, f"history: {with_h} without: {without}"
    assert with_h["MRR@10"] >= without["MRR@10"] - SLACK, f"history: {with_h} without: {without}"


def test_history_sample_is_older_than_the_pinned_commit() -> None:
    commits = load_commits(SAMPLE / "history.jsonl")
    assert len(commits) == 753
    assert all(c.timestamp <= COMMIT_TIME for c in commits)
    assert [c.timestamp for c in commits] == sorted((c.timestamp for c in commits), reverse=True)


def test_default_lead_over_bm25(means: dict[str, dict[str, float]]) -> None:
    ratio = means["hybrid"]["MRR@10"] / means[BASELINE]["MRR@10"]
    assert ratio >= MEASURED_RATIO - RATIO_SLACK, f"hybrid / bm25 MRR@10 {ratio:.3f}"
