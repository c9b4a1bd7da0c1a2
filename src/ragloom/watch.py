"""Keep an index fresh while its work tree changes: ``ragloom watch`` (issue 23).

A :class:`Watcher` indexes the root once (incrementally, like ``ragloom index``), then follows
it with ``watchfiles`` (inotify, FSEvents, ReadDirectoryChangesW, or polling where those are
missing) and turns bursts of file events into incremental updates:

1. Each event path goes through a cheap filter: the index folder and every folder the walker
   never enters (:data:`~ragloom.ingest.walker.EXCLUDED_DIRS`: ``.git``, ``node_modules``,
   ``.ragloom``, ...) are dropped there, so the index's own writes and a ``git commit`` never
   wake the watcher.
2. The paths left are collected by a :class:`Debouncer` until the tree has been quiet for the
   debounce window (200 ms by default) or a burst has been held for its cap (2 s, or ten
   windows when that is longer): thousands of events make one batch, or a few.
3. A batch is applied as ONE incremental :meth:`Index.index` call with the walker's own
   rules (``.gitignore``, ``.ragloomignore``, secrets, binaries, size cap), so one batch
   publishes one generation. The call reads the files the events named and any file whose
   size or modification time differ from the index (``verify``), not the whole tree: a one-file
   edit costs a walk, one read, one parse, the BM25 delta and the new chunks' embeddings, with
   the index's embedder kept loaded. It reads every file as it is then, which makes an
   editor's save (temporary file renamed over, or delete then create) and a file that vanished
   mid-batch come out right whatever order the events arrived in; a batch of ignored files, of
   files saved with the same content, or of changes undone meanwhile publishes nothing.
   Small batches (at most three paths: one save) close after 20 ms of quiet, larger ones
   (a checkout, a formatter run) after the debounce window.
4. When the tree has been quiet for ``rescan_s`` (30 s), the same check runs without any event:
   changes a platform dropped (an overflowed inotify queue, a network file system) are found by
   size and modification time and applied like a batch.

Another process holding the index's write lock (a ``ragloom index`` running) makes the batch
wait and retry (``on_message`` says so, once); the events that arrive meanwhile join it. A
deleted (or replaced) root stops the watcher with :class:`WatchRootGoneError`, before anything
is written from a tree that is no longer there. :meth:`Watcher.stop` (from a signal handler or
another thread) ends :meth:`Watcher.run` after the batch in progress, if any, is complete.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ragloom.errors import IndexLockedError, InputError
from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES, EXCLUDED_DIRS

if TYPE_CHECKING:
    from watchfiles import Change

    from ragloom.api import Index
    from ragloom.index.indexer import IndexStats

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "DEFAULT_RESCAN_S",
    "BatchReport",
    "Debouncer",
    "WatchRootGoneError",
    "Watcher",
    "max_hold_ms",
]

DEFAULT_DEBOUNCE_MS = 200
"""Quiet time that closes a batch: an editor's save (a few events within a few ms) or a
``git checkout`` (thousands within a second) fits in one."""

DEFAULT_QUICK_MS = 20
"""Quiet time that closes a small batch (at most :data:`QUICK_PATHS` paths): one editor save
is applied 20 ms after its last event, on top of the 20 ms ``watchfiles`` waits itself."""

QUICK_PATHS = 3
"""A batch of at most this many paths (a file, its temporary copy, a swap file) is small."""

DEFAULT_MAX_HOLD_MS = 2000
"""The longest a burst is held before it is applied anyway (a tree that never goes quiet)."""

DEFAULT_IDLE_S = 3.0
"""Quiet seconds after an applied batch before ``on_idle`` runs (a server saves its live
vector index then: a stall of every thread, so not while edits keep coming)."""

DEFAULT_RESCAN_S = 30.0
"""Quiet seconds between two checks of the whole tree for changes no event reported."""

_TICK_MS = 20
"""How often the loop wakes up without events (to close batches, notice a deleted root)."""

_FEED_MAX_MS = 50
"""The longest ``watchfiles`` groups events before handing them over."""


def max_hold_ms(debounce_ms: int) -> int:
    """The cap on holding one burst for a debounce window: 2 s, or ten windows if longer."""
    return max(DEFAULT_MAX_HOLD_MS, 10 * debounce_ms)


class WatchRootGoneError(InputError):
    """The watched root was deleted or replaced: there is nothing left to follow."""


@dataclass(slots=True)
class BatchReport:
    """One applied batch: the line ``ragloom watch`` prints (``--json``: a stable contract)."""

    batch: int
    """1, 2, ... for the batches applied while watching; 0 for the update at start."""
    trigger: str
    """``start`` (the update before watching), ``events`` or ``rescan`` (no event reported
    the change: found by the periodic check)."""
    events: int
    """File events collected into the batch (after the ``.git``/index-folder filter)."""
    files_changed: int
    files_added: int
    """New files (for the update at start: counted in ``files_changed``, this is 0)."""
    files_removed: int
    chunks_total: int
    chunks_added: int
    chunks_updated: int
    chunks_removed: int
    chunks_embedded: int
    """Chunks whose text was embedded by this batch (texts already embedded are reused)."""
    seconds: float
    """From the end of the burst to the published generation (lock waits included)."""
    generation: int
    lock_wait_seconds: float = 0.0
    """Seconds spent waiting for another process's write lock."""
    paths: list[str] = field(default_factory=list)
    """Up to 20 of the files the batch found changed, added or removed (sorted)."""
    removed_skipped: dict[str, str] = field(default_factory=dict)
    """Removed files still on disk and why they are skipped now (``too_large``,
    ``unreadable``, ...): they left the index without being deleted."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def line(self) -> str:
        """The one-line text form."""
        what = "update at start" if self.trigger == "start" else f"batch {self.batch}"
        via = " (rescan)" if self.trigger == "rescan" else ""
        return (
            f"{what}{via}: {self.files_changed} changed, {self.files_added} added, "
            f"{self.files_removed} removed; {self.chunks_total} chunks (+{self.chunks_added} "
            f"~{self.chunks_updated} -{self.chunks_removed}), {self.chunks_embedded} embedded "
            f"in {self.seconds:.2f}s; generation {self.generation}"
            + "".join(
                f"; {path} left the index: {reason}"
                for path, reason in self.removed_skipped.items()
            )
        )


class Debouncer:
    """Collects event paths into batches: a batch is due once no event came for ``quiet_s``
    (``quick_s`` while it holds at most ``quick_paths`` paths: one file saved), or once its
    first event is ``max_hold_s`` old. Pure: the caller passes the time (any monotonic clock),
    so the rules are testable without a file system."""

    def __init__(
        self,
        quiet_s: float,
        max_hold_s: float,
        *,
        quick_s: float | None = None,
        quick_paths: int = QUICK_PATHS,
    ) -> None:
        if quiet_s < 0 or max_hold_s < quiet_s:
            raise ValueError("need 0 <= quiet_s <= max_hold_s")
        self.quiet_s = quiet_s
        self.quick_s = quiet_s if quick_s is None else min(max(quick_s, 0.0), quiet_s)
        self.quick_paths = quick_paths
        self.max_hold_s = max_hold_s
        self._paths: set[str] = set()
        self._events = 0
        self._first = 0.0
        self._last = 0.0

    def add(self, paths: Iterable[str], now: float) -> None:
        """Events at ``now``: each path once per batch, however many events it had."""
        paths = list(paths)
        if not paths:
            return
        if not self._paths:
            self._first = now
        self._paths.update(paths)
        self._events += len(paths)
        self._last = now

    def __len__(self) -> int:
        return len(self._paths)

    def due(self, now: float) -> bool:
        """Whether the pending batch should be applied at ``now`` (never when empty)."""
        if not self._paths:
            return False
        quiet = self.quick_s if len(self._paths) <= self.quick_paths else self.quiet_s
        return now - self._last >= quiet or now - self._first >= self.max_hold_s

    def take(self) -> tuple[set[str], int]:
        """The pending paths and event count; the debouncer is empty afterwards."""
        paths, events = self._paths, self._events
        self._paths, self._events = set(), 0
        return paths, events


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class Watcher:
    """Follow ``index.root`` and apply its changes to ``index`` in debounced batches.

    ``on_batch`` gets a :class:`BatchReport` per applied batch (and one for the update at
    start), ``on_message`` one-line notices (the lock is held elsewhere, ...), ``on_ready``
    is called once the tree is watched and the start update is done: a change made after it is
    seen. ``max_batches`` ends :meth:`run` after that many batches (the start update not
    counted). ``rescan_s`` 0 turns the periodic check off.
    """

    def __init__(
        self,
        index: Index,
        *,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        max_hold: int | None = None,
        quick_ms: int = DEFAULT_QUICK_MS,
        rescan_s: float = DEFAULT_RESCAN_S,
        history: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_batches: int | None = None,
        lock_retry_s: float = 1.0,
        on_batch: Callable[[BatchReport], None] | None = None,
        on_message: Callable[[str], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        idle_s: float = DEFAULT_IDLE_S,
        force_polling: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if debounce_ms < 0:
            raise ValueError("debounce_ms must be >= 0")
        self.index = index
        self.root = str(index.root)
        self.index_dir = str(index.index_dir)
        hold = max_hold if max_hold is not None else max_hold_ms(debounce_ms)
        self.debouncer = Debouncer(
            debounce_ms / 1000,
            max(hold, debounce_ms) / 1000,
            quick_s=min(quick_ms, debounce_ms) / 1000,
        )
        self.rescan_s = rescan_s
        self.history = history
        self.max_file_bytes = max_file_bytes
        self.max_batches = max_batches
        self.lock_retry_s = lock_retry_s
        self.on_batch = on_batch or (lambda _r: None)
        self.on_message = on_message or (lambda _m: None)
        self.on_ready = on_ready or (lambda: None)
        self.on_idle = on_idle
        self.idle_s = idle_s
        self.force_polling = force_polling
        self.clock = clock
        self.batches = 0
        """Batches applied (the start update not counted)."""
        self.events_dropped = 0
        """Events of paths the filter dropped (index folder, ``.git``, ...)."""
        self.checks_unchanged = 0
        """Batches (and rescans) whose check found nothing to index: no write."""
        self._stop = threading.Event()
        self._root_id: tuple[int, int] | None = None
        self._files: int | None = None
        """Files the index held after the last update (None before the first)."""
        self._applying = False
        self._feed_lock = threading.Lock()
        self._last_event = 0.0
        self._feed_stop = threading.Event()
        self._feed_ready = threading.Event()
        self._feed_error: BaseException | None = None
        self.last_generation = 0
        """The generation the last applied batch (or the update at start) published."""
        self.last_report: BatchReport | None = None

    # -- control -------------------------------------------------------------------------
    def stop(self) -> None:
        """End :meth:`run` after the batch in progress (safe from a signal handler or a thread)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def pending(self) -> bool:
        """Whether a change was seen and is not published yet: events held by the debouncer,
        or a batch being applied. An answer computed now may miss it (issue 23, item 5)."""
        return self._applying or len(self.debouncer) > 0

    # -- filtering -----------------------------------------------------------------------
    def relevant(self, path: str) -> bool:
        """Whether an event on ``path`` may concern an indexed file: False for the index folder
        and anything in a folder the walker never enters (``.git``, ``node_modules``, ...).
        The ignore files and the other skip rules are applied by the batch's check."""
        p = os.path.abspath(path)
        if _within(p, self.index_dir) or not _within(p, self.root):
            return False
        if p == self.root:
            return True
        parts = os.path.relpath(p, self.root).split(os.sep)
        if any(part in EXCLUDED_DIRS for part in parts[:-1]):
            return False
        # a folder named like an excluded one (a file named `build` is still indexed)
        return not (parts[-1] in EXCLUDED_DIRS and not os.path.isfile(p))

    def _filter(self, _change: Change, path: str) -> bool:
        keep = self.relevant(path)
        if not keep:
            self.events_dropped += 1
        return keep

    # -- the root ------------------------------------------------------------------------
    def _root_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.root)
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if os.path.isdir(self.root) else None

    def _check_root(self) -> None:
        now = self._root_identity()
        if now is None or (self._root_id is not None and now != self._root_id):
            gone = "deleted" if now is None else "replaced"
            raise WatchRootGoneError(f"stopped watching: {self.root} was {gone}")

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        """Update once, then watch until :meth:`stop`, ``max_batches`` or a deleted root
        (:class:`WatchRootGoneError`). Returns the number of batches applied.

        Two threads: a feeder (``watchfiles``) only hands event paths to the debouncer; this
        thread wakes every few ms to close batches, apply them and rescan. Kept apart because
        ``watchfiles`` yields nothing while events it then filters out keep arriving (a busy
        server writes its query log into the index folder on every answer): a loop driven by
        its yields would hold a due batch until the tree fell quiet."""
        self._root_id = self._root_identity()
        self._check_root()
        self._feed_stop = threading.Event()
        self._feed_ready = threading.Event()
        self._feed_error = None
        feeder = threading.Thread(target=self._feed, name="ragloom-watch-feed", daemon=True)
        feeder.start()
        try:
            # The watch starts before the update at start, so a change made during it is seen.
            while not self._feed_ready.wait(_TICK_MS / 1000):
                self._raise_feed_error()
                self._check_root()
                if self._stop.is_set():
                    return self.batches
            self._apply("start", 0, set())
            self.on_ready()
            last_activity = self.clock()
            idle_due = self.on_idle is not None
            while not self._stop.is_set():
                self._raise_feed_error()
                self._check_root()
                now = self.clock()
                with self._feed_lock:
                    due = self.debouncer.due(now)
                    if due:
                        paths, events = self.debouncer.take()
                    seen = self._last_event
                if due:
                    self._apply("events", events, paths)
                    last_activity = self.clock()
                    idle_due = self.on_idle is not None
                elif (
                    idle_due
                    and not len(self.debouncer)
                    and now - max(last_activity, seen) >= self.idle_s
                ):
                    idle_due = False
                    if self.on_idle is not None:
                        self.on_idle()
                elif (
                    self.rescan_s > 0
                    and not len(self.debouncer)
                    and now - max(last_activity, seen) >= self.rescan_s
                ):
                    self._apply("rescan", 0, set())
                    last_activity = self.clock()
                if self.max_batches is not None and self.batches >= self.max_batches:
                    break
                self._stop.wait(_TICK_MS / 1000)
        except (WatchRootGoneError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the watch itself failed: a vanished root says why
            if self._root_identity() != self._root_id:
                self._check_root()
            if isinstance(exc, FileNotFoundError):
                raise WatchRootGoneError(f"stopped watching: {self.root} was deleted") from exc
            raise
        finally:
            self._feed_stop.set()
            feeder.join(5.0)
        return self.batches

    def _raise_feed_error(self) -> None:
        if self._feed_error is not None:
            raise self._feed_error

    def _feed(self) -> None:
        """The feeder thread: ``watchfiles`` events into the debouncer, nothing else."""
        import watchfiles

        try:
            for changes in watchfiles.watch(
                self.root,
                watch_filter=self._filter,
                # events reach the debouncer within 50 ms even while filtered-out events keep
                # arriving; the Debouncer, not watchfiles, decides what one batch is
                debounce=_FEED_MAX_MS,
                step=_TICK_MS,
                rust_timeout=_TICK_MS,
                yield_on_timeout=True,
                stop_event=self._feed_stop,
                raise_interrupt=False,
                force_polling=self.force_polling,
            ):
                self._feed_ready.set()
                if changes:
                    now = self.clock()
                    with self._feed_lock:
                        self.debouncer.add((path for _, path in changes), now)
                        self._last_event = now
        except BaseException as exc:  # handed to run(), which raises it in its thread
            self._feed_error = exc
            self._feed_ready.set()

    def _apply(self, trigger: str, events: int, paths: set[str]) -> BatchReport | None:
        """Apply what changed as one update; None when there was nothing to apply (or the
        watcher was stopped while waiting for the lock). :attr:`pending` holds meanwhile."""
        self._applying = True
        try:
            return self._apply_batch(trigger, events, paths)
        finally:
            self._applying = False

    def _apply_batch(self, trigger: str, events: int, paths: set[str]) -> BatchReport | None:
        t0 = time.perf_counter()
        waited = 0.0
        told = False
        # The update reads the files with events and any whose size or time differ from the
        # index (a rescan: none with events); the update at start reads every file.
        verify = None if trigger == "start" else self._relative(paths)
        while True:
            self._check_root()
            try:
                stats = self.index.index(
                    history=self.history,
                    max_file_bytes=self.max_file_bytes,
                    verify=verify,
                    # an event batch scopes the embedding checks to its rows; the update at
                    # start and the rescans check the whole store
                    recent_only=trigger == "events",
                    # after the update at start (which applies a `--model` asked for),
                    # another process may re-index with another model: never switch it back
                    # (that deleted the other model's vectors)
                    keep_model=trigger != "start",
                )
            except IndexLockedError as exc:
                if not told:
                    self.on_message(
                        f"index is locked: another ragloom process (pid {exc.holder}) is "
                        f"writing to {self.index_dir}; the batch is applied when it finishes"
                    )
                    told = True
                w0 = time.perf_counter()
                stopped = self._stop.wait(self.lock_retry_s)
                waited += time.perf_counter() - w0
                if stopped:
                    return None
                continue
            except Exception as exc:
                if self._root_identity() != self._root_id:
                    raise WatchRootGoneError(
                        f"stopped watching: {self.root} was deleted during an update"
                    ) from exc
                raise
            break
        if told:
            self.on_message("index lock released: batch applied")
        if trigger != "start" and not (stats.files_changed or stats.files_removed):
            self.checks_unchanged += 1  # saved with the same content, ignored, undone: no write
            return None
        report = self._report(trigger, events, stats, time.perf_counter() - t0, waited)
        if self._files is not None:
            # the index held ``_files`` files; it holds ``files_scanned`` now (every file the
            # update saw is stored): the difference, less the removed, is the new files
            added = stats.files_scanned - (self._files - stats.files_removed)
            report.files_added = max(0, min(added, stats.files_changed))
            report.files_changed = stats.files_changed - report.files_added
        self._files = stats.files_scanned
        self.last_generation = stats.generation
        self.last_report = report
        if trigger != "start":
            self.batches += 1
            report.batch = self.batches
        self.on_batch(report)
        return report

    def _relative(self, paths: Iterable[str]) -> set[str]:
        """Event paths as the walker names files (relative to the root, ``/`` separated)."""
        out = set()
        for p in paths:
            rel = os.path.relpath(os.path.abspath(p), self.root)
            if not rel.startswith(".."):
                out.add(rel.replace(os.sep, "/"))
        return out

    @staticmethod
    def _report(
        trigger: str,
        events: int,
        stats: IndexStats,
        seconds: float,
        waited: float,
    ) -> BatchReport:
        return BatchReport(
            batch=0,
            trigger=trigger,
            events=events,
            files_changed=stats.files_changed,
            files_added=0,
            files_removed=stats.files_removed,
            chunks_total=stats.chunks_total,
            chunks_added=stats.chunks_added,
            chunks_updated=stats.chunks_updated,
            chunks_removed=stats.chunks_removed,
            chunks_embedded=stats.chunks_embedded,
            seconds=round(seconds, 3),
            generation=stats.generation,
            lock_wait_seconds=round(waited, 3),
            paths=list(stats.paths_changed),
            removed_skipped=dict(stats.removed_skipped),
        )
