"""Feedback, metrics and live settings of :class:`~ragloom.server.engine.ServingEngine`
(docs/serving.md): ratings and context usage through the feedback store
(``ragloom.server.feedback``), the Prometheus registry (``ragloom.server.metrics``) and the
settings reload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragloom.errors import FeedbackUnavailableError, UnknownIdError
from ragloom.server.answers import _AnswersMixin
from ragloom.server.cache import EmbeddingCache, ResultCache
from ragloom.server.embedding import BatchingEmbedder
from ragloom.server.feedback import FeedbackBase, log_bytes
from ragloom.server.jobs import _JobsMixin
from ragloom.settings import Settings, load_settings

_FIXED_SECTIONS = ("server.", "storage.", "embedding.")
"""Settings a live reload does not change (fixed when the server starts)."""


class _OperationsMixin(_JobsMixin, _AnswersMixin):
    """Feedback, metrics and settings (part of ``ServingEngine``)."""

    _feedback_store: FeedbackBase | None
    _feedback_readonly: FeedbackBase | None
    _feedback_error: str
    _embedding_cache: EmbeddingCache
    _batcher: BatchingEmbedder | None

    @property
    def settings(self) -> Settings:
        return self._settings

    # -- feedback -----------------------------------------------------------------------
    def _feedback(self) -> FeedbackBase:
        """The feedback store, with every answer given so far in its query log;
        :class:`FeedbackUnavailableError` where this server keeps no ratings."""
        if self._feedback_store is None or self._query_log is None:
            raise FeedbackUnavailableError(
                f"this server keeps no ratings ({self._feedback_error}); it answers questions, "
                "but its answers cannot be rated: serve a writable index folder to record feedback"
            )
        self._query_log.flush()
        return self._feedback_store

    def _feedback_reader(self) -> FeedbackBase:
        """The store the feedback figures are read from: the writable one, or else the
        folder's database opened read-only (what `ragloom feedback stats` reads there)."""
        if self._feedback_store is not None and self._query_log is not None:
            return self._feedback()
        if self._feedback_readonly is None:
            self._feedback_readonly = self.target.open_feedback(readonly=True)
        return self._feedback_readonly

    def record_feedback(
        self, query_id: str, chunk_id: str, rating: str, comment: str | None = None
    ) -> dict[str, Any]:
        """Store a rating of one chunk of an answer; InputError for an unknown query_id or a
        rating outside helpful | not_helpful | partially_helpful."""
        return self._feedback().record_feedback(query_id, chunk_id, rating, comment)

    def track_context_usage(self, query_id: str, used_chunk_ids: Sequence[str]) -> dict[str, Any]:
        """Record which chunks of an answer the caller used."""
        return self._feedback().track_context_usage(query_id, used_chunk_ids)

    def feedback_stats(self, query_id: str) -> dict[str, Any]:
        """total, helpful/not_helpful/partially_helpful counts, avg_rating, used_chunk_ids."""
        try:
            return self._feedback_reader().stats(query_id)
        except UnknownIdError:
            if self._query_log is None:  # this server's own answers are not logged
                self._feedback()  # FeedbackUnavailableError, saying why
            raise

    def feedback_summary(self) -> dict[str, Any]:
        """The whole index's figures: answers, rated_answers, the rating counts, avg_rating,
        used_chunks."""
        return self._feedback_reader().summary()

    def query_feedback(self, query_id: str) -> list[dict[str, Any]]:
        """Every rating of ``query_id`` (tamma ``getQueryFeedback``)."""
        self.feedback_stats(query_id)  # InputError for an unknown id
        return self._feedback_reader().query_feedback(query_id)

    def metrics_text(self) -> str:
        """Prometheus exposition text of this engine's registry."""
        return self.metrics.text()

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        """Count one served request (the HTTP and MCP servers call this)."""
        self.metrics.observe_request(route, status, seconds)

    # -- settings and lifecycle ---------------------------------------------------------
    def apply_settings(self, settings: Settings) -> None:
        """Live reload: ranking and assembly defaults apply to the next request; a changed
        cache section replaces the caches (emptied). Queries in flight keep the settings they
        started with (each reads ``self._settings`` once)."""
        with self._lock:
            old = self._settings
            # the query model is the index's (a switch by another process is followed, docs/
            # serving.md): `embedding.model` in a reloaded file applies at the next start
            settings = settings.model_copy(update={"embedding": old.embedding})
            if settings.cache != old.cache:
                self._results = ResultCache(
                    ttl_s=settings.cache.ttl_s,
                    max_entries=settings.cache.max_entries,
                    enabled=settings.cache.enabled,
                )
                self._embedding_cache.enabled = settings.cache.enabled
                self._embedding_cache.clear()
            if self._batcher is not None:
                self._batcher.window_s = max(0.0, settings.server.batch_window_ms) / 1000.0
            self._reader.retriever.bm25_timeout_ms = settings.timeouts.bm25_ms
            if self._feedback_store is not None:
                self._feedback_store.max_log_bytes = log_bytes(settings)
            self._settings = settings

    def reload_settings(self) -> dict[str, Any]:
        """Live reload on request (HTTP ``POST /config/reload``, the MCP ``reload_config``
        tool): re-read the repository's ``ragloom.toml`` / ``[tool.ragloom]`` and the
        environment, and apply them as :meth:`apply_settings` does.

        The ``server``, ``storage`` and ``embedding`` sections keep their running values (host,
        port, token, the request limits, the index served and its query model are fixed when
        the server starts); their keys report the source ``running``.
        A bad configuration raises ConfigError (one line, with the key path) and nothing
        changes. Returns ``{"changed": [dotted keys], "settings", "sources", "files"}``.
        """
        loaded = load_settings(self.root)
        current = self.settings
        new = loaded.settings.model_copy(
            update={
                "server": current.server,
                "storage": current.storage,
                "embedding": current.embedding,
            }
        )
        before, after = current.flat(), new.flat()
        changed = sorted(k for k, v in after.items() if before.get(k) != v)
        self.apply_settings(new)
        sources = {
            k: ("running" if k.startswith(_FIXED_SECTIONS) else v)
            for k, v in loaded.sources.items()
        }
        return {
            "changed": changed,
            "settings": new.public_dict(),
            "sources": sources,
            "files": [str(p) for p in loaded.files],
        }
