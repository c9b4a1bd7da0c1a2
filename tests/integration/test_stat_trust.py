"""Which files an update reads again (docs/live-index.md): a file unchanged in size and
modification time since an update that read it after its last write is trusted; a file written
close to the previous scan, or one a watcher names, is read and hashed again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.index.indexer import STAT_MARGIN_S

pytestmark = pytest.mark.integration


def _index(root: Path) -> ragloom.Index:
    return ragloom.Index(root, root / ".ragloom", embedder=HashingEmbedder(32))


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_settled_files_are_trusted_and_a_racy_rewrite_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    old, fresh = root / "old.py", root / "fresh.py"
    old.write_text("def settled():\n    return 1\n")
    _age(old, 60)
    fresh.write_text("def racy_one():\n    return 1\n")
    with _index(root) as idx:
        first = idx.index(history=False)
        assert first.files_trusted == 0 and first.files_changed == 2
        # same size, same modification time as recorded, other bytes: a rewrite within one
        # clock tick of the previous scan. ``fresh`` was written just before that scan, so its
        # time does not vouch for its bytes: it is read and the change is found.
        st = fresh.stat()
        fresh.write_text("def racy_two():\n    return 2\n")
        os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
        second = idx.index(history=False)
        assert second.files_trusted == 1  # old.py, written a minute before the scan
        assert second.files_changed == 1 and second.paths_changed == ["fresh.py"]
        assert {h.symbol for h in idx.search("racy_two", top_k=3).hits} >= {"racy_two"}


def test_a_watcher_named_file_is_always_read(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    f = root / "m.py"
    f.write_text("def alpha_name():\n    return 1\n")
    _age(f, 60)
    with _index(root) as idx:
        idx.index(history=False)
        st = f.stat()
        f.write_text("def gamma_name():\n    return 1\n")  # same size
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same recorded time
        trusted = idx.index(history=False)  # settled: trusted (git's rule; no event named it)
        assert trusted.files_changed == 0 and trusted.files_trusted == 1
        named = idx.index(history=False, verify={"m.py"})
        assert named.files_changed == 1 and named.files_trusted == 0


def test_margin_is_documented_and_positive() -> None:
    assert STAT_MARGIN_S >= 1.0
