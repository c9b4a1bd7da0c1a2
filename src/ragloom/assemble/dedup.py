"""Deduplication of fetched snippets (ploke section 2; tamma ``deduplicateChunks``).

Three rules, applied in rank order so the best-ranked copy is the one kept:

1. exact: same chunk id, same node tracking hash (identical text), or same path and lines;
2. near-duplicate: cosine similarity of the two chunks' embeddings >= the policy threshold
   (tamma ``deduplication_threshold``, 0.85 by default); hits without an embedding are never
   near-duplicates (ploke crucial notes section 11: a missing embedding has similarity 0);
3. overlap: ranges of one file that overlap are merged by stitching (:mod:`.stitch`), and a hit
   whose lines lie inside another kept hit counts as a duplicate there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragloom.assemble.snippets import Snippet

__all__ = ["DedupReport", "dedup_exact", "dedup_near"]


@dataclass(slots=True)
class DedupReport:
    """How many snippets each rule removed."""

    exact: int = 0
    near: int = 0
    overlap: int = 0

    @property
    def total(self) -> int:
        """All duplicates found."""
        return self.exact + self.near + self.overlap


def dedup_exact(snippets: Sequence[Snippet], report: DedupReport) -> list[Snippet]:
    """Drop snippets whose id, node hash, or (path, lines) was already seen (first kept)."""
    seen: set[tuple[str, ...]] = set()
    out: list[Snippet] = []
    for sn in snippets:
        keys = [
            ("id", sn.hit.id),
            ("node", sn.node_hash),
            ("span", sn.hit.path, str(sn.start_line), str(sn.end_line)),
        ]
        if any(k in seen for k in keys if k[1]):
            report.exact += 1
            continue
        seen.update(k for k in keys if k[1])
        out.append(sn)
    return out


def dedup_near(
    snippets: Sequence[Snippet],
    embeddings: Mapping[str, np.ndarray] | None,
    threshold: float,
    report: DedupReport,
) -> list[Snippet]:
    """Drop a snippet whose embedding has cosine >= ``threshold`` with an already kept one."""
    if not embeddings:
        return list(snippets)
    kept: np.ndarray | None = None  # the kept unit vectors, one row each (first n_kept rows)
    n_kept = 0
    dim: int | None = None
    out: list[Snippet] = []
    for sn in snippets:
        vec = embeddings.get(sn.hit.id)
        if vec is None:
            out.append(sn)
            continue
        v = np.asarray(vec, dtype=np.float64).ravel()
        norm = float(np.linalg.norm(v))
        if norm == 0.0 or not np.isfinite(norm) or (dim is not None and v.shape[0] != dim):
            out.append(sn)  # unusable vector: similarity 0 with everything
            continue
        v = v / norm
        # einsum, not BLAS: a threaded BLAS call on a 15 x 384 matrix costs ~1 ms on a busy
        # 2-core machine, the single-threaded loop a few microseconds.
        if kept is not None and n_kept:
            sims = np.einsum("ij,j->i", kept[:n_kept], v)
            if float(np.max(sims)) >= threshold:
                report.near += 1
                continue
        dim = v.shape[0]
        if kept is None:
            kept = np.empty((len(snippets), dim), dtype=np.float64)
        kept[n_kept] = v
        n_kept += 1
        out.append(sn)
    return out
