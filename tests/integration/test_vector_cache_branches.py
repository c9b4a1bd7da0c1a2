"""Branch switches and work trees re-embed nothing already seen (issue 23, item 3): the vector
cache keeps every text's vector, so a switch and back, or a second work tree of the same
repository, computes no vector twice; counts from the index's own statistics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ragloom
from ragloom.embed.base import HashingEmbedder
from tests.conftest import run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2024-01-01T00:00",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _index(root: Path) -> ragloom.IndexStats:
    index = ragloom.open(root, embedder=HashingEmbedder(64))
    try:
        return index.index(history=False)
    finally:
        index.close()


def test_switch_and_back_and_a_second_work_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "a@b.c")
    _git(repo, "config", "user.name", "A")
    (repo / ".gitignore").write_text(".ragloom/\n")
    for i in range(30):
        (repo / "pkg" / f"m{i}.py").write_text(f"def main_{i}(x):\n    return x + {i}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "main")
    _git(repo, "checkout", "-qb", "feature")
    for i in range(20):
        (repo / "pkg" / f"m{i}.py").write_text(f"def feature_{i}(x):\n    return x * {i}\n")
    for i in range(5):
        (repo / "pkg" / f"new{i}.py").write_text(f"def added_{i}():\n    return {i}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "feature")
    _git(repo, "checkout", "-q", "main")

    first = _index(repo)
    assert first.embeddings_computed == first.chunks_embedded >= 30
    assert first.embeddings_cached == 0

    _git(repo, "checkout", "-q", "feature")
    there = _index(repo)
    assert there.embeddings_computed == 25  # only the texts never seen before
    assert there.embeddings_cached == 0

    _git(repo, "checkout", "-q", "main")
    back = _index(repo)
    assert back.embeddings_computed == 0  # the switch back re-embeds nothing
    assert back.embeddings_cached == 20 and back.chunks_embedded == 20

    # a second work tree of the same repository shares the cache: nothing to compute
    wt = tmp_path / "wt"
    _git(repo, "worktree", "add", "-q", str(wt), "feature")
    other = _index(wt)
    assert other.embeddings_computed == 0 and other.embeddings_cached == other.chunks_embedded

    # and the CLI says so (feature is checked out in the work tree: detach here)
    _git(repo, "checkout", "-q", "--detach", "feature")
    proc = run_cli("index", str(repo), "--model", "hashing:64", "--no-history", "--json",
                   "--no-progress", check=True)  # fmt: skip
    stats = json.loads(proc.stdout)
    assert stats["embeddings_computed"] == 0 and stats["embeddings_cached"] == 25


def test_a_cache_that_cannot_be_used_only_costs_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "file"
    bad.write_text("not a folder")
    monkeypatch.setenv("RAGLOOM_VECTOR_CACHE", str(bad / "v.sqlite"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def a():\n    return 1\n")
    stats = _index(tmp_path / "src")
    assert stats.embeddings_computed == stats.chunks_embedded == 1
    monkeypatch.setenv("RAGLOOM_VECTOR_CACHE", "off")
    (tmp_path / "src" / "a.py").write_text("def b():\n    return 2\n")
    assert _index(tmp_path / "src").embeddings_computed == 1
