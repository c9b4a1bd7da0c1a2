"""Rerankers: a second, slower look at the top candidates (ploke section 4 ``Reranker``).

The contract (:class:`Reranker`): ``(id, text)`` pairs in, ``(id, score)`` out, sorted best
first, the same ids, each once (a repeated input id keeps its first occurrence); a higher score
is better and equal scores keep the input order. Three implementations:

* :class:`NoopReranker`: keeps the input order (ploke section 4: "Default no-op
  implementation");
* :class:`LexicalOverlapReranker`: deterministic, dependency-free, scores by code-token overlap
  with the query;
* :class:`CrossEncoderReranker`: a sentence-transformers ``CrossEncoder`` loaded from a local
  path or the local Hugging Face cache only (no network, ``HF_HUB_OFFLINE=1``). The library is
  the optional extra ``pip install 'ragloom[st]'`` and no cross-encoder weights ship with
  ragloom; see ``docs/ranking.md``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragloom.errors import RerankError
from ragloom.index.tokenize import code_tokens
from ragloom.retrieve.query import QUERY_STOPWORDS

__all__ = [
    "CROSS_ENCODER_BATCH_SIZE",
    "ST_INSTALL_HINT",
    "CrossEncoderReranker",
    "LexicalOverlapReranker",
    "NoopReranker",
    "Reranker",
]

ST_INSTALL_HINT = "pip install 'ragloom[st]'"
"""How to get sentence-transformers (the ``st`` extra in pyproject.toml)."""
CROSS_ENCODER_BATCH_SIZE = 32
"""Pairs per forward pass (sentence-transformers' own ``CrossEncoder.predict`` default)."""
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Environment switches that keep huggingface_hub / transformers from reaching the network."""


@runtime_checkable
class Reranker(Protocol):
    """Re-scores candidates for a query; see the module docstring for the contract."""

    def rerank(self, query: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        """``(id, text)`` in, ``(id, score)`` out, best first."""
        ...


def _unique(candidates: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for cid, text in candidates:
        if cid not in seen:
            seen.add(cid)
            out.append((cid, text))
    return out


def _ranked(ids: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    return [(ids[i], float(scores[i])) for i in order]


class NoopReranker:
    """Keeps the input order; scores ``(n - i) / n`` for position ``i`` (1.0 down to 1/n)."""

    def rerank(self, query: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        """The candidates as given, with scores descending by position."""
        items = _unique(candidates)
        n = len(items)
        return [(cid, (n - i) / n) for i, (cid, _) in enumerate(items)]


class LexicalOverlapReranker:
    """Scores each candidate by the share of the query's code tokens it contains.

    Query and candidate text go through the BM25 tokenizer (``ragloom.index.tokenize``), so
    ``parseHeader`` in the query meets ``parse_header`` in code; filler words
    (:data:`ragloom.retrieve.query.QUERY_STOPWORDS`) are dropped from the query. Each query
    token ``t`` weighs ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` with ``N`` candidates
    and ``df`` of them containing ``t`` (BM25's idf over the candidate set, so a token every
    candidate has counts little), and

        score(d) = sum_{t in Q and d} idf(t) / sum_{t in Q} idf(t)        in [0, 1].

    No query tokens: every score is 0 and the input order is kept. Deterministic; no model.
    """

    def rerank(self, query: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        """Candidates by token overlap with ``query``, best first (ties keep input order)."""
        items = _unique(candidates)
        if not items:
            return []
        q = [t for t in dict.fromkeys(code_tokens(query)) if t not in QUERY_STOPWORDS]
        if not q:
            return [(cid, 0.0) for cid, _ in items]
        qset = set(q)
        docs = [qset.intersection(code_tokens(text)) for _, text in items]
        n = len(items)
        idf = {}
        for t in q:
            df = sum(1 for d in docs if t in d)
            idf[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        total = math.fsum(idf.values())
        scores = [math.fsum(idf[t] for t in sorted(d)) / total for d in docs]
        return _ranked([cid for cid, _ in items], scores)


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` over ``(query, text)`` pairs, offline only.

    ``model_name_or_path`` is a local directory, or a Hugging Face model name already in the
    local cache (``HF_HOME`` / ``cache_folder``); nothing is downloaded: ``HF_HUB_OFFLINE=1`` and
    ``TRANSFORMERS_OFFLINE=1`` are set (unless already set) before the library is imported and
    the model is opened with ``local_files_only=True``. The model loads on first use (or
    :meth:`load`). Missing library or model: :class:`ragloom.errors.RerankError`.
    """

    def __init__(
        self,
        model_name_or_path: str | Path,
        *,
        batch_size: int = CROSS_ENCODER_BATCH_SIZE,
        max_length: int | None = None,
        device: str = "cpu",
        cache_folder: str | Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise RerankError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name_or_path = str(model_name_or_path)
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.cache_folder = str(cache_folder) if cache_folder is not None else None
        self._model: Any = None

    def load(self) -> None:
        """Import sentence-transformers and open the model (idempotent)."""
        if self._model is not None:
            return
        for var in _OFFLINE_ENV:
            os.environ.setdefault(var, "1")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise RerankError(
                f"the cross-encoder reranker needs sentence-transformers: {ST_INSTALL_HINT} ({exc})"
            ) from exc
        name = self.model_name_or_path
        path = Path(name).expanduser()
        if path.exists():
            source = str(path)
        elif path.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1:
            raise RerankError(f"cross-encoder model path {name!r} does not exist")
        else:
            source = name  # a hub name ("org/model"): looked up in the local cache only
        try:
            self._model = CrossEncoder(
                source,
                device=self.device,
                max_length=self.max_length,
                cache_folder=self.cache_folder,
                local_files_only=True,
            )
        except Exception as exc:  # the library raises OSError, ValueError, HF errors, ...
            raise RerankError(
                f"cannot load cross-encoder {name!r} offline (a local directory, or a model "
                f"already in the Hugging Face cache, is needed; nothing is downloaded): {exc}"
            ) from exc

    def rerank(self, query: str, candidates: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        """Cross-encoder scores, best first; ties keep input order. Scores are what the model's
        ``predict`` gives (for a one-label model, sentence-transformers' default sigmoid of the
        logit, in (0, 1))."""
        items = _unique(candidates)
        if not items:
            return []
        self.load()
        pairs = [(query, text) for _, text in items]
        try:
            raw = self._model.predict(
                pairs,
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise RerankError(f"cross-encoder {self.model_name_or_path!r} failed: {exc}") from exc
        arr = np.asarray(raw, dtype=np.float64).reshape(len(items), -1)
        scores = [float(x) for x in arr[:, 0]]
        if not all(math.isfinite(s) for s in scores):
            raise RerankError(f"cross-encoder {self.model_name_or_path!r} gave non-finite scores")
        return _ranked([cid for cid, _ in items], scores)
