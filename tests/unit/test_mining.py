"""Mining the learned stage's training data: questions from a repository's history (the
qualifying commits, split by time, reserved repositories refused) and one group per question
asked at its parent commit, byte-identical on a rerun."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ragloom.embed.base import HashingEmbedder
from ragloom.eval.mining import (
    MiningSpec,
    load_groups,
    load_mining_specs,
    lookup_commit,
    lookup_packages,
    mine_lookups,
    mine_questions,
    mine_repo,
)
from ragloom.eval.swebench import EmbeddingCache
from ragloom.retrieve.stages.features import FEATURE_NAMES, FEATURES_VERSION

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

MODULES = {
    "acme/router.py": "def match_route(path, routes):\n    return [r for r in routes if r == path]\n",
    "acme/cookies.py": "def parse_cookie(header):\n    return dict(p.split('=') for p in header)\n",
    "acme/templates.py": "def render_template(name, context):\n    return name.format(**context)\n",
}
CHANGES = [  # (file, appended line, message)
    ("acme/router.py", "# trailing slash", "Match routes with a trailing slash in the router"),
    ("acme/cookies.py", "# quoted", "Parse quoted cookie values correctly"),
    ("README.md", "more", "docs: explain the router"),  # a docs commit: no question
    ("acme/templates.py", "# escape", "Escape template context values before rendering"),
    ("acme/router.py", "# methods", "Let routes declare their allowed methods"),
]


def _git(cwd: Path, *args: str, date: str = "") -> str:
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else None
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    src = tmp_path / "src"
    (src / "acme").mkdir(parents=True)
    _git(src, "init", "-q", "-b", "main")
    _git(src, "config", "user.email", "a@b.c")
    _git(src, "config", "user.name", "A")
    for path, text in MODULES.items():
        (src / path).write_text(text)
    (src / "README.md").write_text("acme\n")
    _git(src, "add", "-A")
    _git(
        src, "commit", "-q", "-m", "Initial import of the acme toolkit", date="2020-01-01T00:00:00"
    )
    for i, (path, line, message) in enumerate(CHANGES):
        with (src / path).open("a") as fh:
            fh.write(line + "\n")
        _git(src, "commit", "-q", "-am", message, date=f"2020-01-0{i + 2}T00:00:00")
    root = tmp_path / "mirrors"
    (root / "acme+web").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(src), str(root / "acme+web" / "repo"))
    return root, _git(src, "rev-parse", "HEAD")


def test_questions_and_their_split(tmp_path: Path) -> None:
    root, head = _mirror(tmp_path)
    spec = MiningSpec("acme/web", "python", "acme+web/repo", head)
    qs = mine_questions(spec, root, max_questions=10)
    # the pinned commit is the corpus, not a question (as in the git-history evaluation)
    assert [q.query for q in qs] == [m for _, _, m in CHANGES[:-1] if not m.startswith("docs")]
    assert [q.split for q in qs] == ["train", "test", "test"]
    assert qs[0].gold_files == ("acme/router.py",)
    assert all(
        _git(root / "acme+web" / "repo", "rev-parse", f"{q.commit}^") == q.parent for q in qs
    )
    # the newest N, and a cut-off date keeps newer history out
    assert [q.query for q in mine_questions(spec, root, max_questions=1)] == [CHANGES[-2][2]]
    cut = MiningSpec("acme/web", "python", "acme+web/repo", head, before="2020-01-04T00:00:00Z")
    assert len(mine_questions(cut, root)) == 2  # the router and the cookie commits


def test_reserved_and_repeated_repositories_are_refused() -> None:
    row = {"repo": "sympy/sympy", "language": "python", "git_dir": "x", "commit": "y"}
    with pytest.raises(ValueError, match="may not be mined"):
        load_mining_specs({"repo": [row]})
    ok = {**row, "repo": "acme/web"}
    with pytest.raises(ValueError, match="listed twice"):
        load_mining_specs({"repo": [ok, ok]})


def test_groups_at_the_parent_commit_are_reproducible(tmp_path: Path) -> None:
    root, head = _mirror(tmp_path)
    spec = MiningSpec("acme/web", "python", "acme+web/repo", head)
    qs = mine_questions(spec, root)
    runs = []
    for n in range(2):
        out: list[dict[str, object]] = []
        emb = EmbeddingCache(HashingEmbedder(64), tmp_path / "e.sqlite")
        mine_repo(spec, qs, mirror_root=root, work_dir=tmp_path / f"work{n}", embedder=emb,
                  on_group=out.append)  # fmt: skip
        emb.close()
        runs.append([json.dumps(g, sort_keys=True) for g in out])
    assert runs[0] == runs[1] and len(runs[0]) == len(qs)
    groups = [json.loads(g) for g in runs[0]]
    first = groups[0]
    assert first["features"] == FEATURES_VERSION and first["split"] == "train"
    assert len(first["x"][0]) == len(FEATURE_NAMES) and len(first["x"]) == len(first["paths"])
    assert first["labels"] == [int(p == "acme/router.py") for p in first["paths"]]
    assert sum(first["labels"]) >= 1
    # the work tree was left at the last question's parent, with no ref beyond it
    work = tmp_path / "work1" / "acme+web"
    assert _git(work, "rev-parse", "HEAD") == qs[-1].parent
    assert _git(work, "for-each-ref") == ""
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join(runs[0]) + "\n")
    assert len(load_groups([path])) == len(qs)
    path.write_text(json.dumps({**first, "features": "old"}) + "\n")
    with pytest.raises(ValueError, match="mine again"):
        load_groups([path])


DOCUMENTED = {
    "acme/__init__.py": "",
    "acme/router.py": (
        "def match_route(path, routes):\n"
        '    """Find every route whose pattern matches the request path."""\n'
        "    return [r for r in routes if r == path]\n"
    ),
    "acme/cookies.py": (
        "def parse_cookie(header):\n"
        '    """Split a cookie header into its named values."""\n'
        "    return dict(p.split('=') for p in header)\n"
    ),
    "tests/__init__.py": "",
    "tests/test_router.py": "def test_match():\n    assert True\n",
}
LOOKUP_CHANGES = [
    ("acme/router.py", "Let routes declare their allowed methods"),
    ("acme/cookies.py", "Parse quoted cookie values correctly"),
    ("acme/router.py", "Match routes case insensitively when asked"),
    ("acme/cookies.py", "Keep empty cookie values instead of dropping them"),
    ("acme/router.py", "Route requests by host name as well as path"),
]


def test_lookup_packages_are_the_library_folders(tmp_path: Path) -> None:
    for rel in ("acme/__init__.py", "src/beta/__init__.py", "tests/__init__.py",
                "docs/__init__.py", "_build/__init__.py", "loose/x.py"):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert lookup_packages(tmp_path) == ["acme", "src/beta"]


def test_lookup_groups_with_and_without_history_are_reproducible(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q", "-b", "main")
    _git(src, "config", "user.email", "a@b.c")
    _git(src, "config", "user.name", "A")
    for rel, text in DOCUMENTED.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    _git(src, "add", "-A")
    _git(
        src, "commit", "-q", "-m", "Initial import of the acme toolkit", date="2020-01-01T00:00:00"
    )
    with (src / "acme/router.py").open("a") as fh:
        fh.write("# trailing slash\n")
    _git(
        src, "commit", "-q", "-am", "Match routes with a trailing slash", date="2020-01-02T00:00:00"
    )
    for day, (rel, message) in enumerate(LOOKUP_CHANGES, start=3):
        with (src / rel).open("a") as fh:
            fh.write(f"# {message}\n")
        _git(src, "commit", "-q", "-am", message, date=f"2020-01-{day:02d}T00:00:00")
    root = tmp_path / "mirrors"
    (root / "acme+web").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(src), str(root / "acme+web" / "repo"))
    head = _git(src, "rev-parse", "HEAD")
    spec = MiningSpec("acme/web", "python", "acme+web/repo", head)
    qs = mine_questions(spec, root, tune_share=1.0)
    commit = lookup_commit(qs)
    assert commit == qs[-1].parent and lookup_commit([]) is None
    runs = []
    for n in range(2):
        out: list[dict[str, object]] = []
        emb = EmbeddingCache(HashingEmbedder(64), tmp_path / "e.sqlite")
        mine_lookups(spec, commit, mirror_root=root, work_dir=tmp_path / f"work{n}",
                     embedder=emb, on_group=out.append)  # fmt: skip
        emb.close()
        runs.append([json.dumps(g, sort_keys=True) for g in out])
    assert runs[0] == runs[1]
    groups = [json.loads(g) for g in runs[0]]
    assert sorted(g["kind"] for g in groups) == ["lookup", "lookup", "lookup+history",
                                                 "lookup+history"]  # fmt: skip
    by_query = {(g["kind"], g["query"]): g for g in groups}
    g = by_query[("lookup", "Find every route whose pattern matches the request path")]
    assert g["gold_files"] == ["acme/router.py"] and g["split"] in ("train", "test")
    assert g["labels"] == [int(p == "acme/router.py") for p in g["paths"]]
    assert "tests/test_router.py" not in g["paths"]  # the library packages only
    # with history, the history features of the changed file are set; without, never
    hist = [i for i, name in enumerate(FEATURE_NAMES) if name.startswith("hist_")]
    h = by_query[("lookup+history", g["query"])]
    assert not any(row[i] for row in g["x"] for i in hist)
    assert any(row[i] for row in h["x"] for i in hist), h["x"]


def test_commit_questions_asked_again_without_history(tmp_path: Path) -> None:
    root, head = _mirror(tmp_path)
    spec = MiningSpec("acme/web", "python", "acme+web/repo", head)
    qs = mine_questions(spec, root)
    with_history: list[dict[str, object]] = []
    plain: list[dict[str, object]] = []
    emb = EmbeddingCache(HashingEmbedder(64), tmp_path / "e.sqlite")
    mine_repo(spec, qs, mirror_root=root, work_dir=tmp_path / "work", embedder=emb,
              on_group=with_history.append, on_no_history=plain.append)  # fmt: skip
    emb.close()
    assert len(plain) == len(with_history) == len(qs)
    assert [g["id"] for g in plain] == [f"{q.id}:no-history" for q in qs]
    assert {g["kind"] for g in plain} == {"commit-no-history"}
    assert "kind" not in with_history[0]  # the commit groups keep their bytes
    hist = [i for i, name in enumerate(FEATURE_NAMES) if name.startswith("hist_")]
    assert not any(row[i] for g in plain for row in g["x"] for i in hist)  # type: ignore[attr-defined]
    assert any(row[i] for g in with_history for row in g["x"] for i in hist)  # type: ignore[attr-defined]
