"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "atomic_save_npy",
    "atomic_write_bytes",
    "atomic_write_json",
    "load_npy",
    "plain_mode",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()
"""The mode ``open()`` gives a new file here (0644 under the usual umask)."""


def plain_mode(fd: int) -> None:
    """Give a file made by ``tempfile.mkstemp`` (mode 0600) the mode a plainly created file
    gets: the index's other files (the database) are readable by whoever may read the folder,
    and an index shared with another account (a server under its own user) could not read its
    manifest or vectors (a user trial)."""
    os.fchmod(fd, _FILE_MODE)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        plain_mode(fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    import io

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def load_npy(path: Path) -> np.ndarray | None:
    """Load an array saved by :func:`atomic_save_npy`; ``None`` if missing or unreadable."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    return np.asarray(arr)
