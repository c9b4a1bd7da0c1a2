"""A small GitHub REST client for issues and pull requests, and the ``gh`` JSON export reader.

Only what the ``issues`` and ``prs`` sources need: the repository's issues (pull requests come
through the same endpoint, marked with ``pull_request``) updated since a time, the repository's
issue comments since a time, and a pull request's files. Pages follow the ``Link: <...>;
rel="next"`` header. Rate limits are honoured: a 403 or 429 with ``Retry-After`` waits that many
seconds; one with ``X-RateLimit-Remaining: 0`` waits until ``X-RateLimit-Reset``; a wait longer
than ``max_wait_s`` raises :class:`RateLimitError` instead (the sync reports it and keeps what it
has). The clock and the sleep are injectable, so tests run the real client against a loopback
server with a fake clock. A 5xx is retried ``server_retries`` times, then raised.

The token comes from ``GITHUB_TOKEN`` (or ``GH_TOKEN``); without one the client works against
public repositories with GitHub's lower anonymous limit.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from ragloom.errors import InputError, RagError

__all__ = [
    "DEFAULT_API_URL",
    "GitHubClient",
    "GitHubError",
    "RateLimitError",
    "Record",
    "load_gh_export",
    "parse_time",
    "record_from_api",
]

DEFAULT_API_URL = "https://api.github.com"
MAX_WAIT_S_DEFAULT = 120.0
"""The longest rate-limit wait the client sits through; beyond it the sync stops and reports."""
MAX_COMMENT_CHARS = 1500
"""Characters kept of each comment body (an item is for retrieval, not an archive)."""


class GitHubError(RagError):
    """The GitHub API answered with an error (or not at all)."""

    exit_code = 17


class RateLimitError(GitHubError):
    """The rate limit would need a longer wait than allowed."""


def parse_time(value: str | None) -> float | None:
    """ISO 8601 (``2024-01-02T03:04:05Z``) -> epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass(slots=True)
class Record:
    """An issue or pull request, the same from the API and from a ``gh`` export."""

    number: int
    title: str
    body: str
    state: str
    url: str
    created: str
    updated: str
    author: str = ""
    labels: list[str] = field(default_factory=list)
    comments: list[tuple[str, str, str]] = field(default_factory=list)
    """``(author, created, body)`` per comment, oldest first."""
    files: list[tuple[str, int, int]] = field(default_factory=list)
    """``(path, additions, deletions)`` per file of a pull request."""
    is_pr: bool = False


def record_from_api(obj: Mapping[str, Any]) -> Record:
    """A record from one element of ``GET /repos/{owner}/{repo}/issues``."""
    user = obj.get("user") or {}
    return Record(
        number=int(obj["number"]),
        title=str(obj.get("title") or ""),
        body=str(obj.get("body") or ""),
        state=str(obj.get("state") or ""),
        url=str(obj.get("html_url") or ""),
        created=str(obj.get("created_at") or ""),
        updated=str(obj.get("updated_at") or ""),
        author=str(user.get("login") or "") if isinstance(user, Mapping) else "",
        labels=[
            str(lb.get("name") if isinstance(lb, Mapping) else lb) for lb in obj.get("labels") or []
        ],
        is_pr="pull_request" in obj,
    )


def load_gh_export(path: Path, *, prs: bool) -> list[Record]:
    """Records from ``gh issue list --json number,title,body,labels,state,createdAt,updatedAt,
    url,comments`` (or ``gh pr list --json ...,files``) output. Every field is checked: a value
    of the wrong type, a time that is not ISO 8601, a number that is not a positive integer or
    that appears twice is an :class:`InputError` naming the element and the field (the sync
    reports it, and nothing of the export is stored), never a crash."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the gh export {path}: {exc}") from exc
    if not isinstance(data, list):
        raise InputError(f"{path}: a gh export is a JSON list, got {type(data).__name__}")
    for obj in data:
        if not isinstance(obj, dict) or "number" not in obj:
            raise InputError(f"{path}: every element needs a number: {str(obj)[:80]}")
    records = [
        _export_record(obj, prs, _ExportField(path, i, obj["number"])) for i, obj in enumerate(data)
    ]
    twice = [n for n, count in Counter(r.number for r in records).items() if count > 1]
    if twice:
        raise InputError(f"{path}: number {twice[0]} appears more than once")
    return records


@dataclass(frozen=True, slots=True)
class _ExportField:
    """Where a value of a gh export sits, for the error that names it."""

    path: Path
    index: int
    number: object

    def error(self, name: str, value: object, want: str) -> InputError:
        return InputError(
            f"{self.path}: element {self.index} (number {self.number!r}): {name} {value!r:.60} "
            f"is not {want}"
        )

    def text(self, obj: Mapping[str, Any], name: str) -> str:
        value = obj.get(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(name, value, "a string")
        return value

    def time(self, obj: Mapping[str, Any], name: str) -> str:
        value = self.text(obj, name)
        try:
            parse_time(value)
        except (ValueError, OverflowError):
            raise self.error(name, value, "an ISO 8601 time (2024-01-02T03:04:05Z)") from None
        return value

    def count(self, value: object, name: str, *, positive: bool = False) -> int:
        if value is None and not positive:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < int(positive):
            want = "a positive integer" if positive else "an integer of 0 or more"
            raise self.error(name, value, want)
        return value

    def items(self, obj: Mapping[str, Any], name: str) -> list[Any]:
        value = obj.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(name, value, "a list")
        return value

    def login(self, value: object, name: str) -> str:
        """gh writes an author as ``{"login": ...}``; a plain name is taken as the login."""
        if value is None or isinstance(value, str):
            return value or ""
        if isinstance(value, dict):
            return self.text(value, "login")
        raise self.error(name, value, 'an author ({"login": ...})')


def _export_record(obj: Mapping[str, Any], prs: bool, at: _ExportField) -> Record:
    comments = []
    for c in at.items(obj, "comments"):
        if not isinstance(c, dict):
            raise at.error("a comment", c, "an object")
        comments.append(
            (
                at.login(c.get("author"), "a comment's author"),
                at.time(c, "createdAt"),
                at.text(c, "body"),
            )
        )
    files = []
    for f in at.items(obj, "files"):
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not f["path"]:
            raise at.error("a file", f, 'an object with a "path"')
        files.append(
            (
                f["path"],
                at.count(f.get("additions"), "additions"),
                at.count(f.get("deletions"), "deletions"),
            )
        )
    labels = []
    for lb in at.items(obj, "labels"):
        name = lb.get("name") if isinstance(lb, dict) else lb
        if not isinstance(name, str):
            raise at.error("a label", lb, 'a name or {"name": ...}')
        labels.append(name)
    created = at.time(obj, "createdAt")
    return Record(
        number=at.count(obj.get("number"), "number", positive=True),
        title=at.text(obj, "title"),
        body=at.text(obj, "body"),
        state=at.text(obj, "state").lower(),
        url=at.text(obj, "url"),
        created=created,
        updated=at.time(obj, "updatedAt") or created,
        author=at.login(obj.get("author"), "author"),
        labels=labels,
        comments=comments,
        files=files,
        is_pr=prs,
    )


def _next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header."""
    if not header:
        return None
    for part in header.split(","):
        segs = part.split(";")
        if len(segs) < 2:
            continue
        url = segs[0].strip()
        if any(s.strip() in ('rel="next"', "rel=next") for s in segs[1:]):
            return url.strip("<>")
    return None


class GitHubClient:
    """Issues, comments and pull-request files of one repository ``owner/name``."""

    def __init__(
        self,
        repo: str,
        *,
        token: str | None = None,
        api_url: str | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_s: float = MAX_WAIT_S_DEFAULT,
        server_retries: int = 1,
        per_page: int = 100,
        timeout_s: float = 30.0,
    ) -> None:
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise InputError(f"a GitHub repository is OWNER/NAME, got {repo!r}")
        self.repo = repo
        self.api_url = (api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
        token = (
            token
            if token is not None
            else (os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN"))
        )
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "ragloom",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(headers=headers, timeout=timeout_s, follow_redirects=True)
        self.clock = clock
        self.sleep = sleep
        self.max_wait_s = max_wait_s
        self.server_retries = server_retries
        self.per_page = per_page
        self.requests = 0
        self.waited_s = 0.0

    def close(self) -> None:
        self._http.close()

    # -- transport ----------------------------------------------------------------------
    def _wait_for(self, resp: httpx.Response) -> float | None:
        """Seconds to wait before retrying a rate-limited answer (None: not a rate limit)."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = resp.headers.get("Retry-After")
        if retry_after is not None:
            try:
                return max(float(retry_after), 0.0)
            except ValueError:
                pass
        remaining = resp.headers.get("X-RateLimit-Remaining")
        reset = resp.headers.get("X-RateLimit-Reset")
        if remaining == "0" and reset is not None:
            try:
                return max(float(reset) - self.clock(), 0.0) + 1.0
            except ValueError:
                return None
        if resp.status_code == 429:
            return 60.0  # GitHub's advice for a secondary limit without a header
        return None

    def get(self, url: str, params: Mapping[str, str] | None = None) -> httpx.Response:
        """GET with rate-limit waits and 5xx retries; raises GitHubError on any other error."""
        server_failures = 0
        while True:
            self.requests += 1
            try:
                resp = self._http.get(url, params=params)
            except httpx.HTTPError as exc:
                raise GitHubError(f"GitHub request {url} failed: {exc}") from exc
            if resp.status_code < 300:
                return resp
            wait = self._wait_for(resp)
            if wait is not None:
                if wait > self.max_wait_s:
                    raise RateLimitError(
                        f"GitHub rate limit: the reset is {wait:.0f} s away "
                        f"(more than the {self.max_wait_s:.0f} s the client waits)"
                    )
                self.waited_s += wait
                self.sleep(wait)
                continue
            if resp.status_code >= 500 and server_failures < self.server_retries:
                server_failures += 1
                self.sleep(min(2.0**server_failures, 10.0))
                continue
            raise GitHubError(
                f"GitHub answered {resp.status_code} for {url}: {resp.text[:200].strip()}"
            )

    def pages(self, path: str, params: Mapping[str, str]) -> Iterator[list[dict[str, Any]]]:
        """Each page of a list endpoint, following ``Link: rel="next"``."""
        url: str | None = f"{self.api_url}{path}"
        query: Mapping[str, str] | None = {**params, "per_page": str(self.per_page)}
        while url is not None:
            resp = self.get(url, query)
            data = resp.json()
            if not isinstance(data, list):
                raise GitHubError(f"GitHub answered a {type(data).__name__} for {url}, not a list")
            yield [d for d in data if isinstance(d, dict)]
            url = _next_link(resp.headers.get("Link"))
            query = None  # the next link carries every parameter

    # -- endpoints ----------------------------------------------------------------------
    def issue_pages(self, since: str | None) -> Iterator[list[dict[str, Any]]]:
        """Issues and pull requests updated at or after ``since``, oldest update first."""
        params = {"state": "all", "sort": "updated", "direction": "asc"}
        if since:
            params["since"] = since
        return self.pages(f"/repos/{self.repo}/issues", params)

    def comment_pages(self, since: str | None) -> Iterator[list[dict[str, Any]]]:
        """Issue and pull-request comments updated at or after ``since``."""
        params = {"sort": "updated", "direction": "asc"}
        if since:
            params["since"] = since
        return self.pages(f"/repos/{self.repo}/issues/comments", params)

    def pull_files(self, number: int) -> list[tuple[str, int, int]]:
        """``(path, additions, deletions)`` of a pull request's files."""
        out: list[tuple[str, int, int]] = []
        for page in self.pages(f"/repos/{self.repo}/pulls/{number}/files", {}):
            for f in page:
                if f.get("filename"):
                    out.append(
                        (str(f["filename"]), int(f.get("additions") or 0),
                         int(f.get("deletions") or 0))
                    )  # fmt: skip
        return out
