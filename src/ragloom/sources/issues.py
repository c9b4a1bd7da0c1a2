"""The ``issues`` and ``prs`` sources: GitHub issues and pull requests, searched with BM25.

Each item is one issue or pull request: title, state, labels, author, dates, body, comments
(each cut to :data:`~ragloom.sources.github.MAX_COMMENT_CHARS`) and, for a pull request, the
files it changed. Its date is the last update (recency favours live discussions) and its URL
the issue's page.

Items come from the GitHub REST API (option ``github: OWNER/NAME``, token from
``GITHUB_TOKEN``), incrementally: the cursor is the ``updated_at`` of the last item of the last
page stored, pages are asked oldest update first with ``since=<cursor>``, and the cursor moves
after every page, so an error (a 500, a rate limit beyond the wait cap) stops the sync with
everything before it kept and the next sync resumes there. Or they come from a ``gh`` JSON
export (options ``issues_json`` / ``prs_json``), offline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragloom.sources.base import (
    SourceContext,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.github import (
    MAX_COMMENT_CHARS,
    GitHubClient,
    GitHubError,
    Record,
    load_gh_export,
    parse_time,
    record_from_api,
)
from ragloom.sources.itemstore import Item, StoredSource

__all__ = ["IssuesSource", "PrsSource"]

MAX_COMMENTS = 20
"""Comments kept per item (the newest)."""
MAX_BODY_CHARS = 8000

ClientFactory = Callable[[str], GitHubClient]


def _iso(epoch: float | None) -> str:
    return "" if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


class _GitHubItems(StoredSource):
    """What issues and pull requests share; subclasses set ``name`` and ``prs``."""

    name = "issues"
    prs = False
    noun = "Issue"

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context, SourceSettings(weight=0.2))
        self.client_factory: ClientFactory | None = None
        """Makes the API client for a repository (tests inject a fake clock and a local URL)."""

    # -- items --------------------------------------------------------------------------
    def _item(self, r: Record) -> Item:
        key = "pr" if self.prs else "issue"
        head = f"{self.noun} #{r.number}: {r.title}\nState: {r.state}"
        if r.labels:
            head += f"  Labels: {', '.join(r.labels)}"
        head += f"\nAuthor: {r.author or '?'}  Created: {r.created}  Updated: {r.updated}"
        parts = [head, r.body[:MAX_BODY_CHARS].strip()]
        if r.files:
            parts.append("Files:\n" + "\n".join(f"  {p} (+{a} -{d})" for p, a, d in r.files[:50]))
        if r.comments:
            parts.append(
                "Comments:\n"
                + "\n".join(
                    f"- {who or '?'} ({when}): {body[:MAX_COMMENT_CHARS].strip()}"
                    for who, when, body in r.comments[-MAX_COMMENTS:]
                )
            )
        return Item(
            id=str(r.number),
            kind="pull_request" if self.prs else "issue",
            title=r.title,
            text="\n\n".join(p for p in parts if p),
            date=parse_time(r.updated) or parse_time(r.created),
            url=r.url or None,
            author=r.author,
            paths=tuple(p for p, _, _ in r.files),
            attribution={key: r.number, "state": r.state},
            language="",
            group="",
        )

    def _write(self, records: Sequence[Record]) -> int:
        n = self.store.upsert(self._item(r) for r in records)
        newest = max((r.updated for r in records if r.updated), default=None)
        old = self.store.get_meta("last_update")
        if newest and (old is None or newest > old):
            self.store.set_meta("last_update", newest)
        return n

    # -- sync ---------------------------------------------------------------------------
    def _client(self, repo: str) -> GitHubClient:
        if self.client_factory is not None:
            return self.client_factory(repo)
        api = self.settings.options.get("api_url")
        return GitHubClient(repo, api_url=str(api) if api else None)

    def _comments(self, client: GitHubClient, since: str | None) -> None:
        """Merge comments updated since the cursor into the stored ones (by comment id)."""
        fresh: dict[int, dict[str, list[Any]]] = {}
        for page in client.comment_pages(since):
            for c in page:
                url = str(c.get("issue_url") or "")
                tail = url.rstrip("/").rsplit("/", 1)[-1]
                if not tail.isdigit():
                    continue
                user = c.get("user") or {}
                fresh.setdefault(int(tail), {})[str(c.get("id"))] = [
                    str(user.get("login") or "") if isinstance(user, dict) else "",
                    str(c.get("created_at") or ""),
                    str(c.get("body") or "")[:MAX_COMMENT_CHARS],
                ]
        for number, by_id in fresh.items():
            key = f"comments:{number}"
            raw = self.store.get_meta(key)
            stored: dict[str, list[Any]] = json.loads(raw) if raw else {}
            stored.update(by_id)
            self.store.set_meta(key, json.dumps(stored))

    def _stored_comments(self, number: int) -> list[tuple[str, str, str]]:
        raw = self.store.get_meta(f"comments:{number}")
        if not raw:
            return []
        vals = sorted(json.loads(raw).values(), key=lambda v: str(v[1]))
        return [(str(a), str(w), str(b)) for a, w, b in vals]

    def sync(self) -> SyncReport:
        t0 = time.perf_counter()
        report = SyncReport(self.name)
        opts = self.settings.options
        export = opts.get("prs_json" if self.prs else "issues_json")
        if export:
            records = load_gh_export(Path(str(export)), prs=self.prs)
            report.added += self._write(records)
        repo = opts.get("github")
        if repo:
            client = self._client(str(repo))
            since = self.store.get_meta("since")
            try:
                self._comments(client, since)
                for page in client.issue_pages(since):
                    records = [record_from_api(o) for o in page]
                    mine = [r for r in records if r.is_pr == self.prs]
                    for r in mine:
                        r.comments = self._stored_comments(r.number)
                        if self.prs:
                            r.files = client.pull_files(r.number)
                    report.added += self._write(mine)
                    if records:
                        # only after the page is stored: a failure later resumes here
                        self.store.set_meta("since", max(r.updated for r in records))
            except GitHubError as exc:
                report.status = "error"
                report.error = str(exc)
            finally:
                client.close()
            report.cursor = self.store.get_meta("since")
        self.store.set_meta("last_sync", str(time.time()))
        report.total = self.store.count()
        report.seconds = time.perf_counter() - t0
        return report

    # -- the contract -------------------------------------------------------------------
    async def health_check(self) -> bool:
        return self.has_store()

    def freshness(self) -> dict[str, object]:
        last_sync = self.store.get_meta("last_sync")
        return {
            "items": self.store.count(),
            "last_update": self.store.get_meta("last_update"),
            "cursor": self.store.get_meta("since"),
            "newest_item_date": _iso(self.store.newest()) or None,
            "last_sync": float(last_sync) if last_sync else None,
        }


class IssuesSource(_GitHubItems):
    """GitHub issues (pull requests excluded)."""

    name = "issues"
    prs = False
    noun = "Issue"


class PrsSource(_GitHubItems):
    """GitHub pull requests, with the files each one changed."""

    name = "prs"
    prs = True
    noun = "Pull request"

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context)
        self.settings = SourceSettings(enabled=False, weight=0.2)
