"""The single-writer lock of an index folder (an advisory ``flock`` on ``write.lock``).

The kernel releases the lock when the process dies, even by SIGKILL, so a crashed indexer
never leaves the index locked. Readers never take it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from ragloom.errors import IndexLockedError, InputError

__all__ = ["WriteLock"]


class WriteLock:
    """Hold the index's write lock for the duration of a ``with`` block."""

    def __init__(self, index_dir: Path) -> None:
        self.path = index_dir / "write.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a read-only folder or disk, no permission: bad input
            raise InputError(
                f"cannot write to the index folder {self.path.parent}: {exc.strerror or exc}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise IndexLockedError(
                f"index is locked: another ragloom process (pid {holder}) is writing to "
                f"{self.path.parent}; wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

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
