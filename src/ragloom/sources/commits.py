"""The ``commits`` source: the local git history, read with ``git`` itself (never the network).

One item per non-merge commit: the full message, author, committer date, the changed files with
their status and line counts (a bounded diff summary: at most :data:`MAX_DIFF_FILES` files), and
a URL when ``origin`` is a GitHub remote. History is read with the shared git reader
(:func:`ragloom.ingest.git.read_log`, which the evaluation's dataset builder uses too).

Sync is incremental from the last indexed commit: when it is an ancestor of ``HEAD`` only
``last..HEAD`` is read; when it is not (a rebase, an amend, a force-push: the history was
rewritten) every item is dropped and the history re-read, and the report says ``resynced``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ragloom.errors import InputError
from ragloom.ingest.git import Commit, git_dir_of, path_role, read_log, run_git
from ragloom.sources.base import (
    SourceContext,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.itemstore import BaseItemStore, Item, StoredSource

__all__ = [
    "MAX_DIFF_FILES",
    "CommitsSource",
    "git_dir_of",
    "github_web_url",
    "numstat",
    "store_commits",
    "stored_commit",
    "stored_commits",
]

MAX_DIFF_FILES = 30
"""Files listed in one commit's diff summary; the rest are counted."""
MAX_COMMITS_DEFAULT = 20_000
"""Commits read by the first sync of a long history (newest first); option ``max_commits``."""
_BATCH = 500
log = logging.getLogger("ragloom")
_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}
_REMOTE = re.compile(r"github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")


_run = run_git


def github_web_url(git_dir: Path) -> str | None:
    """``https://github.com/OWNER/NAME`` when ``origin`` points at GitHub."""
    code, out = _run(["config", "--get", "remote.origin.url"], git_dir=git_dir)
    m = _REMOTE.search(out.strip()) if code == 0 else None
    return f"https://github.com/{m.group(1)}/{m.group(2)}" if m else None


def numstat(git_dir: Path, revs: Sequence[str]) -> dict[str, dict[str, tuple[str, str]]]:
    """sha -> path -> (added, deleted) line counts (``-`` for binary files)."""
    code, out = _run(
        ["log", "--no-merges", "--no-renames", "--no-color", "-z", "--numstat",
         "--format=%x1e%H", *revs, "--"],
        git_dir=git_dir,
    )  # fmt: skip
    if code != 0:
        # line counts need the blobs: a partial clone or a mirror without its large objects
        # still has every commit and path, so the summary goes on without the counts
        log.warning("git log --numstat failed in %s: commits indexed without line counts", git_dir)
        return {}
    stats: dict[str, dict[str, tuple[str, str]]] = {}
    for record in out.split("\x1e"):
        if not record.strip("\x00\n"):
            continue
        sha, _, rest = record.partition("\x00")  # -z: "<sha>\0\n<add>\t<del>\t<path>\0..."
        per: dict[str, tuple[str, str]] = {}
        for entry in rest.split("\x00"):
            parts = entry.strip("\n").split("\t")
            if len(parts) == 3:
                per[parts[2]] = (parts[0], parts[1])
        stats[sha.strip()] = per
    return stats


def _item(c: Commit, stat: Mapping[str, tuple[str, str]], web: str | None) -> Item:
    subject = c.message.strip().partition("\n")[0]
    when = datetime.fromtimestamp(c.timestamp, UTC).isoformat()
    lines = []
    for status, path in c.changes[:MAX_DIFF_FILES]:
        counts = stat.get(path)
        shown = f" (+{counts[0]} -{counts[1]})" if counts else ""
        lines.append(f"  {_STATUS.get(status, status)} {path}{shown}")
    if len(c.changes) > MAX_DIFF_FILES:
        lines.append(f"  ... and {len(c.changes) - MAX_DIFF_FILES} more files")
    text = (
        f"{c.message.strip()}\n\nAuthor: {c.author} <{c.email}>\nDate: {when}\n"
        f"Changed files ({len(c.changes)}):\n" + "\n".join(lines)
    )
    return Item(
        id=c.sha,
        kind="commit",
        title=subject.strip(),
        text=text,
        date=float(c.timestamp),
        url=f"{web}/commit/{c.sha}" if web else None,
        author=c.author,
        paths=tuple(p for _, p in c.changes),
        attribution={"commit": c.sha, "short": c.sha[:10]},
        language="",
        group="",
    )


_STATUS_OF = {word: letter for letter, word in _STATUS.items()}
_AUTHOR_LINE = re.compile(r"^Author: .*<([^<>\n]*)>$", re.MULTILINE)


def stored_commit(item: Item) -> Commit | None:
    """The commit an item of this source was written from (:func:`_item`), read back from its
    text: the message, the author's email and each change's status. A commit of more than
    :data:`MAX_DIFF_FILES` files lists the first ones only: its other paths get the status
    ``?``, and it is None when one of them is a source file (the status that decides whether
    a source file is a question's answer would be a guess)."""
    if item.kind != "commit" or item.date is None:
        return None
    message, sep, trailer = item.text.rpartition("\n\nAuthor: ")
    if not sep:
        return None
    m = _AUTHOR_LINE.search("Author: " + trailer)
    email = m.group(1) if m else ""
    listed: dict[str, str] = {}
    _, _, files = trailer.partition("\nChanged files (")
    for line in files.splitlines()[1:]:
        word, _, rest = line.strip().partition(" ")
        if word == "type" and rest.startswith("changed "):
            word, rest = "type changed", rest[len("changed ") :]
        letter = _STATUS_OF.get(word)
        if letter is None:
            continue
        path = re.sub(r" \(\+\S+ -\S+\)$", "", rest)
        listed[path] = letter
    changes = tuple((listed.get(p, "?"), p) for p in item.paths)
    if any(st == "?" and path_role(p) == "source" for st, p in changes):
        return None
    return Commit(item.id, int(item.date), item.author, email, message, changes)


def stored_commits(store: BaseItemStore, n: int) -> list[Commit]:
    """The ``n`` newest commits of a ``commits`` source's store, newest first (what ``git log``
    of the synced ``HEAD`` lists, read from the index: a machine without the clone, such as a
    PostgreSQL node, can mine its history questions)."""
    out = [stored_commit(it) for it in store.newest_items(n)]
    return [c for c in out if c is not None]


def store_commits(
    store: BaseItemStore,
    commits: Sequence[Commit],
    stats: Mapping[str, Mapping[str, tuple[str, str]]] | None = None,
    web: str | None = None,
) -> int:
    """Write ``commits`` as items of ``store`` (in batches); ``stats`` gives each commit's line
    counts by path (:func:`numstat`). Returns how many were written. The sync uses it, and so
    does the git evaluation to build a history that ends before its questions."""
    added = 0
    for i in range(0, len(commits), _BATCH):
        batch = commits[i : i + _BATCH]
        added += store.upsert(_item(c, (stats or {}).get(c.sha, {}), web) for c in batch)
    return added


class CommitsSource(StoredSource):
    """Commits of the repository's ``HEAD`` history, searched with BM25."""

    name = "commits"

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context, SourceSettings(enabled=False, weight=0.1))

    def _git_dir(self) -> Path:
        gd = git_dir_of(self.context.root)
        if gd is None:
            raise InputError(f"{self.context.root} is not a git work tree (the commits source)")
        return gd

    def sync(self) -> SyncReport:
        t0 = time.perf_counter()
        report = SyncReport(self.name)
        git_dir = self._git_dir()
        code, out = _run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], git_dir=git_dir)
        head = out.strip() if code == 0 else ""
        store = self.store
        last = store.get_meta("last_commit")
        if not head:  # a repository without commits
            report.total = store.count()
            return report
        revs: list[str]
        if last == head:
            revs = []
        elif last and _run(["merge-base", "--is-ancestor", last, head], git_dir=git_dir)[0] == 0:
            revs = [f"{last}..{head}"]
        else:
            if last:
                store.clear()
                report.resynced = True
            limit = int(self.settings.options.get("max_commits", MAX_COMMITS_DEFAULT))
            revs = [f"--max-count={limit}", head]
        if revs:
            commits = read_log(git_dir, *revs)
            report.added += store_commits(
                store, commits, numstat(git_dir, revs), github_web_url(git_dir)
            )
            store.set_meta("last_commit", head)
            store.set_meta("last_commit_date", str(commits[0].timestamp) if commits else None)
        store.set_meta("last_sync", str(time.time()))
        report.cursor = head
        report.total = store.count()
        report.seconds = time.perf_counter() - t0
        return report

    async def health_check(self) -> bool:
        return git_dir_of(self.context.root) is not None

    def freshness(self) -> dict[str, object]:
        last_sync = self.store.get_meta("last_sync")
        return {
            "items": self.store.count(),
            "last_commit": self.store.get_meta("last_commit"),
            "newest_commit_date": self.store.newest(),
            "last_sync": float(last_sync) if last_sync else None,
        }
