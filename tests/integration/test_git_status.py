"""``ragloom status`` reports the git state the index reflects (issue 23 item 4): the branch and
HEAD now and at the last ``index``, whether HEAD moved since, and how many files differ from
HEAD; ``null`` outside a git work tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.sources_fixture import commit, git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _status(root: Path, *extra: str) -> dict[str, object]:
    proc = run_cli("status", "--index-dir", str(root / ".ragloom"), "--json", *extra, check=True)
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out


def _clean(branch: str, head: str) -> dict[str, object]:
    """The ``git`` object of a work tree indexed at its HEAD and unchanged since."""
    return {"branch": branch, "head": head, "indexed_branch": branch, "indexed_head": head,
            "head_moved": False, "dirty_paths": 0}  # fmt: skip


def _index(root: Path) -> None:
    run_cli("index", str(root), "--no-embed", "--no-history", "--json", check=True)


def test_status_reports_the_indexed_git_state(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    first = git(root, "rev-parse", "HEAD")
    _index(root)
    assert _status(root)["git"] == _clean("main", first)

    second = commit(root, {"pkg/cache.py": "CACHE = {}\n"}, "Cache parsed headers")
    (root / "pkg" / "http.py").write_text("def parse_header(line):\n    return line\n")
    st = _status(root)["git"]
    assert isinstance(st, dict)
    assert (st["head"], st["indexed_head"], st["head_moved"]) == (second, first, True)
    assert st["dirty_paths"] == 1
    assert _status(root, "--no-freshness")["git"] == {**st, "dirty_paths": None}
    human = run_cli("status", "--index-dir", str(root / ".ragloom"), check=True).stdout
    assert (
        f"git       main @ {second[:7]} (index: main @ {first[:7]}, HEAD moved; 1 file differs)"
        in human
    )

    _index(root)
    st = _status(root)["git"]
    assert isinstance(st, dict)
    assert (st["indexed_head"], st["head_moved"]) == (second, False)

    git(root, "checkout", "-q", "--detach", first)
    git(root, "checkout", "-q", "--", ".")
    st = _status(root)["git"]
    assert isinstance(st, dict)
    assert (st["branch"], st["head"], st["indexed_branch"], st["head_moved"]) == (
        None,
        first,
        "main",
        True,
    )


def test_status_git_is_null_outside_a_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    _index(root)
    assert _status(root)["git"] is None
    human = run_cli("status", "--index-dir", str(root / ".ragloom"), check=True).stdout
    assert "git " not in human


def test_postgres_records_the_indexed_git_state_too(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository in PostgreSQL keeps the branch and HEAD it was indexed from in its row, so
    ``status --backend postgres`` says whether the work tree moved on since (it said
    ``indexed_head: null`` before)."""
    monkeypatch.setenv("RAGLOOM_CACHE_DIR", str(tmp_path / "cache"))
    root = make_repo(tmp_path / "repo")
    first = git(root, "rev-parse", "HEAD")
    pg = ["--backend", "postgres", "--dsn", pg_dsn, "--repo", "repo"]

    def status() -> dict[str, object]:
        out = json.loads(run_cli("status", *pg, "--json", cwd=root, check=True).stdout)
        assert isinstance(out, dict) and isinstance(out["git"], dict)
        return out["git"]

    run_cli("index", str(root), *pg, "--no-embed", "--no-history", "--json", check=True)
    assert status() == _clean("main", first)
    second = commit(root, {"pkg/cache.py": "CACHE = {}\n"}, "Cache parsed headers")
    st = status()
    assert (st["head"], st["indexed_head"], st["head_moved"]) == (second, first, True)
    run_cli("index", str(root), *pg, "--no-embed", "--no-history", "--json", check=True)
    st = status()
    assert (st["indexed_head"], st["head_moved"]) == (second, False)
