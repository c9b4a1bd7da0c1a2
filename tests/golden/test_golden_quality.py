"""Golden retrieval quality: fixed thresholds per strategy on a small real corpus.

The corpus is a docstring-free copy of a few stdlib modules (built by
``ragloom.eval.datasets.build_datasets``), indexed with the default embedding model that ships
in the package. A ranking change that lowers recall@10 or MRR@10 (file and symbol level) below
the recorded thresholds fails the default test run. Thresholds sit a little below the measured
values (recorded below with the date) to absorb stdlib differences between Python versions;
raise them when quality improves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragloom.api import Index
from ragloom.eval.datasets import build_datasets
from ragloom.eval.runner import EvalReport, run_eval

GOLDEN_PACKAGES = ("base64", "calendar", "fnmatch", "heapq", "json", "queue", "shlex", "textwrap")
"""Small modules with well-documented functions: about 100 queries, a few hundred chunks."""
STRATEGIES = ("sparse", "dense", "hybrid", "hybrid-mmr")
"""Every strategy the issue compares (issue 3): each one is guarded."""
MARGIN = 0.03
"""Slack below each measured value: stdlib sources differ a little between Python versions."""

# Measured with Python 3.11.7 and the default embedder (all-MiniLM-L6-v2 ONNX) on 2026-11-23,
# after field-aware BM25 (docs/index-choices.md "Field-aware BM25") and the role and declaration
# priors (docs/ranking.md). Against 2026-11-22: hybrid symbol MRR@10 0.546 -> 0.550 (docstring)
# and 0.723 -> 0.802 (identifier); sparse on docstring questions gave up symbol MRR@10
# 0.382 -> 0.348 (the fields favour a symbol's name and signature, these questions describe the
# body) while sparse on identifier questions rose 0.709 -> 0.723.
# 230 chunks, 107 docstring and 104 identifier queries, ~12 s for build + index + both evals.
# File-level figures are near 1.0 because most gold files are single-module packages; the
# symbol-level ones carry most of the signal. Each threshold is the measured value - MARGIN.
MEASURED: dict[str, dict[str, dict[str, float]]] = {
    "docstring": {
        "sparse": {
            "recall@10": 0.981,
            "mrr@10": 0.864,
            "sym_recall@10": 0.664,
            "sym_mrr@10": 0.348,
        },
        "dense": {"recall@10": 0.991, "mrr@10": 0.943, "sym_recall@10": 0.888, "sym_mrr@10": 0.534},
        "hybrid": {"recall@10": 0.981, "mrr@10": 0.949, "sym_recall@10": 0.879, "sym_mrr@10": 0.55},
        "hybrid-mmr": {
            "recall@10": 0.991,
            "mrr@10": 0.951,
            "sym_recall@10": 0.832,
            "sym_mrr@10": 0.525,
        },
    },
    "identifier": {
        "sparse": {"recall@10": 1.0, "mrr@10": 0.995, "sym_recall@10": 0.933, "sym_mrr@10": 0.723},
        "dense": {"recall@10": 1.0, "mrr@10": 1.0, "sym_recall@10": 0.942, "sym_mrr@10": 0.652},
        "hybrid": {"recall@10": 1.0, "mrr@10": 1.0, "sym_recall@10": 0.971, "sym_mrr@10": 0.802},
        "hybrid-mmr": {
            "recall@10": 1.0,
            "mrr@10": 1.0,
            "sym_recall@10": 0.952,
            "sym_mrr@10": 0.8,
        },
    },
}


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalReport, EvalReport]:
    out: Path = tmp_path_factory.mktemp("golden")
    built = build_datasets(out, GOLDEN_PACKAGES, max_queries=None)
    idx = Index.at(built.corpus_dir, embedder="default")
    try:
        idx.index()
        doc = run_eval(idx, built.docstring, STRATEGIES, top_k=10, assembly_budgets=())
        ident = run_eval(idx, built.identifier, STRATEGIES, top_k=10, assembly_budgets=())
    finally:
        idx.close()
    return doc, ident


def _check(report: EvalReport, measured: dict[str, dict[str, float]]) -> None:
    failures: list[str] = []
    for name, figures in measured.items():
        summary = report.summaries[name]
        assert summary.available, f"{name} unavailable: {summary.note}"
        assert summary.errors == 0, f"{name}: {summary.errors} failed searches"
        for metric, value in figures.items():
            got = summary.metrics.get(metric)
            if got is None or got < value - MARGIN:
                failures.append(f"{name} {metric} {got} < {value:.3f} - {MARGIN}")
    assert not failures, "; ".join(failures)


def test_golden_corpus_size(golden: tuple[EvalReport, EvalReport]) -> None:
    doc, ident = golden
    assert 90 <= doc.dataset_size <= 130
    assert 80 <= ident.dataset_size <= 130


def test_docstring_quality_thresholds(golden: tuple[EvalReport, EvalReport]) -> None:
    _check(golden[0], MEASURED["docstring"])


def test_identifier_quality_thresholds(golden: tuple[EvalReport, EvalReport]) -> None:
    _check(golden[1], MEASURED["identifier"])
