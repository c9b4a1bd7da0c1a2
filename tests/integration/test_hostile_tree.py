"""Acceptance test (issue 10 item 1): a repository full of hostile entries is indexed through
the real CLI; every hostile entry is counted under its own skip reason and every normal file
is searchable. Entries vanishing mid-walk are covered in tests/unit/test_walker.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration

NORMAL = {
    "a.py": "marker_alpha_root",
    "pkg/mod.py": "marker_bravo_pkg",
    "loops/real.py": "marker_charlie_loops",
    "sub/deep/b.py": "marker_delta_deep",
    "-dash start.py": "marker_echo_dash",
    "ünïcødé/名前.py": "marker_foxtrot_unicode",
}
LOCKED = {"locked/inner.py": "marker_golf_locked", "closed.py": "marker_hotel_closed"}


def _write(root: Path, rel: str, marker: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f'def {marker}():\n    """Unique marker of {rel}."""\n    return 1\n')


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "repo"
    for rel, marker in {**NORMAL, **LOCKED}.items():
        _write(root, rel, marker)
    _write(tmp_path / "outside", "o.py", "marker_india_outside")
    os.symlink("self", root / "self")  # x -> x
    os.symlink("b", root / "loops" / "a")  # a -> b -> a
    os.symlink("a", root / "loops" / "b")
    os.symlink("..", root / "sub" / "deep" / "up")  # a link to a parent folder
    os.symlink("missing.py", root / "dangling.py")
    os.symlink(tmp_path / "outside" / "o.py", root / "outside_link.py")
    os.symlink("a.py", root / "inner_link.py")  # inside the root: indexed once, as a.py
    (root / "locked").chmod(0)
    (root / "closed.py").chmod(0)
    try:
        yield root
    finally:
        (root / "locked").chmod(0o755)
        (root / "closed.py").chmod(0o644)


def _search(index_dir: Path, query: str, *extra: str) -> list[dict[str, object]]:
    proc = run_cli("search", query, "--index-dir", str(index_dir), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    hits: list[dict[str, object]] = json.loads(proc.stdout)
    return hits


def test_hostile_tree_indexes_completely(hostile: Path) -> None:
    # As root, mode 000 does not block reads: the locked entries are then ordinary files.
    blocked = {rel for rel in LOCKED if not os.access(hostile / rel.split("/")[0], os.R_OK)}
    proc = run_cli("index", str(hostile), "--json", "--no-embed")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    skipped = stats["files_skipped"]
    assert skipped.get("symlink_loop") == 4  # self, loops/a, loops/b, sub/deep/up
    assert skipped.get("symlink_dangling") == 1
    assert skipped.get("symlink_outside") == 1
    assert skipped.get("symlink") == 1  # inner_link.py: its target is indexed as a.py
    assert skipped.get("excluded_dir") == 1  # the index folder itself
    assert skipped.get("unreadable", 0) == len(blocked)
    assert not {"vanished", "bad_name"} & set(skipped)
    indexed = {**NORMAL, **{rel: m for rel, m in LOCKED.items() if rel not in blocked}}
    assert stats["files_scanned"] == len(indexed)

    # One keyword search for every marker (one CLI start-up instead of one per marker).
    index_dir = hostile / ".ragloom"
    markers = [*NORMAL.values(), *LOCKED.values(), "marker_india_outside"]
    hits = _search(index_dir, " ".join(markers), "--strategy", "sparse", "-k", "100")
    found: dict[str, list[object]] = {m: [] for m in markers}
    for h in hits:
        if h["symbol"] in found:
            found[str(h["symbol"])].append(h["path"])
    assert found == {
        **{marker: [rel] for rel, marker in indexed.items()},  # once each, in its own file
        **{LOCKED[rel]: [] for rel in blocked},
        "marker_india_outside": [],  # what lies outside the root is never indexed
    }

    proc = run_cli("status", "--index-dir", str(index_dir), "--json")
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["files"] == len(indexed)
    assert status["stale_files"] == 0

    # A second run (now embedding) over the same tree, then the default (hybrid) search.
    proc = run_cli("index", str(hostile), "--json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["files_changed"] == 0 and again["files_skipped"] == skipped
    assert again["embeddings_pending"] == 0
    hits = _search(index_dir, "marker_delta_deep")
    assert hits[0]["path"] == "sub/deep/b.py" and hits[0]["symbol"] == "marker_delta_deep"
