"""Deduplication of fetched snippets (ploke section 2; tamma ``deduplicateChunks``).

Three rules, applied in rank order so the best-ranked copy is the one kept:

1. exact: same chunk id, same node tracking hash (identical text), or same path and lines;
2. near-duplicate: cosine similarity of the two chunks' embeddings >= the policy threshold
   (tamma ``deduplication_threshold``, 0.85 by default) *and* near-identical text: the difflib
   ratio of their whitespace-separated tokens >= :data:`NEAR_TEXT_RATIO` (ragloom's addition,
   2026-11-28: the cosine alone removed different code, ``dump`` for ``dumps``); hits without
   an embedding are never near-duplicates (ploke crucial notes section 11: a missing embedding
   has similarity 0), and a pair of which one has no text is judged by the cosine alone;
3. overlap: ranges of one file that overlap are merged by stitching (:mod:`.stitch`), and a hit
   whose lines lie inside another kept hit counts as a duplicate there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from ragloom.assemble.snippets import Snippet

__all__ = ["NEAR_TEXT_RATIO", "DedupReport", "dedup_exact", "dedup_near", "text_ratio"]

NEAR_TEXT_RATIO = 0.95
"""ragloom's choice (measured on a trial's 70 questions, docs/assembly.md): two chunks are near
duplicates only when, beyond their cosine, this share of their tokens matches in order (difflib
ratio over whitespace-separated tokens: indentation and line breaks do not count, a changed
string literal such as ``' '`` for ``''`` does)."""

_TOKEN = re.compile(r"\S+")


def text_ratio(a: str, b: str) -> float:
    """difflib ratio of the whitespace-separated token sequences of ``a`` and ``b`` (1.0: equal)."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    if not ta and not tb:
        return 1.0
    return SequenceMatcher(None, ta, tb, autojunk=False).ratio()


def _near_text(a: str, b: str, threshold: float) -> bool:
    if not a or not b:
        return True  # no text to compare: the cosine decides
    la, lb = len(a), len(b)
    if 2 * min(la, lb) < threshold * (la + lb) * 0.5:  # far apart in length: cheap no
        return False
    return text_ratio(a, b) >= threshold


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
    text_threshold: float = NEAR_TEXT_RATIO,
) -> list[Snippet]:
    """Drop a snippet whose embedding has cosine >= ``threshold`` with an already kept one
    whose text is near-identical (:func:`text_ratio` >= ``text_threshold``)."""
    if not embeddings:
        return list(snippets)
    kept: np.ndarray | None = None  # the kept unit vectors, one row each (first n_kept rows)
    n_kept = 0
    dim: int | None = None
    out: list[Snippet] = []
    kept_sn: list[Snippet] = []  # the snippet of each kept row
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
            close = np.nonzero(sims >= threshold)[0]
            if any(_near_text(kept_sn[i].hit.text, sn.hit.text, text_threshold) for i in close):
                report.near += 1
                continue
        dim = v.shape[0]
        if kept is None:
            kept = np.empty((len(snippets), dim), dtype=np.float64)
        kept[n_kept] = v
        kept_sn.append(sn)
        n_kept += 1
        out.append(sn)
    return out
