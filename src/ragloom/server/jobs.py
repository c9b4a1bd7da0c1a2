"""Re-index jobs of :class:`~ragloom.server.engine.ServingEngine`: an incremental re-index in
a background thread, one at a time, while queries keep answering from the published
generation (docs/serving.md).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ragloom.errors import InputError
from ragloom.server.metrics import EngineMetrics
from ragloom.server.readers import _ReadersMixin

log = logging.getLogger("ragloom")


@dataclass
class _Job:
    id: str
    state: str = "queued"
    phase: str = ""
    done: int = 0
    total: int = 0
    stats: dict[str, Any] | None = None
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "progress": {"phase": self.phase, "done": self.done, "total": self.total},
            "stats": self.stats,
            "error": self.error,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


class _JobsMixin(_ReadersMixin):
    """``start_reindex``, ``job``, ``wait_job`` (part of ``ServingEngine``)."""

    _jobs: dict[str, _Job]
    _running_job: str | None
    _job_thread: threading.Thread | None
    metrics: EngineMetrics

    def start_reindex(self) -> str:
        """Start an incremental re-index in a background thread; the running job's id when one
        runs already. Queries keep answering from the published generation meanwhile."""
        self.target.check_reindex()
        with self._lock:
            if self._closed:
                raise InputError("the serving engine is closed")
            if self._running_job is not None:
                return self._running_job
            job = _Job(uuid.uuid4().hex)
            self._jobs[job.id] = job
            self._running_job = job.id
            thread = threading.Thread(
                target=self._run_job, args=(job,), name="ragloom-reindex", daemon=True
            )
            self._job_thread = thread
        thread.start()
        return job.id

    def _run_job(self, job: _Job) -> None:
        def progress(phase: str, done: int, total: int) -> None:
            job.phase, job.done, job.total = phase, done, total

        job.state = "running"
        job.started_at = time.time()
        try:
            writer = self.target.open_index(self._embedder)
            stats = writer.index(progress=progress)
            job.stats = stats.to_dict()
            job.state = "succeeded"
        except Exception as exc:  # reported through job(); the engine keeps serving
            job.error = f"{type(exc).__name__}: {exc}"
            job.state = "failed"
            log.warning("re-index job %s failed: %s", job.id, exc)
        finally:
            job.finished_at = time.time()
            self.metrics.jobs_finished.labels(job.state).inc()
            with self._lock:
                self._running_job = None

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job's state and progress, or None for an unknown id."""
        with self._lock:
            j = self._jobs.get(job_id)
            return None if j is None else j.to_dict()

    def wait_job(self, job_id: str, timeout: float | None = None) -> dict[str, Any] | None:
        """Block until the job finished (tests, the CLI); its final state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            j = self.job(job_id)
            if j is None or j["state"] in ("succeeded", "failed"):
                return j
            if deadline is not None and time.monotonic() > deadline:
                return j
            time.sleep(0.02)
