"""Retrieval quality metrics: pure functions over one ranked hit list and its gold answer.

Every function looks at the hits in rank order (rank 1 first). "Top k" always means the first
``k`` *hits* (chunks), as a user of ``ragloom search -k K`` sees them, not the first ``k``
distinct files.

File level
    A hit is relevant when its path is one of the gold files. ``recall@k`` is the share of gold
    files that appear among the paths of the top ``k`` hits; ``MRR@k`` is ``1 / rank`` of the
    first relevant hit within the top ``k`` (0 when there is none); ``nDCG@k`` uses binary
    relevance where only the *first* hit of each gold file gains (so repeated chunks of one
    file cannot push nDCG above 1) and the ideal ranking puts ``min(|gold|, k)`` gold files
    first.

Symbol level
    A hit matches a gold symbol when the hit's path is a gold file (when the query names gold
    files) and the names agree under :func:`symbol_matches`: equal, or one is a dotted suffix
    of the other (``json.decoder.JSONDecoder.decode`` vs ``JSONDecoder.decode``, or
    ``decode`` vs ``JSONDecoder.decode``: chunkers and dataset authors qualify names to
    different depths), or the hit is nested inside the gold symbol (``Class.method.inner``
    for gold ``Class.method``: its text is part of the gold body). A hit on an *enclosing*
    scope (the class ``Class`` for gold ``Class.method``) does not match: that would credit
    every method of a large class. Recall and MRR are then computed over gold symbols exactly as
    at file level.

List shape
    ``diversity@k`` is the number of distinct files among the top ``k`` hits.
    ``duplication@k`` is the share of the top ``k`` hits that repeat an earlier hit: the same
    non-empty ``node_hash`` (identical text), or the same path with line ranges that overlap
    partly or are equal. A range strictly inside the other is not a duplicate: that is a scope
    and its member (a class, whose chunk holds only the class skeleton, and one of its
    methods), which carry different text.

Assembly
    ``assembly_coverage`` is the share of gold files present in an assembled context.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = [
    "HitLike",
    "assembly_coverage",
    "diversity_at_k",
    "duplication_ratio",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
    "symbol_matches",
    "symbol_mrr_at_k",
    "symbol_recall_at_k",
    "unique_files",
]


class HitLike(Protocol):
    """What the list-shape metrics read from a hit (``ragloom.types.Hit`` satisfies it)."""

    @property
    def path(self) -> str: ...

    @property
    def start_line(self) -> int: ...

    @property
    def end_line(self) -> int: ...

    @property
    def node_hash(self) -> str: ...


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def unique_files(paths: Iterable[str]) -> list[str]:
    """Paths in first-seen order without repeats (the ranked file list of a hit list)."""
    seen: set[str] = set()
    out: list[str] = []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def recall_at_k(ranked_paths: Sequence[str], gold_files: Iterable[str], k: int) -> float:
    """Share of gold files among the paths of the top ``k`` hits (0.0 when no gold files)."""
    _check_k(k)
    gold = set(gold_files)
    if not gold:
        return 0.0
    return len(gold.intersection(ranked_paths[:k])) / len(gold)


def mrr_at_k(ranked_paths: Sequence[str], gold_files: Iterable[str], k: int = 10) -> float:
    """Reciprocal rank of the first hit on a gold file within the top ``k`` (0.0 if none)."""
    _check_k(k)
    gold = set(gold_files)
    for rank, path in enumerate(ranked_paths[:k], 1):
        if path in gold:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked_paths: Sequence[str], gold_files: Iterable[str], k: int = 10) -> float:
    """Binary-relevance nDCG over the top ``k`` hits; each gold file gains once, at its best rank."""
    _check_k(k)
    gold = set(gold_files)
    if not gold:
        return 0.0
    credited: set[str] = set()
    dcg = 0.0
    for rank, path in enumerate(ranked_paths[:k], 1):
        if path in gold and path not in credited:
            credited.add(path)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def symbol_matches(hit_symbol: str, gold_symbol: str) -> bool:
    """Whether a hit's qualified name answers a gold symbol (see the module docstring)."""
    if not hit_symbol or not gold_symbol:
        return False
    if hit_symbol == gold_symbol:
        return True
    if hit_symbol.endswith("." + gold_symbol) or gold_symbol.endswith("." + hit_symbol):
        return True
    return hit_symbol.startswith(gold_symbol + ".")


def _first_symbol_ranks(
    ranked: Sequence[tuple[str, str]],
    gold_symbols: Sequence[str],
    gold_files: Iterable[str],
    k: int,
) -> dict[str, int]:
    """Gold symbol -> rank of the first top-``k`` hit that matches it."""
    files = set(gold_files)
    found: dict[str, int] = {}
    for rank, (path, symbol) in enumerate(ranked[:k], 1):
        if files and path not in files:
            continue
        for gold in gold_symbols:
            if gold not in found and symbol_matches(symbol, gold):
                found[gold] = rank
    return found


def symbol_recall_at_k(
    ranked: Sequence[tuple[str, str]],
    gold_symbols: Sequence[str],
    gold_files: Iterable[str],
    k: int,
) -> float:
    """Share of gold symbols matched by a top-``k`` hit; ``ranked`` holds (path, symbol)."""
    _check_k(k)
    golds = list(dict.fromkeys(gold_symbols))
    if not golds:
        return 0.0
    return len(_first_symbol_ranks(ranked, golds, gold_files, k)) / len(golds)


def symbol_mrr_at_k(
    ranked: Sequence[tuple[str, str]],
    gold_symbols: Sequence[str],
    gold_files: Iterable[str],
    k: int = 10,
) -> float:
    """Reciprocal rank of the first top-``k`` hit matching any gold symbol (0.0 if none)."""
    _check_k(k)
    found = _first_symbol_ranks(ranked, list(gold_symbols), gold_files, k)
    return 1.0 / min(found.values()) if found else 0.0


def diversity_at_k(ranked_paths: Sequence[str], k: int = 10) -> int:
    """Number of distinct files among the top ``k`` hits."""
    _check_k(k)
    return len(set(ranked_paths[:k]))


def _overlaps(a: HitLike, b: HitLike) -> bool:
    if a.node_hash and a.node_hash == b.node_hash:
        return True
    if a.path != b.path or a.start_line > b.end_line or b.start_line > a.end_line:
        return False
    a_in_b = b.start_line <= a.start_line and a.end_line <= b.end_line
    b_in_a = a.start_line <= b.start_line and b.end_line <= a.end_line
    # strict nesting is a scope and its member (a class chunk carries only its skeleton)
    return a_in_b == b_in_a


def duplication_ratio(hits: Sequence[HitLike], k: int = 10) -> float:
    """Share of the top ``k`` hits that overlap or duplicate an earlier hit (0.0 if no hits)."""
    _check_k(k)
    top = hits[:k]
    if not top:
        return 0.0
    dup = sum(1 for i, h in enumerate(top) if any(_overlaps(h, e) for e in top[:i]))
    return dup / len(top)


def assembly_coverage(context_files: Iterable[str], gold_files: Iterable[str]) -> float:
    """Share of gold files present among the files of an assembled context."""
    gold = set(gold_files)
    if not gold:
        return 0.0
    return len(gold.intersection(context_files)) / len(gold)
