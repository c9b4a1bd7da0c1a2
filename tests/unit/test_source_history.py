"""History-aware code ranking (opt-in): votes of past commits, the file-level fusion, files
without a code hit added as ``history`` hits, tests and deleted files never voted; and through
SourceSet on a real repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragloom.sources.base import SourceHit
from ragloom.sources.history import history_rerank, vote_files
from tests.sources_fixture import make_repo


def _commit(sha: str, *paths: str) -> SourceHit:
    return SourceHit("commits", sha, f"subject {sha}", "", 1.0, paths=paths)


def _code(path: str) -> SourceHit:
    return SourceHit("code", f"id-{path}", path, "", 1.0, paths=(path,))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for rel in ("a.py", "b.py", "x.py", "tests/test_a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("pass\n")
    return tmp_path


def test_votes(root: Path) -> None:
    commits = [_commit("c1", "a.py", "tests/test_a.py"), _commit("c2", "b.py", "gone.py")]
    ranked, behind = vote_files(commits, root)
    # c1: 1/61 split over 2 files (the test file gets no vote); c2: 1/62 over 2 (gone.py absent)
    assert ranked == ["a.py", "b.py"]
    assert behind == {"a.py": ["c1"], "b.py": ["c2"]}
    assert vote_files(commits, root, depth=1)[0] == ["a.py"]


def test_rerank_lifts_voted_files_and_adds_missing_ones(root: Path) -> None:
    commits = [_commit("c1", "a.py", "x.py"), _commit("c2", "b.py")]
    code = [_code("x.py"), _code("a.py")]
    assert [h.id for h in history_rerank(code, commits, root, 0.0)] == ["id-x.py", "id-a.py"]
    out = history_rerank(code, commits, root, 1.0)
    # file lists: code [x, a]; history [b (1/62), a (1/122), x (1/122)]
    # fused: x = 1/61 + 1/63 > a = 1/62 + 1/62 > b = 1/61
    assert [h.id for h in out] == ["id-x.py", "id-a.py", "b.py"]
    added = out[-1]
    assert added.source == "history" and added.attribution == {"path": "b.py", "commits": ["c2"]}
    assert "c2" in added.text and out[1].explain["history"] == {"commits": ["c1"]}
    heavy = history_rerank(code, [_commit("c3", "a.py")], root, 5.0)
    assert [h.id for h in heavy] == ["id-a.py", "id-x.py"], "a strong vote lifts a.py"


def test_through_the_source_set(tmp_path: Path) -> None:
    import ragloom
    from ragloom.sources.multi import SourceSet

    root = make_repo(tmp_path / "repo")
    idx = ragloom.Index(root, root / ".ragloom", embedder="hashing")
    idx.index()
    ss = SourceSet(root, root / ".ragloom", ["code", "commits"], index=idx)
    ss.sync(skip=("code",))
    plain = ss.search("exponential backoff for failed uploads", top_k=5)
    lifted = ss.search("exponential backoff for failed uploads", top_k=5, history_weight=5.0)
    ss.close()
    code_paths = [h.paths[0] for h in lifted.hits if h.source in ("code", "history")]
    assert code_paths[0] == "pkg/upload.py"
    top = next(h for h in lifted.hits if h.paths == ("pkg/upload.py",))
    assert top.explain["history"]["commits"]  # type: ignore[index]
    assert all("history" not in h.explain for h in plain.hits)
