"""The single-writer lock of an index folder (an advisory ``flock`` on ``write.lock``).

The kernel releases the lock when the process dies, even by SIGKILL, so a crashed indexer
never leaves the index locked. Readers never take it.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType
from typing import NoReturn

from ragloom.errors import IndexLockedError, InputError

__all__ = ["WriteLock"]

_WAIT_STEP_S = 0.1
"""How often a waiting writer tries the lock again."""


_PID_WIDTH = 20
"""Bytes of the pid record in the lock file (a pid, then spaces)."""


class WriteLock:
    """Hold the index's write lock for the duration of a ``with`` block."""

    def __init__(self, index_dir: Path, *, wait_s: float = 0.0) -> None:
        """``wait_s``: how long :meth:`acquire` waits for another writer to finish before it
        raises :class:`IndexLockedError` (0: not at all)."""
        self.path = index_dir / "write.lock"
        self.wait_s = wait_s
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only folder or disk, no permission: bad input
            raise InputError(
                f"cannot write to the index folder {self.path.parent}: {exc.strerror or exc}"
            ) from exc
        deadline = time.monotonic() + max(0.0, self.wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._refuse(fd)
                time.sleep(_WAIT_STEP_S)
        # one write of a fixed width, no truncation first: a process refused at this moment
        # reads a whole pid (it read "unknown" between the truncation and the write)
        os.pwrite(fd, f"{os.getpid():<{_PID_WIDTH}}".encode(), 0)
        self._fd = fd

    def _refuse(self, fd: int) -> NoReturn:
        """Close ``fd`` and raise IndexLockedError naming the writer that holds the lock (its
        pid, as it wrote it)."""
        try:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        waited = f" (waited {self.wait_s:g} s)" if self.wait_s > 0 else ""
        raise IndexLockedError(
            f"index is locked: another ragloom process (pid {holder}) is writing to "
            f"{self.path.parent}{waited}; wait for it to finish, or run with --wait",
            holder,
        )

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
