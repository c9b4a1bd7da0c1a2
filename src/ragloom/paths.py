"""Paths given by a user (CLI argument, API call, configuration), checked once at the boundary.

A path may hold a NUL byte (``ValueError`` from the OS layer), be longer than the file system
allows, or go through a file where a folder is expected; each is bad input, reported as one
:class:`~ragloom.errors.InputError` line instead of an ``OSError`` traceback.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ragloom.errors import InputError

__all__ = ["existing_dir", "path_exists"]

_SHOWN_CHARS = 120
"""A path longer than this is shortened in messages (a fuzzed 4 KB name is not a message)."""


def _shown(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS // 2] + "..." + text[-_SHOWN_CHARS // 2 :]
    return repr(text) if "\x00" in text or "\n" in text else text


def path_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists; a path the OS cannot even look up is an InputError."""
    text = os.fspath(path)
    if "\x00" in text:
        raise InputError(f"bad path {_shown(text)}: contains a NUL byte")
    try:
        os.stat(text)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL):
            raise InputError(f"bad path {_shown(text)}: {exc.strerror}") from exc
        if exc.errno == errno.EACCES:
            raise InputError(f"cannot access {_shown(text)}: {exc.strerror}") from exc
        raise InputError(f"cannot read {_shown(text)}: {exc.strerror or exc}") from exc
    return True


def existing_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path when it is an existing folder, else an InputError saying why."""
    p = Path(os.fspath(path)).expanduser()
    if not path_exists(p):
        raise InputError(f"path not found: {_shown(p)}")
    if not p.is_dir():
        raise InputError(f"not a directory: {_shown(p)}")
    return p
