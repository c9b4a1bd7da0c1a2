"""The GitHub client and the issues / prs sources against a real HTTP server on loopback that
serves API-shaped responses: a full sync over several pages (``Link: rel="next"``), an
incremental sync with ``since``, a 403 rate limit honoured until its reset (fake clock), a
``Retry-After``, a wait beyond the cap, a 500 reported without losing what was synced, pull
request files, and the offline ``gh`` export."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from ragloom.sources.base import RetrieveOptions, SourceContext, SourceQuery, SourceSettings
from ragloom.sources.github import GitHubClient
from ragloom.sources.issues import IssuesSource, PrsSource
from tests.sources_fixture import FakeGitHub, Reply, issue_api, serve_github, write_exports

REPO = "acme/widget"
BASE = f"/repos/{REPO}"
PER_PAGE = 2


class Clock:
    """A fake clock: ``sleep`` moves it forward and records the wait."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _ts(day: int) -> str:
    return f"2024-03-{day:02d}T10:00:00Z"


TITLES = [
    "Crash when the config file is empty",
    "Slow startup on large repositories",
    "Add a dark theme",
    "Retry uploads on network errors",
    "Support proxies from the environment",
    "Unicode paths break the walker",
]


class Tracker:
    """The server side: issues (some pull requests) with update times, paged and filtered by
    ``since`` like GitHub does."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = [
            issue_api(i + 1, t, _ts(i + 1), pr=(i + 1) % 3 == 0, body=f"Body of item {i + 1}.")
            for i, t in enumerate(TITLES)
        ]
        self.fail_page: int | None = None
        self.comments = [
            {
                "id": 901,
                "issue_url": f"https://api.github.com{BASE}/issues/2",
                "user": {"login": "dave"},
                "created_at": _ts(2),
                "updated_at": _ts(2),
                "body": "Profiling shows the tokenizer warm-up dominates.",
            }
        ]

    def issues(self, q: dict[str, str]) -> Reply:
        page = int(q.get("page", "1"))
        if self.fail_page == page:
            return Reply(500, {"message": "Server Error"})
        since = q.get("since", "")
        rows = sorted(
            (it for it in self.items if it["updated_at"] >= since), key=lambda i: i["updated_at"]
        )
        per = int(q.get("per_page", "30"))
        chunk = rows[(page - 1) * per : page * per]
        headers = {}
        if page * per < len(rows):
            nxt = urlencode({**q, "page": str(page + 1)})
            headers["Link"] = f'<{{base}}{BASE}/issues?{nxt}>; rel="next", <x>; rel="last"'
        return Reply(200, chunk, headers)

    def comment_list(self, q: dict[str, str]) -> Reply:
        since = q.get("since", "")
        return Reply(200, [c for c in self.comments if c["updated_at"] >= since])


@pytest.fixture
def server() -> Iterator[tuple[FakeGitHub, Tracker]]:
    tracker = Tracker()
    fake = FakeGitHub(
        routes={
            f"{BASE}/issues": tracker.issues,
            f"{BASE}/issues/comments": tracker.comment_list,
            f"{BASE}/pulls/3/files": [
                Reply(200, [{"filename": "src/theme.css", "additions": 40, "deletions": 2}])
            ],
            f"{BASE}/pulls/6/files": [
                Reply(200, [{"filename": "src/walker.py", "additions": 3, "deletions": 1}])
            ],
        }
    )
    yield from ((f, tracker) for f in serve_github(fake))


def _source(cls: type[IssuesSource], tmp: Path, url: str, clock: Clock) -> IssuesSource:
    src = cls(SourceContext(tmp, tmp / ".ragloom"))
    src.initialize(SourceSettings(options={"github": REPO}))
    src.client_factory = lambda repo: GitHubClient(
        repo,
        token="test-token",
        api_url=url,
        clock=clock.time,
        sleep=clock.sleep,
        per_page=PER_PAGE,
        max_wait_s=600,
    )
    return src


def _ids(src: IssuesSource, text: str) -> list[str]:
    hits = asyncio.run(src.retrieve(SourceQuery(text), RetrieveOptions(top_k=3)))
    return [h.id for h in hits]


def test_full_then_incremental_sync(tmp_path: Path, server: tuple[FakeGitHub, Tracker]) -> None:
    fake, tracker = server
    clock = Clock()
    src = _source(IssuesSource, tmp_path, fake.url, clock)
    rep = src.sync()
    assert rep.status == "ok", rep.error
    assert rep.total == 4  # 6 items, 2 of them pull requests
    pages = [q for p, q, _ in fake.requests if p == f"{BASE}/issues"]
    assert len(pages) == 3, "three pages through Link: rel=next"
    assert pages[0] == {"state": "all", "sort": "updated", "direction": "asc", "per_page": "2"}
    assert [q.get("page") for q in pages] == [None, "2", "3"]
    assert all(h.get("Authorization") == "Bearer test-token" for _, _, h in fake.requests)
    assert rep.cursor == _ts(6)

    (hit,) = asyncio.run(src.retrieve(SourceQuery("slow startup"), RetrieveOptions(top_k=1)))
    assert hit.id == "2" and hit.attribution == {"issue": 2, "state": "open"}
    assert hit.url == "https://github.com/acme/widget/issues/2"
    assert "tokenizer warm-up" in hit.text, "comments are part of the item"
    assert "Labels: bug" in hit.text and hit.date is not None

    # incremental: one issue edited, one new; the client asks with since=<cursor>
    fake.requests.clear()
    tracker.items[0] = issue_api(1, "Crash when the config file is empty or missing", _ts(20))
    tracker.items.append(issue_api(7, "Colour output on Windows terminals", _ts(21)))
    inc = src.sync()
    assert inc.status == "ok"
    sinces = {q.get("since") for p, q, _ in fake.requests if p == f"{BASE}/issues"}
    assert sinces == {_ts(6)}
    assert inc.added == 2 and inc.total == 5
    assert _ids(src, "colour windows terminals")[:1] == ["7"]
    assert (
        "missing"
        in asyncio.run(src.retrieve(SourceQuery("config file empty"), RetrieveOptions(top_k=1)))[
            0
        ].title
    )
    fresh = src.freshness()
    assert fresh["cursor"] == _ts(21) and fresh["items"] == 5
    assert fresh["last_update"] == _ts(21)


def test_rate_limit_reset_is_honoured(tmp_path: Path, server: tuple[FakeGitHub, Tracker]) -> None:
    fake, tracker = server
    clock = Clock()
    reset = int(clock.now) + 30
    limited = Reply(
        403,
        {"message": "API rate limit exceeded"},
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
    )
    fake.routes[f"{BASE}/issues"] = [limited, tracker.issues({"per_page": "100"})]
    src = _source(IssuesSource, tmp_path, fake.url, clock)
    rep = src.sync()
    assert rep.status == "ok", rep.error
    assert clock.sleeps == [31.0], "waited until the reset (plus a second)"
    assert rep.total == 4


def test_retry_after_and_the_wait_cap(tmp_path: Path, server: tuple[FakeGitHub, Tracker]) -> None:
    fake, _ = server
    clock = Clock()
    fake.routes[f"{BASE}/issues/comments"] = [
        Reply(429, {"message": "secondary"}, {"Retry-After": "7"}),
        Reply(200, []),
    ]
    src = _source(IssuesSource, tmp_path, fake.url, clock)
    assert src.sync().status == "ok"
    assert clock.sleeps == [7.0]

    far = Reply(403, {}, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(10**10)})
    fake.routes[f"{BASE}/issues/comments"] = [far]
    capped = src.sync()
    assert capped.status == "error" and "rate limit" in (capped.error or "")
    assert capped.total == 4, "nothing lost"


def test_server_error_keeps_what_was_synced(
    tmp_path: Path, server: tuple[FakeGitHub, Tracker]
) -> None:
    fake, tracker = server
    clock = Clock()
    tracker.fail_page = 2
    src = _source(IssuesSource, tmp_path, fake.url, clock)
    rep = src.sync()
    assert rep.status == "error" and "500" in (rep.error or "")
    assert rep.total == 2 and rep.cursor == _ts(2), "page 1 is stored and the cursor after it"
    assert clock.sleeps == [2.0], "one retry of the 5xx, then reported"
    assert _ids(src, "slow startup") == ["2"]

    tracker.fail_page = None
    again = src.sync()
    assert again.status == "ok" and again.total == 4
    assert {q.get("since") for p, q, _ in fake.requests[-3:] if p == f"{BASE}/issues"} == {_ts(2)}


def test_pull_requests_with_files(tmp_path: Path, server: tuple[FakeGitHub, Tracker]) -> None:
    fake, _ = server
    src = _source(PrsSource, tmp_path, fake.url, Clock())
    rep = src.sync()
    assert rep.status == "ok" and rep.total == 2
    (hit,) = asyncio.run(src.retrieve(SourceQuery("dark theme"), RetrieveOptions(top_k=1)))
    assert hit.attribution["pr"] == 3 and hit.paths == ("src/theme.css",)
    assert "src/theme.css (+40 -2)" in hit.text
    assert hit.url == "https://github.com/acme/widget/pull/3"


def test_offline_gh_exports(tmp_path: Path) -> None:
    issues, prs = write_exports(tmp_path / "exports")
    ctx = SourceContext(tmp_path, tmp_path / ".ragloom")
    src = IssuesSource(ctx)
    src.initialize(SourceSettings(options={"issues_json": str(issues)}))
    assert src.sync().total == 2
    (hit,) = asyncio.run(src.retrieve(SourceQuery("upload hangs"), RetrieveOptions(top_k=1)))
    assert hit.id == "12" and "retry with backoff" in hit.text and hit.author == ""
    assert src.freshness()["last_update"] == "2024-02-07T10:00:00Z"
    pr = PrsSource(ctx)
    pr.initialize(SourceSettings(options={"prs_json": str(prs)}))
    assert pr.sync().total == 1
    (p,) = asyncio.run(pr.retrieve(SourceQuery("retry uploads"), RetrieveOptions(top_k=1)))
    assert p.paths == ("pkg/upload.py",) and p.attribution["pr"] == 13
