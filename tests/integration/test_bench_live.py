"""The live-index benchmark end to end on a tiny tree (a real ``serve http`` with its watcher,
the hashing model): every kind of edit is measured, and ROOT is left as it was."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import ragloom
from ragloom.bench.live import KINDS, PROBE_DIR, render_markdown, run_live_bench
from ragloom.embed.base import HashingEmbedder

pytestmark = pytest.mark.integration


def test_live_bench_measures_each_kind_and_cleans_up(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(textwrap.__file__, root / "wrapping.py")
    with ragloom.Index(root, root / ".ragloom", embedder=HashingEmbedder(64)) as idx:
        idx.index(history=False)
    before = sorted(p.name for p in root.iterdir())
    result = run_live_bench(root, edits=4, work_dir=tmp_path / "work")
    assert result["edits"] == 4
    for kind in KINDS:
        s = result["by_kind"][kind]
        assert s["n"] == 1 and 0 < s["p50_ms"] < 30_000
    assert sorted(p.name for p in root.iterdir()) == before
    assert not (root / PROBE_DIR).exists()
    text = render_markdown([result], "bench")
    assert "| repo |" in text and "**all**" in text
