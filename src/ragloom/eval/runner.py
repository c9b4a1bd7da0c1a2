"""Run an evaluation dataset against an index, every strategy side by side.

For each strategy and each query the runner calls ``index.search(query, top_k=top_k,
strategy=name)``, times it, and scores the hits with :mod:`ragloom.eval.metrics`. When context
assembly is available it also calls ``index.get_context(...)`` at each token budget and scores
the share of gold files the assembled context contains. One untimed warm-up search per strategy
runs first so that loading the embedding model is not counted as query latency.

A strategy the index does not know (``ConfigError`` on the warm-up, e.g. ``hybrid-mmr`` before
MMR lands) is reported as unavailable instead of failing the whole run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragloom.errors import ConfigError, RagError
from ragloom.eval import metrics as m
from ragloom.eval.dataset import EvalQuery
from ragloom.eval.stats import paired_by_id

__all__ = [
    "ASSEMBLY_BUDGETS",
    "ASSEMBLY_TOP_K",
    "DEFAULT_STRATEGIES",
    "MRR_K",
    "NDCG_K",
    "RECALL_KS",
    "SHAPE_K",
    "EvalReport",
    "QueryResult",
    "SearchIndex",
    "StrategySummary",
    "percentile",
    "run_eval",
    "write_runs",
]

DEFAULT_STRATEGIES: tuple[str, ...] = ("sparse", "dense", "hybrid", "hybrid-mmr")
"""Strategies compared by default (issue 3: sparse only, dense only, hybrid RRF, RRF + MMR)."""
RECALL_KS: tuple[int, ...] = (1, 5, 10, 20)
"""Cut-offs of recall@k (issue 3 and ploke-rag-plan.md section 6)."""
MRR_K = 10
"""Cut-off of MRR (issue 3: MRR@10)."""
NDCG_K = 10
"""Cut-off of nDCG (issue 3: nDCG@10)."""
SHAPE_K = 10
"""Cut-off of diversity and duplication: the top 10 hits, the same window as MRR and nDCG."""
ASSEMBLY_BUDGETS: tuple[int, ...] = (2000, 4000, 8000)
"""Token budgets of assembly coverage (issue 3: 2k / 4k / 8k tokens)."""
ASSEMBLY_TOP_K = 15
"""Hits fed to assembly (ploke-rag-plan.md section 6: "15 parts and 4 files")."""

ProgressFn = Callable[[str, int, int], None]
"""``progress(stage, done, total)``, the same shape the indexer's progress callback has."""


class SearchIndex(Protocol):
    """What the runner needs from an index (``ragloom.api.Index`` satisfies it)."""

    def search(self, query: str, *, top_k: int = ..., strategy: str = ...) -> Any: ...

    def get_context(
        self, query: str, *, top_k: int = ..., budget: Any = ..., strategy: str = ...
    ) -> Any: ...


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 100]) of a non-empty sample."""
    if not values:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(values)
    # the epsilon keeps float noise (0.95 * 20 = 19.000000000000004) from moving up a rank
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered) - 1e-9)))
    return ordered[rank - 1]


@dataclass(slots=True)
class QueryResult:
    """One query under one strategy: ranked files and hits, latency, metric values."""

    id: str
    strategy: str
    files: list[str]
    hits: list[dict[str, object]]
    latency_ms: float
    metrics: dict[str, float | None]
    error: str | None = None

    def to_run_line(self) -> dict[str, object]:
        """The ``--runs-out`` record: id, strategy, ranked unique files, hits, latency."""
        out: dict[str, object] = {
            "id": self.id,
            "strategy": self.strategy,
            "files": self.files,
            "hits": self.hits,
            "latency_ms": round(self.latency_ms, 3),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(slots=True)
class StrategySummary:
    """Mean metrics and latency distribution of one strategy over the dataset."""

    strategy: str
    available: bool
    queries: int = 0
    errors: int = 0
    metrics: dict[str, float | None] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        """Stable JSON form (without the raw latency sample)."""
        return {
            "strategy": self.strategy,
            "available": self.available,
            "queries": self.queries,
            "errors": self.errors,
            "metrics": self.metrics,
            "latency_ms": self.latency_ms,
            "note": self.note,
        }


@dataclass(slots=True)
class EvalReport:
    """Everything one ``run_eval`` measured."""

    dataset_size: int
    top_k: int
    strategies: list[str]
    summaries: dict[str, StrategySummary]
    results: list[QueryResult]
    assembly_budgets: tuple[int, ...]
    assembly_available: bool | None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    paired: dict[str, Any] = field(default_factory=dict)
    """Every strategy against a reference, question by question (:func:`paired_differences`)."""

    def metric_names(self) -> list[str]:
        """Metric keys in display order (only those some strategy measured)."""
        present: set[str] = set()
        for s in self.summaries.values():
            present.update(k for k, v in s.metrics.items() if v is not None)
        return [k for k in metric_order(self.top_k, self.assembly_budgets) if k in present]

    def to_dict(self) -> dict[str, object]:
        """Stable JSON form: summary per strategy, settings and notes (no per-query data)."""
        return {
            "dataset_size": self.dataset_size,
            "top_k": self.top_k,
            "strategies": self.strategies,
            "assembly_budgets": list(self.assembly_budgets),
            "assembly_available": self.assembly_available,
            "summaries": {k: v.to_dict() for k, v in self.summaries.items()},
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
            "paired": self.paired,
        }


def metric_order(top_k: int, budgets: Sequence[int]) -> list[str]:
    """All metric keys, in display order, for a run with ``top_k`` and assembly ``budgets``."""
    ks = [k for k in RECALL_KS if k <= top_k]
    names = [f"recall@{k}" for k in ks] + [f"mrr@{MRR_K}", f"ndcg@{NDCG_K}"]
    names += [f"sym_recall@{k}" for k in ks] + [f"sym_mrr@{MRR_K}"]
    names += [f"diversity@{SHAPE_K}", f"duplication@{SHAPE_K}"]
    names += [f"coverage@{b}" for b in budgets]
    return names


def _hit_record(hit: Any) -> dict[str, object]:
    return {
        "id": hit.id,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "symbol": hit.symbol,
        "score": hit.score,
        "ranks": dict(hit.ranks),
    }


def score_hits(q: EvalQuery, hits: Sequence[Any], top_k: int) -> dict[str, float | None]:
    """File-level, symbol-level and list-shape metrics of one ranked hit list."""
    paths = [h.path for h in hits]
    out: dict[str, float | None] = {}
    ks = [k for k in RECALL_KS if k <= top_k]
    for k in ks:
        out[f"recall@{k}"] = m.recall_at_k(paths, q.gold_files, k)
    out[f"mrr@{MRR_K}"] = m.mrr_at_k(paths, q.gold_files, MRR_K)
    out[f"ndcg@{NDCG_K}"] = m.ndcg_at_k(paths, q.gold_files, NDCG_K)
    pairs = [(h.path, h.symbol) for h in hits]
    for k in ks:
        out[f"sym_recall@{k}"] = (
            m.symbol_recall_at_k(pairs, q.gold_symbols, q.gold_files, k) if q.gold_symbols else None
        )
    out[f"sym_mrr@{MRR_K}"] = (
        m.symbol_mrr_at_k(pairs, q.gold_symbols, q.gold_files, MRR_K) if q.gold_symbols else None
    )
    out[f"diversity@{SHAPE_K}"] = float(m.diversity_at_k(paths, SHAPE_K))
    out[f"duplication@{SHAPE_K}"] = m.duplication_ratio(hits, SHAPE_K)
    return out


def _context_files(ctx: Any) -> list[str]:
    return [str(part.file_path) for part in ctx.parts]


def _summarize(summary: StrategySummary, rows: Sequence[QueryResult]) -> None:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r.metrics if k not in keys)
    for key in keys:
        vals = [v for r in rows if (v := r.metrics.get(key)) is not None]
        summary.metrics[key] = statistics.fmean(vals) if vals else None
    lat = [r.latency_ms for r in rows if r.error is None]
    summary.latencies = lat
    if lat:
        summary.latency_ms = {
            "p50": percentile(lat, 50),
            "p95": percentile(lat, 95),
            "mean": statistics.fmean(lat),
            "max": max(lat),
        }


PAIRED_REFERENCE = "hybrid+handset"
"""The strategy the others are compared with, question by question, when it was run (the
first available strategy otherwise)."""
PAIRED_METRICS = ("mrr@10", "recall@10", "sym_mrr@10", "sym_recall@10")


def paired_differences(
    results: Sequence[QueryResult], strategies: Sequence[str], available: Sequence[str]
) -> dict[str, Any]:
    """``{"reference": name, "metrics": {strategy: {metric: difference}}}``: each available
    strategy's per-query difference from the reference's on :data:`PAIRED_METRICS`, over the
    queries both measured (a failed search counts as the summary counts it), with a 95 % paired bootstrap interval
    (:func:`ragloom.eval.stats.paired_bootstrap`). Empty with fewer than two strategies."""
    usable = [s for s in strategies if s in available]
    if len(usable) < 2:
        return {}
    ref = PAIRED_REFERENCE if PAIRED_REFERENCE in usable else usable[0]
    by: dict[str, dict[str, dict[str, float | None]]] = {}
    for r in results:  # a failed search scores zeros, as in the summary's means
        by.setdefault(r.strategy, {})[r.id] = r.metrics
    base = by.get(ref, {})
    out: dict[str, dict[str, dict[str, float | int]]] = {}
    for name in usable:
        if name == ref:
            continue
        mine = by.get(name, {})
        per: dict[str, dict[str, float | int]] = {}
        for key in PAIRED_METRICS:
            d = paired_by_id(
                {q: got.get(key) for q, got in mine.items()},
                {q: got.get(key) for q, got in base.items()},
            )
            if d is not None:
                per[key] = d.as_dict()
        out[name] = per
    return {"reference": ref, "metrics": out}


def run_eval(
    index: SearchIndex,
    dataset: Sequence[EvalQuery],
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    top_k: int = 20,
    progress: ProgressFn | None = None,
    assembly_budgets: Sequence[int] = ASSEMBLY_BUDGETS,
) -> EvalReport:
    """Evaluate every strategy on every query; see the module docstring."""
    if top_k < 1:
        raise ConfigError(f"top_k must be >= 1, got {top_k}")
    if not strategies:
        raise ConfigError("no strategy to evaluate")
    if any(b < 1 for b in assembly_budgets):
        raise ConfigError(f"assembly budgets must be >= 1, got {list(assembly_budgets)}")
    started = time.perf_counter()
    names = list(dict.fromkeys(strategies))
    budgets = tuple(assembly_budgets)
    report = EvalReport(
        dataset_size=len(dataset),
        top_k=top_k,
        strategies=names,
        summaries={},
        results=[],
        assembly_budgets=budgets,
        assembly_available=None if not budgets else True,
    )
    report.notes.extend(_dataset_notes(index, dataset, top_k))
    tick = progress or (lambda *_: None)
    warmup = dataset[0].query if dataset else "warm up"
    for name in names:
        summary = StrategySummary(strategy=name, available=True)
        report.summaries[name] = summary
        try:
            index.search(warmup, top_k=top_k, strategy=name)
        except ConfigError as exc:
            summary.available = False
            summary.note = str(exc)
            report.notes.append(f"strategy {name} unavailable: {exc}")
            tick(name, 1, 1)
            continue
        rows: list[QueryResult] = []
        tick(name, 0, len(dataset))
        for i, q in enumerate(dataset, 1):
            rows.append(_run_query(index, q, name, top_k, budgets, report))
            tick(name, i, len(dataset))
        summary.queries = len(rows)
        summary.errors = sum(1 for r in rows if r.error is not None)
        _summarize(summary, rows)
        report.results.extend(rows)
    report.paired = paired_differences(
        report.results, names, [n for n, s in report.summaries.items() if s.available]
    )
    report.seconds = time.perf_counter() - started
    return report


def _run_query(
    index: SearchIndex,
    q: EvalQuery,
    strategy: str,
    top_k: int,
    budgets: tuple[int, ...],
    report: EvalReport,
) -> QueryResult:
    t0 = time.perf_counter()
    try:
        result = index.search(q.query, top_k=top_k, strategy=strategy)
    except RagError as exc:
        latency = (time.perf_counter() - t0) * 1000
        return QueryResult(q.id, strategy, [], [], latency, score_hits(q, [], top_k), str(exc))
    latency = (time.perf_counter() - t0) * 1000
    from ragloom.retrieve.search import NOTHING_MATCHED_NOTE

    for note in getattr(result, "notes", None) or ():
        if note == NOTHING_MATCHED_NOTE:  # about this question, not the index or strategy
            continue
        # e.g. "embeddings incomplete": once per strategy and text, not once per query
        line = f"{strategy}: {note}"
        if line not in report.notes:
            report.notes.append(line)
    hits = list(result.hits)
    row = QueryResult(
        id=q.id,
        strategy=strategy,
        files=m.unique_files(h.path for h in hits),
        hits=[_hit_record(h) for h in hits],
        latency_ms=latency,
        metrics=score_hits(q, hits, top_k),
    )
    for budget in budgets:
        row.metrics[f"coverage@{budget}"] = _coverage(index, q, strategy, budget, report)
    return row


def _coverage(
    index: SearchIndex, q: EvalQuery, strategy: str, budget: int, report: EvalReport
) -> float | None:
    """Assembly coverage at one budget; None (and a note, once) when assembly is missing."""
    if report.assembly_available is False:
        return None
    try:
        ctx = index.get_context(q.query, top_k=ASSEMBLY_TOP_K, budget=budget, strategy=strategy)
        files = _context_files(ctx)
    except (ImportError, AttributeError, NotImplementedError) as exc:
        report.assembly_available = False
        report.notes.append(f"assembly coverage not measured: context assembly unavailable ({exc})")
        return None
    except RagError:
        return None
    return m.assembly_coverage(files, q.gold_files)


def _dataset_notes(index: Any, dataset: Sequence[EvalQuery], top_k: int) -> list[str]:
    """What a reader of the figures should know about the dataset against this index: gold
    files the index does not hold (a path written ``./pkg/a.py``, absolute, with ``\\``, or of a
    file since removed: each counts as a miss for every strategy), and @10 metrics measured on
    fewer than 10 hits."""
    notes: list[str] = []
    try:
        held = set(index.retriever.store.files())
    except Exception:  # a backend that cannot list its files: no check, no note
        held = None
    if held is not None:
        missing = [(q.id, g) for q in dataset for g in q.gold_files if g not in held]
        if missing:
            asked = {qid for qid, _ in missing}
            shown = ", ".join(f"{qid}: {g!r}" for qid, g in missing[:3])
            files = f"{len(missing)} gold file" + ("s" if len(missing) > 1 else "")
            of = f"{len(asked)} question" + ("s" if len(asked) > 1 else "")
            notes.append(
                f"{files} of {of} not in the index, so counted as misses ({shown}"
                f"{', ...' if len(missing) > 3 else ''}); gold paths are relative to the indexed "
                "root, with / separators"
            )
    if top_k < MRR_K:
        notes.append(f"--top-k {top_k}: the @{MRR_K} metrics see only {top_k} hits per question")
    return notes


def write_runs(report: EvalReport, path: str | os.PathLike[str]) -> int:
    """Write one JSON line per (query, strategy): the ranked run file; returns lines written."""
    p = Path(path)
    with p.open("w", encoding="utf-8") as fh:
        for row in report.results:
            fh.write(json.dumps(row.to_run_line(), ensure_ascii=False) + "\n")
    return len(report.results)
