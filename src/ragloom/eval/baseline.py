"""A plain BM25 baseline over ragloom's own chunks, and file-level scoring of ranked lists.

The baseline is what "just BM25" means in docs/evaluation-git.md: the ``bm25s`` library with its
defaults (Lucene BM25, k1 = 1.5, b = 0.75), one document per chunk ragloom stored (the ``text``
column of ``index.sqlite``), and the simplest tokenization (lower case, split on every
non-alphanumeric character: ``parse_header`` -> ``parse``, ``header``; no stemming, no stop
words, no identifier splitting of ``camelCase``). Every chunk with a positive score is ranked; a
file's rank is that of its best chunk.

File-level metrics (:func:`file_metrics`) look at the ranked list of distinct files (first-seen
order of the hits), not at the first k chunks: ``R@k`` is the share of gold files among the
first k files, ``MRR@10`` is 1 / rank of the first gold file among the first 10 files.
"""

from __future__ import annotations

import importlib
import re
import sqlite3
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FILE_KS",
    "FILE_MRR_K",
    "Bm25Baseline",
    "ChunkDoc",
    "file_metrics",
    "load_chunks",
    "mean_metrics",
    "simple_tokenize",
]

FILE_KS: tuple[int, ...] = (1, 5, 10)
"""Cut-offs of file-level recall."""
FILE_MRR_K = 10
"""Cut-off of file-level MRR."""

_TOKEN_SPLIT = re.compile(r"[^0-9a-z]+")


def simple_tokenize(text: str) -> list[str]:
    """Lower case, split on non-alphanumerics (ASCII letters and digits), drop empty tokens."""
    return [t for t in _TOKEN_SPLIT.split(text.lower()) if t]


@dataclass(frozen=True, slots=True)
class ChunkDoc:
    """One stored chunk: its file, symbol and text."""

    path: str
    symbol: str
    text: str


def load_chunks(index_dir: Path) -> list[ChunkDoc]:
    """Every chunk of a ragloom index (``index_dir/index.sqlite``), in rowid order."""
    db = Path(index_dir) / "index.sqlite"
    if not db.exists():
        raise FileNotFoundError(f"no ragloom index database at {db}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT path, symbol, text FROM chunks ORDER BY rowid").fetchall()
    finally:
        con.close()
    return [ChunkDoc(str(p), str(s), str(t)) for p, s, t in rows]


class Bm25Baseline:
    """Chunk-level ``bm25s`` BM25 with :func:`simple_tokenize`; files ranked by best chunk."""

    def __init__(self, chunks: Sequence[ChunkDoc]) -> None:
        if not chunks:
            raise ValueError("the baseline needs at least one chunk")
        bm25s = importlib.import_module("bm25s")
        self.chunks = list(chunks)
        self._retriever: Any = bm25s.BM25()
        self._retriever.index([simple_tokenize(c.text) for c in self.chunks], show_progress=False)
        self._vocab: Mapping[str, int] = self._retriever.vocab_dict

    def chunk_scores(self, query: str) -> list[tuple[int, float]]:
        """(chunk index, score) of every chunk with a positive score, best first (ties: index)."""
        tokens = [t for t in simple_tokenize(query) if t in self._vocab]
        if not tokens:
            return []
        scores = self._retriever.get_scores(tokens)
        hits = [(i, float(s)) for i, s in enumerate(scores.tolist()) if s > 0]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits

    def rank_files(self, query: str) -> list[str]:
        """Every file with a matching chunk, ordered by its best chunk's score."""
        seen: dict[str, None] = {}
        for i, _ in self.chunk_scores(query):
            seen.setdefault(self.chunks[i].path, None)
        return list(seen)


def file_metrics(
    ranked_files: Sequence[str],
    gold_files: Iterable[str],
    ks: Sequence[int] = FILE_KS,
    mrr_k: int = FILE_MRR_K,
) -> dict[str, float]:
    """``R@k`` for each k and ``MRR@mrr_k`` over a ranked list of distinct files."""
    gold = set(gold_files)
    out: dict[str, float] = {}
    for k in ks:
        out[f"R@{k}"] = len(gold.intersection(ranked_files[:k])) / len(gold) if gold else 0.0
    rr = 0.0
    for rank, path in enumerate(ranked_files[:mrr_k], 1):
        if path in gold:
            rr = 1.0 / rank
            break
    out[f"MRR@{mrr_k}"] = rr
    return out


def mean_metrics(rows: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over rows (an empty input gives an empty dict)."""
    rows = list(rows)
    if not rows:
        return {}
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]}
