"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["atomic_save_npy", "atomic_write_bytes", "atomic_write_json", "load_npy"]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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
