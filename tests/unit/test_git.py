"""The shared git reader (``ragloom.ingest.git``) on real throwaway repositories: the work tree's
branch and HEAD, the paths that differ from HEAD, the paths a checkout changed, the ``git``
object of ``ragloom status``, and the old ``ragloom.eval.gitdata`` names still importable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragloom.ingest import git as g
from tests.sources_fixture import commit, git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(path: Path) -> tuple[Path, str]:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    first = commit(path, {"pkg/a.py": "A = 1\n", "pkg/b.py": "B = 1\n", "README.md": "hi\n"}, "one")
    return path, first


def test_head_state_branch_detached_subfolder_and_outside(tmp_path: Path) -> None:
    root, first = _repo(tmp_path / "r")
    assert g.head_state(root) == g.GitState("main", first, "")
    assert g.head_state(root / "pkg") == g.GitState("main", first, "pkg/")
    git(root, "checkout", "-q", "-b", "feature")
    assert g.head_state(root) == g.GitState("feature", first, "")
    git(root, "checkout", "-q", "--detach")
    assert g.head_state(root) == g.GitState(None, first, "")

    outside = tmp_path / "plain"
    outside.mkdir()
    assert g.head_state(outside) is None
    assert g.git_dir_of(outside) is None
    assert g.dirty_paths(outside) is None
    assert g.git_status(outside, None) is None

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "trunk")
    assert g.head_state(empty) == g.GitState("trunk", None, "")


def test_a_folder_the_work_tree_ignores_is_not_in_it(tmp_path: Path) -> None:
    """A folder a ``.gitignore`` rule (or ``info/exclude``) names, or one below it, has no git
    directory, state or history of the enclosing repository; a tracked sub-folder and the top
    keep theirs, and a repository of its own inside an ignored folder is its own."""
    root, _first = _repo(tmp_path / "r")
    commit(root, {".gitignore": "/out/\n"}, "ignore out")
    data = root / "out" / "corpus" / "json"
    data.mkdir(parents=True)
    (data / "x.py").write_text("X = 1\n")
    for folder in (root / "out", root / "out" / "corpus", data):
        assert g.ignored_by_work_tree(folder)
        assert g.git_dir_of(folder) is None
        assert g.head_state(folder) is None
        assert g.git_status(folder, None) is None
    assert g.git_dir_of(root / "pkg") == g.git_dir_of(root) == (root / ".git").resolve()
    assert g.head_state(root / "pkg") is not None
    assert not g.ignored_by_work_tree(root) and not g.ignored_by_work_tree(root / "pkg")
    scratch = root / "scratch"
    scratch.mkdir()
    (scratch / "s.py").write_text("S = 1\n")
    assert g.git_dir_of(scratch) is not None  # untracked, not ignored: in the work tree
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("/scratch/\n/pkg/\n")
    assert g.git_dir_of(scratch) is None  # excluded locally: ignored as well
    assert g.git_dir_of(root / "pkg") is not None  # a tracked folder is never ignored
    own = root / "out" / "vendored"
    own.mkdir()
    git(own, "init", "-q", "-b", "main")
    assert g.git_dir_of(own) == (own / ".git").resolve()
    assert not g.ignored_by_work_tree(tmp_path)  # outside any work tree


def test_recorded_state_round_trip(tmp_path: Path) -> None:
    root, first = _repo(tmp_path / "r")
    rec = g.state_record(root)
    assert rec == {"branch": "main", "head": first}
    assert g.GitState.from_dict(rec) == g.GitState("main", first)
    assert g.GitState.from_dict(None) is None and g.GitState.from_dict([1]) is None
    assert g.state_record(tmp_path) is None


def test_dirty_paths(tmp_path: Path) -> None:
    root, _ = _repo(tmp_path / "r")
    assert g.dirty_paths(root) == set()
    (root / "pkg" / "a.py").write_text("A = 2\n")  # modified
    (root / "README.md").unlink()  # deleted
    (root / "new.py").write_text("N = 1\n")  # untracked
    (root / "fresh").mkdir()
    (root / "fresh" / "x.py").write_text("X = 1\n")  # untracked folder
    (root / ".ragloom").mkdir()
    (root / ".ragloom" / "index.db").write_text("")  # the index folder
    git(root, "mv", "pkg/b.py", "pkg/c.py")  # a staged rename: both paths differ
    assert g.dirty_paths(root, exclude=[root / ".ragloom"]) == {
        "pkg/a.py",
        "README.md",
        "new.py",
        "fresh/",
        "pkg/b.py",
        "pkg/c.py",
    }
    assert "fresh/x.py" in (g.dirty_paths(root, untracked="all") or set())
    assert ".ragloom/" in (g.dirty_paths(root) or set())
    # under a subfolder: only its paths, relative to it
    assert g.dirty_paths(root / "pkg") == {"a.py", "b.py", "c.py"}


def test_porcelain_rename_fields() -> None:
    raw = "R  new.py\x00old.py\x00 M pkg/a.py\x00?? dir/\x00"
    assert g._porcelain_paths(raw) == {"new.py", "old.py", "pkg/a.py", "dir/"}


def test_changed_paths_between_commits_plus_work_tree(tmp_path: Path) -> None:
    root, first = _repo(tmp_path / "r")
    git(root, "checkout", "-q", "-b", "topic")
    second = commit(root, {"pkg/a.py": "A = 3\n", "pkg/d.py": "D = 1\n"}, "two")
    git(root, "rm", "-q", "pkg/b.py")
    third = commit(root, {}, "three")
    assert g.changed_paths(root, first, third) == {"pkg/a.py", "pkg/d.py", "pkg/b.py"}
    assert g.changed_paths(root, second, third) == {"pkg/b.py"}
    assert g.changed_paths(root, third, third) == set()
    (root / "pkg" / "a.py").write_text("A = 4\n")
    (root / "more").mkdir()
    (root / "more" / "m.py").write_text("M = 1\n")
    assert g.changed_paths(root, third, third) == {"pkg/a.py", "more/m.py"}
    # relative to a subfolder root
    assert g.changed_paths(root / "pkg", first, third) == {"a.py", "d.py", "b.py"}
    assert g.changed_paths(root, "0" * 40, third) is None
    assert g.changed_paths(root, first, "no-such-rev") is None


def test_git_status_object(tmp_path: Path) -> None:
    root, first = _repo(tmp_path / "r")
    indexed = g.GitState("main", first)
    assert g.git_status(root, indexed) == {
        "branch": "main",
        "head": first,
        "indexed_branch": "main",
        "indexed_head": first,
        "head_moved": False,
        "dirty_paths": 0,
    }
    second = commit(root, {"pkg/a.py": "A = 5\n"}, "two")
    (root / "new.py").write_text("N = 1\n")
    now = g.git_status(root, indexed)
    assert now is not None
    assert (now["head"], now["head_moved"], now["dirty_paths"]) == (second, True, 1)
    skipped = g.git_status(root, None, dirty=False)
    assert skipped is not None
    assert skipped["dirty_paths"] is None
    assert skipped["indexed_head"] is None and skipped["head_moved"] is False


def test_read_log_and_the_old_names(tmp_path: Path) -> None:
    from ragloom.eval import gitdata

    root, first = _repo(tmp_path / "r")
    second = commit(root, {"pkg/a.py": "A = 6\n"}, "change a")
    git_dir = g.git_dir_of(root)
    assert git_dir is not None
    log = g.read_log(git_dir, "HEAD")
    assert [c.sha for c in log] == [second, first]
    assert log[0].changes == (("M", "pkg/a.py"),)
    assert g.resolve_commit(git_dir, "HEAD~1") == first
    assert set(g.tree_paths(git_dir, first)) == {"pkg/a.py", "pkg/b.py", "README.md"}
    # the evaluation's module re-exports the shared reader under its old names
    for name in ("Commit", "read_log", "resolve_commit", "tree_paths", "path_role",
                 "PathRole", "CODE_LANGUAGES"):  # fmt: skip
        assert getattr(gitdata, name) is getattr(g, name)
        assert name in gitdata.__all__
    assert g.path_role("src/pkg/mod.py") == "source"
    assert g.path_role("tests/test_mod.py") == "test"
