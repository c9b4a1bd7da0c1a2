"""A commit item read back (``stored_commit``) is the commit it was written from: what a
machine without the clone mines its history questions from (``ragloom adapt``)."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.ingest.git import Commit
from ragloom.sources.commits import MAX_DIFF_FILES, _item, stored_commit, stored_commits
from ragloom.sources.itemstore import ItemStore

_WORDS = st.text(string.ascii_letters + string.digits + " .,:-_()<>#\n", min_size=1, max_size=60)
_PATHS = st.lists(
    st.from_regex(r"[a-z]{1,6}(/[a-z ]{1,6}){0,2}\.(py|md|txt|rs)", fullmatch=True),
    min_size=1,
    max_size=8,
    unique=True,
)


@settings(max_examples=150, deadline=None)
@given(
    message=_WORDS.filter(lambda m: m.strip() != ""),
    author=st.from_regex(r"[A-Za-z][A-Za-z .]{0,20}", fullmatch=True),
    email=st.from_regex(r"[a-z0-9.+]{1,10}@[a-z]{1,8}\.[a-z]{2,3}", fullmatch=True),
    paths=_PATHS,
    statuses=st.lists(st.sampled_from("AMDT"), min_size=8, max_size=8),
    counts=st.booleans(),
)
def test_a_commit_reads_back_as_written(
    message: str, author: str, email: str, paths: list[str], statuses: list[str], counts: bool
) -> None:
    changes = tuple(zip(statuses, paths, strict=False))
    c = Commit("ab" * 20, 1_600_000_000, author.strip() or "A", email, message, changes)
    stat = {p: ("3", "1") for p in paths} if counts else {}
    back = stored_commit(_item(c, stat, None))
    assert back is not None
    assert back.sha == c.sha and back.timestamp == c.timestamp and back.author == c.author
    assert back.email == email and back.message == message.strip()
    assert back.changes == changes


def _big(source_at: int) -> Commit:
    """A commit of ``MAX_DIFF_FILES + 5`` files, all documentation but the one at
    ``source_at``, a source file."""
    paths = [f"docs/page{i}.md" for i in range(MAX_DIFF_FILES + 5)]
    paths[source_at] = "src/pkg/core.py"
    return Commit(
        "cd" * 20, 1_600_000_000, "A", "a@b.c", "Fix the core", tuple(("M", p) for p in paths)
    )


def test_a_commit_listed_in_part_keeps_what_it_can_say() -> None:
    # the source file is among the listed ones: the unlisted ones are documentation, "?"
    back = stored_commit(_item(_big(0), {}, None))
    assert back is not None and back.changes[0] == ("M", "src/pkg/core.py")
    assert {st for st, _ in back.changes[MAX_DIFF_FILES:]} == {"?"}
    # a source file past the listed ones: its status would be a guess
    assert stored_commit(_item(_big(MAX_DIFF_FILES + 2), {}, None)) is None


def test_stored_commits_come_newest_first(tmp_path: Path) -> None:
    store = ItemStore(tmp_path, "commits")
    try:
        old = Commit("01" * 20, 100, "A", "a@b.c", "Old change of a", (("M", "a.py"),))
        new = Commit("02" * 20, 200, "A", "a@b.c", "New change of b", (("A", "b.py"),))
        store.upsert([_item(old, {}, None), _item(new, {}, None)])
        assert [c.sha for c in stored_commits(store, 10)] == [new.sha, old.sha]
        assert [c.sha for c in stored_commits(store, 1)] == [new.sha]
    finally:
        store.close()
