"""``ragloom watch`` on real files: a real watcher (``watchfiles``) on a tree in ``tmp_path``,
the hashing embedder, and searches from a second index handle while it runs.

Every wait is a poll with a generous deadline (a busy machine delays events and updates),
never a fixed sleep standing in for "the watcher has seen it".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.index.lock import WriteLock
from ragloom.watch import BatchReport, Debouncer, Watcher, WatchRootGoneError, max_hold_ms

pytestmark = pytest.mark.integration

DEADLINE_S = 30.0


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def make_tree(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("def original_helper(x):\n    return x + 1\n")
    (root / "pkg" / "other.py").write_text("def steady_function():\n    return 42\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / ".git" / "refs").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def symbols(root: Path, query: str) -> set[str]:
    """The symbols a fresh reader finds for ``query`` (the published generation)."""
    with ragloom.open(root, embedder=HashingEmbedder(64)) as idx:
        return {hit.symbol for hit in idx.search(query, top_k=10).hits}


class Running:
    """A :class:`Watcher` run in a thread, with what it reported."""

    def __init__(self, root: Path, watcher_cls: type[Watcher] = Watcher, **kw: Any) -> None:
        self.index = ragloom.open(root, embedder=HashingEmbedder(64))
        self.reports: list[BatchReport] = []
        self.messages: list[str] = []
        self.ready = threading.Event()
        self.error: BaseException | None = None
        kw.setdefault("rescan_s", 0)
        self.watcher = watcher_cls(
            self.index,
            history=False,
            on_batch=self.reports.append,
            on_message=self.messages.append,
            on_ready=self.ready.set,
            **kw,
        )
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.watcher.run()
        except BaseException as exc:
            self.error = exc

    @property
    def batches(self) -> list[BatchReport]:
        return [r for r in self.reports if r.trigger != "start"]

    def start(self) -> Running:
        self.thread.start()
        wait_for(lambda: self.ready.is_set() or self.error is not None, "the watcher to start")
        if self.error is not None:
            raise self.error
        return self

    def stop(self) -> None:
        self.watcher.stop()
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the watcher did not stop"
        self.index.close()


@pytest.fixture
def watching() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(root: Path, **kw: Any) -> Running:
        run = Running(root, **kw)
        started.append(run)
        return run.start()

    yield start
    for run in started:
        run.stop()


# -- the debounce rules, no file system ---------------------------------------------------
def test_debouncer_waits_for_quiet_and_caps_a_burst() -> None:
    d = Debouncer(quiet_s=0.25, max_hold_s=2.0)  # times in binary fractions: exact sums
    assert not d.due(0.0) and len(d) == 0
    d.add(["a.py", "b.py"], now=10.0)
    d.add([], now=10.125)  # no events: nothing changes
    assert not d.due(10.125) and d.due(10.25)
    d.add(["a.py"], now=10.125)  # the same path again: one path, and the quiet restarts
    assert not d.due(10.25) and d.due(10.375)
    assert d.take() == ({"a.py", "b.py"}, 3) and len(d) == 0 and not d.due(99.0)
    # a tree that never goes quiet: applied at the cap all the same
    for i in range(30):
        d.add([f"f{i}.py"], now=20.0 + i * 0.125)
        if d.due(20.0 + i * 0.125):
            break
    assert i == 16 and len(d) == 17
    assert max_hold_ms(200) == 2000 and max_hold_ms(500) == 5000
    with pytest.raises(ValueError):
        Debouncer(quiet_s=1.0, max_hold_s=0.5)


def test_filter_drops_git_and_the_index_folder(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    w = Watcher(ragloom.open(root, embedder=HashingEmbedder(64)))
    assert not w.relevant(str(root / ".git" / "HEAD"))
    assert not w.relevant(str(root / ".ragloom" / "index.db-wal"))
    assert not w.relevant(str(root / "node_modules" / "x" / "index.js"))
    assert not w.relevant(str(tmp_path / "elsewhere.py"))
    assert w.relevant(str(root / "pkg" / "mod.py"))
    assert w.relevant(str(root / "debug.log"))  # ignore files: the batch's check decides
    (root / "build").write_text("#!/bin/sh\n")  # a file named like an excluded folder
    assert w.relevant(str(root / "build"))


# -- real watching ------------------------------------------------------------------------
def test_atomic_save_and_delete_then_create_become_searchable(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root)
    assert run.reports[0].trigger == "start" and run.reports[0].files_changed == 3
    # an editor's save: a temporary file renamed over the original
    tmp = root / "pkg" / ".mod.py.swp123"
    tmp.write_text("def freshly_renamed_helper(x):\n    return x * 3\n")
    os.replace(tmp, root / "pkg" / "mod.py")
    wait_for(
        lambda: "freshly_renamed_helper" in symbols(root, "freshly renamed helper"),
        "the saved function to be searchable",
    )
    assert "original_helper" not in symbols(root, "original helper")
    # another editor's save: delete, then create
    (root / "pkg" / "other.py").unlink()
    (root / "pkg" / "other.py").write_text("def recreated_function():\n    return 7\n")
    wait_for(
        lambda: "recreated_function" in symbols(root, "recreated function"),
        "the re-created file to be searchable",
    )
    assert all(r.generation > 0 for r in run.batches)
    assert [r.batch for r in run.batches] == list(range(1, len(run.batches) + 1))


def test_a_burst_of_500_writes_is_a_few_batches(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root)
    burst = root / "burst"
    burst.mkdir()
    for i in range(500):
        (burst / f"m{i:03d}.py").write_text(f"def burst_function_{i}(x):\n    return x + {i}\n")
    wait_for(
        lambda: sum(r.files_added for r in run.batches) >= 500,
        "the 500 new files to be indexed",
        timeout=60.0,
    )
    assert 1 <= len(run.batches) <= 5, [r.files_added for r in run.batches]
    assert len({r.generation for r in run.batches}) == len(run.batches)  # one each
    assert "burst_function_377" in symbols(root, "burst_function_377")


def test_a_deleted_file_leaves_search(tmp_path: Path, watching: Callable[..., Running]) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root)
    assert "steady_function" in symbols(root, "steady function")
    (root / "pkg" / "other.py").unlink()
    wait_for(lambda: any(r.files_removed for r in run.batches), "the removal batch")
    assert "steady_function" not in symbols(root, "steady function")
    assert run.batches[-1].paths == ["pkg/other.py"]


def test_git_and_ignored_files_trigger_no_batch(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (root / ".git" / "refs" / "new").write_text("0" * 40 + "\n")
    (root / "debug.log").write_text("def not_indexed():\n    pass\n")  # *.log in .gitignore
    # the log's batch is checked (and found to change nothing), after the .git events before it
    wait_for(lambda: run.watcher.checks_unchanged >= 1, "the ignored file's check")
    assert run.batches == []
    assert run.watcher.events_dropped >= 2
    (root / "pkg" / "new.py").write_text("def after_the_ignored():\n    pass\n")
    wait_for(lambda: len(run.batches) >= 1, "the real change's batch")
    assert run.batches[0].paths == ["pkg/new.py"]


def test_a_locked_index_makes_the_batch_wait(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root, lock_retry_s=0.1)
    lock = WriteLock(root / ".ragloom")
    lock.acquire()  # as another `ragloom index` would
    try:
        (root / "pkg" / "late.py").write_text("def waited_for_the_lock():\n    pass\n")
        wait_for(lambda: any("locked" in m for m in run.messages), "the lock message")
        assert run.batches == []
    finally:
        lock.release()
    wait_for(lambda: len(run.batches) == 1, "the batch after the lock is released")
    assert run.batches[0].files_added == 1 and run.batches[0].lock_wait_seconds > 0
    assert sum("locked" in m for m in run.messages) == 1  # said once, not per retry
    (said,) = [m for m in run.messages if "locked" in m]
    # who holds it, and no advice of an option `watch` does not have (it said "--wait", and
    # "pid unknown" when it read the lock file between its truncation and the pid's write)
    assert f"(pid {os.getpid()})" in said and "--wait" not in said, said


def test_a_file_that_grows_past_the_cap_says_why_it_left(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    """A file grown past the size cap leaves the index: the batch says why (it read "1
    removed", as a deletion), in its line and its JSON."""
    root = make_tree(tmp_path / "repo")
    run = watching(root, max_file_bytes=2_000)
    (root / "pkg" / "mod.py").write_text("def grown():\n    return 1\n" * 200)
    wait_for(lambda: len(run.batches) == 1, "the batch")
    (batch,) = run.batches
    assert batch.files_removed == 1
    assert batch.removed_skipped == {"pkg/mod.py": "too_large"}
    assert "pkg/mod.py left the index: too_large" in batch.line()
    assert batch.to_dict()["removed_skipped"] == {"pkg/mod.py": "too_large"}


class _DeafWatcher(Watcher):
    """A platform that drops every event: only the periodic check can see a change."""

    def relevant(self, path: str) -> bool:
        return False


def test_the_rescan_finds_changes_no_event_reported(
    tmp_path: Path, watching: Callable[..., Running]
) -> None:
    root = make_tree(tmp_path / "repo")
    run = watching(root, watcher_cls=_DeafWatcher, rescan_s=0.5)
    (root / "pkg" / "unseen.py").write_text("def found_by_rescan():\n    pass\n")
    wait_for(lambda: len(run.batches) >= 1, "the rescan batch")
    assert run.batches[0].trigger == "rescan" and run.batches[0].paths == ["pkg/unseen.py"]


def test_a_deleted_root_stops_the_watcher(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    run = Running(root).start()
    # the watcher may write into .ragloom while it goes (a loaded machine saw "Directory not
    # empty"): delete as `rm -rf` run again would, until the folder is gone
    for _ in range(100):
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            break
        time.sleep(0.05)
    assert not root.exists()
    run.thread.join(DEADLINE_S)
    assert not run.thread.is_alive()
    assert isinstance(run.error, WatchRootGoneError) and "was deleted" in str(run.error)
    run.index.close()


# -- the command line ---------------------------------------------------------------------
def _start_cli(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:  # the child keeps its own copies
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragloom.cli", "watch", *args],
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    try:
        wait_for(lambda: "watching" in err.read_text() or proc.poll() is not None, "start-up")
    except AssertionError:
        proc.kill()
        raise
    assert proc.poll() is None, err.read_text()
    return proc, out, err


def test_cli_json_lines_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    proc, out, err = _start_cli(
        tmp_path, str(root), "--model", "hashing:64", "--no-history", "--json"
    )
    try:
        (root / "pkg" / "cli.py").write_text("def through_the_cli():\n    pass\n")
        wait_for(lambda: len(out.read_text().splitlines()) >= 2, "the batch line")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(DEADLINE_S) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["trigger"] == "start" and lines[1]["trigger"] == "events"
    assert lines[1]["files_added"] == 1 and lines[1]["generation"] > lines[0]["generation"]
    assert {"files_changed", "files_removed", "chunks_total", "chunks_embedded", "seconds"} <= set(
        lines[1]
    )
    said = err.read_text()
    assert "stopped" in said
    # make_tree has no index: the watcher says it creates one, and where (a mistyped
    # --index-dir started a whole index without a word)
    assert f"no index at {root / '.ragloom'}: creating one" in said and "hashing:64" in said


def test_cli_deleted_root_exits_non_zero_and_writes_nothing(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "repo")
    index_dir = tmp_path / "index"
    proc, out, err = _start_cli(
        tmp_path, str(root), "--index-dir", str(index_dir), "--model", "hashing:64", "--no-history"
    )
    try:
        shutil.rmtree(root)
        code = proc.wait(DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 3, err.read_text()
    assert "was deleted" in err.read_text().strip().splitlines()[-1]
    assert [line.split(":")[0] for line in out.read_text().splitlines()] == ["update at start"]


def test_files_of_a_folder_now_ignored_say_why(tmp_path: Path) -> None:
    """A folder ignored after it was indexed is counted once by the walk, under its own path:
    its files said ``skipped``, not the folder's reason."""
    root = make_tree(tmp_path / "repo")
    with ragloom.open(root, embedder=HashingEmbedder(64)) as idx:
        idx.index()
        (root / ".gitignore").write_text("*.log\npkg/\n")
        stats = idx.index()
    assert stats.files_removed == 2
    assert stats.removed_skipped == {"pkg/mod.py": "gitignored", "pkg/other.py": "gitignored"}
