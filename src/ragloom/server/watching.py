"""Watching the work tree from :class:`~ragloom.server.engine.ServingEngine`
(:class:`ragloom.watch.Watcher` in a background thread, docs/serving.md).

Each batch of edits is applied as one incremental update with the engine's loaded model; the
watcher's updates change the readers' vector index in memory, saved when the tree has been
quiet a while; answers say whether they may miss a change the watcher knows of.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragloom.embed.base import Embedder
from ragloom.errors import IncompatibleIndexError, IndexLockedError, RagError
from ragloom.index.lock import WriteLock
from ragloom.index.vectors import HnswVectors, persist_live, share_live, unshare_live
from ragloom.server.readers import _ReadersMixin
from ragloom.watch import DEFAULT_DEBOUNCE_MS, DEFAULT_RESCAN_S, BatchReport

log = logging.getLogger("ragloom")


class _WatchingMixin(_ReadersMixin):
    """``start_watching``, ``stop_watching``, ``watch_state`` (part of ``ServingEngine``)."""

    root: Path
    index_dir: Path
    _doc_embedder: Embedder | None
    _watch_thread: threading.Thread | None
    _watch_error: str
    _graph_warming: bool = False
    _watch_args: dict[str, Any] | None = None
    """The arguments of the last :meth:`start_watching`, to start again with them after a
    model switch (``ragloom.server.switching``)."""

    def start_watching(
        self,
        *,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        rescan_s: float = DEFAULT_RESCAN_S,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> bool:
        """Follow the work tree (:class:`ragloom.watch.Watcher`) in a background thread: each
        batch of edits is applied as one incremental update with the loaded model, and queries
        pick the new generation up. Only for a local folder index; False (with the reason in
        :meth:`watch_state`) for a PostgreSQL repository or a closed engine. Idempotent."""
        from ragloom.server.target import FolderTarget
        from ragloom.watch import Watcher

        with self._lock:
            if self._closed:
                return False
            if self._watcher is not None:
                return True
            if not isinstance(self.target, FolderTarget):
                self._watch_error = "only a local folder index is watched"
                return False
            self._watch_args = {
                "debounce_ms": debounce_ms,
                "rescan_s": rescan_s,
                "on_batch": on_batch,
            }
            writer = self.target.open_index(self._doc_embedder)
            vectors = self._reader.retriever.vectors
            if isinstance(vectors, HnswVectors):
                # the watcher's updates change the readers' vector index in memory (no file
                # round trip per edit); it is saved when the tree has been quiet a while
                share_live(vectors)

            def batch_done(report: BatchReport) -> None:
                if on_batch is not None:
                    on_batch(report)
                self._warm_graph()

            watcher = Watcher(
                writer,
                debounce_ms=debounce_ms,
                rescan_s=rescan_s,
                on_batch=batch_done,
                on_message=lambda m: log.info("watch: %s", m),
                on_idle=self._persist_vectors,
            )
            self._watcher = watcher

        def run() -> None:
            switched = False
            try:
                watcher.run()
            except Exception as exc:  # a deleted root, a failing update: serving goes on
                self._watch_error = f"{type(exc).__name__}: {exc}"
                switched = isinstance(exc, IncompatibleIndexError)
                log.warning("stopped watching %s: %s", self.root, exc)
            finally:
                writer.close()
            if switched:  # another process re-embedded the index: follow it, and watch again
                self._check_model_switch()

        thread = threading.Thread(target=run, name="ragloom-watch", daemon=True)
        self._watch_thread = thread
        thread.start()
        return True

    def _warm_graph(self) -> None:
        """After a batch, build the new generation's code graph in the background when the
        graph is in use (it was built before), so the next graph question or structural
        context does not wait for it (docs/graph.md, "What it costs"). One build at a time."""
        reader = self._reader
        if reader.retriever.cached_graph is None or self._graph_warming:
            return
        self._graph_warming = True

        def build() -> None:
            try:
                reader.retriever.code_graph()
            except Exception as exc:  # a query will report it; serving goes on
                log.info("code graph not rebuilt in the background: %s", exc)
            finally:
                self._graph_warming = False

        threading.Thread(target=build, name="ragloom-graph", daemon=True).start()

    def stop_watching(self, timeout: float | None = 30.0) -> None:
        """Stop the watcher after the batch it is applying (nothing is left half-written) and
        save the vectors it changed in memory."""
        watcher, thread = self._watcher, self._watch_thread
        if watcher is not None:
            watcher.stop()
        if thread is not None:
            thread.join(timeout)
        if watcher is not None:
            self._persist_vectors()
            unshare_live(self.index_dir / "vectors", persist=False)

    def _persist_vectors(self) -> None:
        """Save the live vector index when it is ahead of its file, under the write lock (when
        another process holds it, its update writes a complete file itself)."""
        try:
            with WriteLock(self.index_dir):
                model = self._doc_embedder
                manifest = self.target.manifest()
                if model is not None and (
                    manifest.embedding_model != model.model_id
                    or manifest.embedding_dim != model.dim
                ):
                    # another process re-embedded the index with another model since this
                    # engine loaded it: its vectors on disk are that model's, keep them (the
                    # engine follows the switch at its next query)
                    log.warning(
                        "vector index not saved: the index is now embedded with %s, not this "
                        "server's %s",
                        manifest.embedding_model,
                        model.model_id,
                    )
                    return
                persist_live(self.index_dir / "vectors")
        except IndexLockedError:
            log.info("vector index not saved now: another update holds the lock")
        except (OSError, RagError) as exc:
            log.warning("could not save the vector index: %s", exc)

    def watch_state(self) -> dict[str, Any]:
        """``watching``, ``ready`` (the update at start is done: edits from now on are followed),
        ``pending`` (a change seen and not yet published), ``batches`` applied, the
        ``generation`` the last one published, the last batch (as ``ragloom watch --json`` prints it) and ``error``."""
        w = self._watcher
        thread = self._watch_thread
        alive = thread is not None and thread.is_alive()
        return {
            "watching": alive,
            "pending": bool(w is not None and alive and w.pending),
            "batches": w.batches if w is not None else 0,
            "ready": bool(w is not None and w.last_report is not None),
            "generation": w.last_generation if w is not None and w.last_report else None,
            "last_batch": w.last_report.to_dict() if w and w.last_report else None,
            "error": self._watch_error or None,
        }

    def _may_miss_a_change(self, generation: int) -> bool:
        """Whether an answer read from ``generation`` may miss a change the watcher knew of:
        one is seen and not yet published, or was published after that generation."""
        w = self._watcher
        if w is None:
            return False
        return w.pending or w.last_generation > generation
