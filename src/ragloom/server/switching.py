"""Following a model switch made by another process (part of
:class:`~ragloom.server.engine.ServingEngine`, docs/serving.md "A model switch").

``ragloom index --model OTHER`` run beside a server re-embeds every chunk with another model.
The server loaded the old one: its queries would be embedded with it and compared with vectors
of the new one. It follows instead:

1. every query, re-index job and watch batch refused by the switch looks at the index's model
   stamp: one ``stat`` of the manifest for a folder, a row read at most once a second for
   PostgreSQL;
2. when the stamp changed and the manifest names another model, the new model is loaded (in
   the thread that noticed, while the other threads go on answering from the old reader), the
   query embedders are replaced, a new reader (a new *epoch*, so no cached answer of the old
   model is served) is opened with it, and the watcher is started again with it;
3. if the new model cannot be loaded (a remote model out of reach) or ``embedding.model`` in
   the settings names another one, the server answers from BM25 alone, with the reason in
   ``status``'s ``watch.error`` and ``model_switch``, rather than compare vectors of two models.

The old reader, meanwhile, never compares a query with the new model's vectors: a vector file
of another dimension is not loaded (:func:`ragloom.index.vectors.file_dim`), and one of the
same dimension is the new model's only once the manifest says so, which this module follows.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ragloom.embed.base import Embedder
from ragloom.errors import RagError
from ragloom.index.vectors import unshare_live
from ragloom.server.cache import EmbeddingCache
from ragloom.server.embedding import BatchingEmbedder, CachingEmbedder
from ragloom.server.watching import _WatchingMixin

log = logging.getLogger("ragloom")


class _SwitchingMixin(_WatchingMixin):
    """``_follow_model_switch`` and the state ``status`` reports (part of ``ServingEngine``)."""

    _batcher: BatchingEmbedder | None
    _embedding_cache: EmbeddingCache
    _computing: int
    _model_stamp: object | None = None
    _served_model: tuple[str, int] = ("", 0)
    """(model id, dimension) of the index this engine answers for: the manifest's when the
    engine was opened or last followed a switch."""
    _switches: int = 0
    _switch_error: str = ""
    _switch_lock: threading.Lock | None = None

    def _init_switching(self, model: str, dim: int) -> None:
        self._served_model = (model, dim)
        self._model_stamp = self.target.model_stamp()
        self._switch_lock = threading.Lock()

    def _check_model_switch(self) -> None:
        stamp = self.target.model_stamp()
        if stamp is None or stamp == self._model_stamp or self._switch_lock is None:
            return
        if not self._switch_lock.acquire(blocking=False):
            return  # another thread is following it; this query answers from the old reader
        try:
            if stamp == self._model_stamp or self._closed:
                return
            try:
                manifest = self.target.manifest()
            except RagError:  # a rebuild between its writes: look again at the next query
                return
            self._model_stamp = stamp
            now = (manifest.embedding_model, manifest.embedding_dim)
            if now == self._served_model or not manifest.embedding_model:
                return
            self._switch_to(now, manifest.embedding_spec)
        finally:
            self._switch_lock.release()

    def _switch_to(self, model: tuple[str, int], spec: str) -> None:
        t0 = time.perf_counter()
        configured = self._settings.embedding.model
        base: Embedder | None = None
        problems: list[str] = []
        for asked in dict.fromkeys(x for x in (configured, spec) if x):
            try:
                from ragloom.embed.registry import load_embedder

                loaded = load_embedder(asked)
            except RagError as exc:
                problems.append(f"cannot load {asked}: {exc}")
                continue
            if (loaded.model_id, loaded.dim) == model:
                base = loaded
                break
            problems.append(
                f"embedding.model {asked} is {loaded.model_id} ({loaded.dim}-d), not the "
                f"index's new {model[0]} ({model[1]}-d)"
            )
        error = "; ".join(problems)
        if error and base is not None:
            error += f": serving with {spec} (a restart with these settings would refuse to start)"
        elif error:
            error += ": dense retrieval is off until the model can be loaded"
        old = self._served_model
        was_watching = self._watcher is not None
        watch_args = self._watch_args
        if was_watching:
            self._stop_watcher_only()
        with self._lock:
            self._doc_embedder = base
            if base is not None:
                batcher = BatchingEmbedder(
                    base,
                    window_ms=self._settings.server.batch_window_ms,
                    company=lambda: self._computing,
                )
                if self._batcher is not None:
                    batcher.stats = self._batcher.stats
                self._batcher = batcher
                self._embedder = CachingEmbedder(batcher, self._embedding_cache)
            else:
                self._batcher = None
                self._embedder = None
            self._dense_off = base is None
            self._served_model = model
            self._switches += 1
            self._switch_error = error
            self._replace_reader(self._open_reader())
        if error:
            log.warning("%s", error)
        log.warning(
            "followed a model switch made by another process: %s (%d-d) -> %s (%d-d) in %.2f s",
            old[0],
            old[1],
            model[0],
            model[1],
            time.perf_counter() - t0,
        )
        if was_watching and watch_args is not None:
            self._watch_error = ""
            self.start_watching(**watch_args)

    def _stop_watcher_only(self) -> None:
        """Stop the watcher without saving its vectors: they are the old model's, and the
        index's vector file is the new model's now."""
        watcher, thread = self._watcher, self._watch_thread
        if watcher is not None:
            watcher.stop()
        if thread is not None and thread is not threading.current_thread():
            thread.join(30.0)
        unshare_live(self.index_dir / "vectors", persist=False)
        with self._lock:
            self._watcher = None
            self._watch_thread = None

    def switch_state(self) -> dict[str, Any]:
        """``model`` and ``dim`` this engine answers for, ``query_model`` (the loaded query
        embedder's model, None when dense retrieval is off), ``switches`` followed and the last
        one's ``error``."""
        emb = self._embedder
        return {
            "model": self._served_model[0],
            "dim": self._served_model[1],
            "query_model": emb.model_id if emb is not None else None,
            "switches": self._switches,
            "error": self._switch_error or None,
        }
