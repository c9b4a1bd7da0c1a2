"""The commits source on a real throwaway git repository: full sync, incremental sync from the
last indexed commit, a rewritten history (amend + reset) detected and re-synced, the bounded
diff summary, the GitHub commit URL from ``origin``, author and date filters."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ragloom.sources.base import (
    RetrieveOptions,
    SourceContext,
    SourceFilter,
    SourceQuery,
    SourceSettings,
)
from ragloom.sources.commits import MAX_DIFF_FILES, CommitsSource
from tests.sources_fixture import commit, git, make_repo


def _source(root: Path) -> CommitsSource:
    src = CommitsSource(SourceContext(root, root / ".ragloom"))
    src.initialize(SourceSettings(weight=0.1))
    return src


def _ask(src: CommitsSource, text: str, **flt: object) -> list[str]:
    opts = RetrieveOptions(top_k=5, filter=SourceFilter(**flt))  # type: ignore[arg-type]
    return [h.id for h in asyncio.run(src.retrieve(SourceQuery(text), opts))]


def test_incremental_sync_and_rewritten_history(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    src = _source(root)
    first = src.sync()
    assert (first.added, first.total, first.resynced) == (3, 3, False)
    head = git(root, "rev-parse", "HEAD")
    assert first.cursor == head and src.freshness()["last_commit"] == head

    hits = asyncio.run(src.retrieve(SourceQuery("retry uploads"), RetrieveOptions(top_k=1)))
    assert hits[0].title == "Retry failed uploads with exponential backoff"
    assert hits[0].paths == ("pkg/upload.py",)
    assert "added pkg/upload.py (+2 -0)" in hits[0].text
    assert hits[0].attribution["commit"] == hits[0].id
    assert hits[0].author == "Alice Example" and hits[0].date == 1706788800.0

    assert src.sync().added == 0, "nothing new: nothing read"
    new = commit(root, {"pkg/cache.py": "CACHE = {}\n"}, "Cache parsed headers per session")
    inc = src.sync()
    assert (inc.added, inc.total, inc.resynced) == (1, 4, False)
    assert _ask(src, "cache parsed headers") == [new]

    # rewrite: drop the last two commits and make a different one in their place
    git(root, "reset", "-q", "--hard", "HEAD~2")
    other = commit(root, {"pkg/auth.py": "TOKEN = ''\n"}, "Authenticate with a bearer token")
    rewritten = src.sync()
    assert rewritten.resynced is True
    assert rewritten.total == 3  # two old ones plus the new one
    assert _ask(src, "cache parsed headers") == [], "the dropped commit is gone"
    assert _ask(src, "session API document") == []
    assert _ask(src, "bearer token authenticate") == [other]


def test_diff_summary_is_bounded_and_url_from_origin(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", "git@github.com:acme/widget.git")
    many = {f"gen/file_{i:03d}.py": f"X = {i}\n" for i in range(MAX_DIFF_FILES + 7)}
    many[".gitignore"] = ".ragloom/\n"
    sha = commit(root, many, "Generate the lookup tables")
    src = _source(root)
    src.sync()
    (hit,) = asyncio.run(src.retrieve(SourceQuery("lookup tables"), RetrieveOptions(top_k=3)))
    assert hit.url == f"https://github.com/acme/widget/commit/{sha}"
    assert hit.text.count("\n  added ") == MAX_DIFF_FILES
    assert "... and 8 more files" in hit.text
    assert len(hit.paths) == MAX_DIFF_FILES + 8


def test_filters_inside_the_source(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    commit(root, {"pkg/upload.py": "def upload(b):\n    pass\n"}, "Simplify uploads again",
           date="2024-06-01T00:00:00Z")  # fmt: skip
    src = _source(root)
    src.sync()
    both = _ask(src, "uploads")
    assert len(both) == 2
    assert len(_ask(src, "uploads", since=1_714_521_600.0)) == 1  # 2024-05-01
    assert len(_ask(src, "uploads", until=1_714_521_600.0)) == 1
    assert _ask(src, "uploads", authors=("nobody",)) == []
    assert len(_ask(src, "uploads", authors=("alice example",))) == 2
    assert _ask(src, "uploads", paths=("docs/*",)) == []
    assert len(_ask(src, "uploads", paths=("pkg/*.py",))) == 2
