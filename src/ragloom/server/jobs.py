"""Re-index jobs of :class:`~ragloom.server.engine.ServingEngine`: an incremental re-index in
a background thread, one at a time, while queries keep answering from the published
generation (docs/serving.md).

With several worker processes (``serve http --workers N``, docs/serving.md "Workers") a job
may be started on one worker and polled on another: each worker then writes its jobs' records
as JSON files (``<jobs dir>/<id>.json``, written atomically at every state change and at most
every :data:`_SAVE_EVERY_S` while running), and a worker asked about an id it does not know
reads the record there. A worker asked to start a job while another worker's job runs answers
that job's id, as one process does for its own running job.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragloom.errors import InputError
from ragloom.server.metrics import EngineMetrics
from ragloom.server.readers import _ReadersMixin

log = logging.getLogger("ragloom")

_SAVE_EVERY_S = 0.5
"""A running job's shared record is rewritten at most this often (progress)."""
_KEEP_RECORDS_S = 86_400.0
"""Finished jobs' shared records older than this are deleted when a new job starts."""
_JOB_ID = re.compile(r"[0-9a-f]{32}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    saved_at: float = 0.0
    """When the shared record was last written (``time.monotonic``)."""

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
    _jobs_dir: Path | None = None
    """Where jobs' records are shared with the other worker processes (None: one process)."""
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
            elsewhere = self._running_elsewhere()
            if elsewhere is not None:
                return elsewhere
            job = _Job(uuid.uuid4().hex)
            self._jobs[job.id] = job
            self._running_job = job.id
            self._prune_records()
            self._save(job)
            thread = threading.Thread(
                target=self._run_job, args=(job,), name="ragloom-reindex", daemon=True
            )
            self._job_thread = thread
        thread.start()
        return job.id

    def _run_job(self, job: _Job) -> None:
        def progress(phase: str, done: int, total: int) -> None:
            job.phase, job.done, job.total = phase, done, total
            if time.monotonic() - job.saved_at >= _SAVE_EVERY_S:
                self._save(job)

        job.state = "running"
        job.started_at = time.time()
        self._save(job)
        try:
            self._check_model_switch()  # another process may have re-embedded the index
            writer = self.target.open_index(self._embedder)
            try:
                # never with another model than the index's (it would delete its vectors)
                stats = writer.index(progress=progress, keep_model=True)
                job.stats = stats.to_dict()
                adapted = _refit(writer)
                if adapted is not None:  # as `ragloom index --json` reports it
                    job.stats["adapted"] = adapted
            finally:
                writer.close()
            job.state = "succeeded"
        except Exception as exc:  # reported through job(); the engine keeps serving
            job.error = f"{type(exc).__name__}: {exc}"
            job.state = "failed"
            log.warning("re-index job %s failed: %s", job.id, exc)
        finally:
            job.finished_at = time.time()
            self._save(job)
            self.metrics.jobs_finished.labels(job.state).inc()
            with self._lock:
                self._running_job = None

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job's state and progress, or None for an unknown id (with several workers:
        another worker's job, read from its shared record)."""
        with self._lock:
            j = self._jobs.get(job_id)
            if j is not None:
                return j.to_dict()
        return self._shared_job(job_id)

    # -- records shared with the other workers -------------------------------------------
    def _save(self, job: _Job) -> None:
        """Write the job's shared record (several workers only); a failure is logged, the job
        goes on."""
        folder = self._jobs_dir
        if folder is None:
            return
        from ragloom.index.atomic import atomic_write_json

        job.saved_at = time.monotonic()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(folder / f"{job.id}.json", {"pid": os.getpid(), "job": job.to_dict()})
        except OSError as exc:
            log.warning("could not share the state of job %s: %s", job.id, exc)

    def _shared_job(self, job_id: str) -> dict[str, Any] | None:
        """Another worker's job from its record; a job left queued or running by a worker
        that has exited is reported failed."""
        folder = self._jobs_dir
        if folder is None or not _JOB_ID.fullmatch(job_id):
            return None
        try:
            record = json.loads((folder / f"{job_id}.json").read_text(encoding="utf-8"))
            job: dict[str, Any] = record["job"]
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if job.get("state") in ("queued", "running") and not _alive(pid):
            job["state"] = "failed"
            job["error"] = f"the worker process running it (pid {pid}) exited"
        return job

    def _running_elsewhere(self) -> str | None:
        """The id of a job another worker is running now, if any."""
        folder = self._jobs_dir
        if folder is None or not folder.is_dir():
            return None
        for path in folder.glob("*.json"):
            found = self._shared_job(path.stem)
            if found is not None and found.get("state") in ("queued", "running"):
                return path.stem
        return None

    def _prune_records(self) -> None:
        folder = self._jobs_dir
        if folder is None or not folder.is_dir():
            return
        old = time.time() - _KEEP_RECORDS_S
        for path in folder.glob("*.json"):
            try:
                if path.stat().st_mtime < old:
                    path.unlink()
            except OSError:
                continue

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


def _refit(index: Any) -> dict[str, Any] | None:
    """Fit the repository's ranking model again when it has one and its history grew
    (:func:`ragloom.learn.adapt.refresh`, as ``ragloom index`` does); what it did, or None. A
    failure is logged: the index it follows is already published."""
    from ragloom.learn.adapt import refresh

    try:
        report = refresh(index)
    except Exception as exc:
        log.warning("the repository ranking model was not fitted again: %s", exc)
        return None
    return report.to_dict() if report is not None else None
