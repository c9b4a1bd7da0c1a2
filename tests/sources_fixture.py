"""Helpers for the retrieval-source tests: throwaway git repositories and a GitHub-shaped
HTTP server on loopback (a real ``http.server`` in a thread, serving recorded responses)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Alice Example",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Alice Example",
    "GIT_COMMITTER_EMAIL": "alice@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ENV)
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def commit(
    repo: Path, files: dict[str, str], message: str, *, date: str = "2024-01-01T12:00:00Z"
) -> str:
    """Write ``files`` (a None-free mapping path -> text), commit them, return the hash."""
    for rel, text in files.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path) -> Path:
    """A small repository: code, a Markdown guide, an rST page and three commits."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    commit(
        path,
        {
            ".gitignore": ".ragloom/\n",
            "pkg/http.py": 'def parse_header(line):\n    """Split one HTTP header line."""\n'
            '    return line.split(":", 1)\n',
            "docs/guide.md": "# Guide\n\nIntro.\n\n## Install\n\nUse pip to install the "
            "package.\n\n### From source\n\nClone the repository and build the wheel.\n",
        },
        "Add the HTTP header parser",
        date="2024-01-01T12:00:00Z",
    )
    commit(
        path,
        {"pkg/upload.py": "def upload(blob, retries=3):\n    return send(blob)\n"},
        "Retry failed uploads with exponential backoff",
        date="2024-02-01T12:00:00Z",
    )
    commit(
        path,
        {
            "docs/api.rst": "API\n===\n\nThe public API.\n\nSessions\n--------\n\nA session "
            "keeps cookies between requests.\n",
        },
        "Document the session API",
        date="2024-03-01T12:00:00Z",
    )
    return path


ISSUES_EXPORT = [
    {
        "number": 12,
        "title": "Upload hangs on flaky networks",
        "body": "Uploading a large blob never finishes when the network drops packets.",
        "labels": [{"id": "L1", "name": "bug", "description": "", "color": "d73a4a"}],
        "state": "OPEN",
        "createdAt": "2024-01-05T10:00:00Z",
        "updatedAt": "2024-01-06T10:00:00Z",
        "url": "https://github.com/acme/widget/issues/12",
        "comments": [
            {
                "id": "C1",
                "author": {"login": "bob"},
                "authorAssociation": "MEMBER",
                "body": "A retry with backoff would fix it.",
                "createdAt": "2024-01-06T10:00:00Z",
            }
        ],
    },
    {
        "number": 15,
        "title": "Header parser drops empty values",
        "body": "parse_header loses the value of `X-Empty:`.",
        "labels": [],
        "state": "CLOSED",
        "createdAt": "2024-02-05T10:00:00Z",
        "updatedAt": "2024-02-07T10:00:00Z",
        "url": "https://github.com/acme/widget/issues/15",
        "comments": [],
    },
]
PRS_EXPORT = [
    {
        "number": 13,
        "title": "Retry uploads with exponential backoff",
        "body": "Fixes #12.",
        "labels": [],
        "state": "MERGED",
        "createdAt": "2024-01-20T10:00:00Z",
        "updatedAt": "2024-02-01T12:00:00Z",
        "url": "https://github.com/acme/widget/pull/13",
        "comments": [],
        "files": [{"path": "pkg/upload.py", "additions": 2, "deletions": 0}],
    }
]


def write_exports(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    issues = folder / "issues.json"
    prs = folder / "prs.json"
    issues.write_text(json.dumps(ISSUES_EXPORT), encoding="utf-8")
    prs.write_text(json.dumps(PRS_EXPORT), encoding="utf-8")
    return issues, prs


# --- a GitHub-shaped server ------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeGitHub:
    """Routes ``path`` -> a function of the query parameters returning a Reply (or a list of
    Replies consumed one per request, the last one repeating). Every request is recorded."""

    routes: dict[str, Callable[[dict[str, str]], Reply] | list[Reply]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def reply(self, path: str, query: dict[str, str]) -> Reply:
        route = self.routes.get(path)
        if route is None:
            return Reply(404, {"message": "Not Found"})
        if isinstance(route, list):
            return route.pop(0) if len(route) > 1 else route[0]
        return route(query)


def issue_api(
    number: int, title: str, updated: str, *, pr: bool = False, body: str = ""
) -> dict[str, Any]:
    """One element of ``GET /repos/{o}/{r}/issues`` as GitHub returns it."""
    obj: dict[str, Any] = {
        "number": number,
        "title": title,
        "body": body,
        "state": "open",
        "html_url": f"https://github.com/acme/widget/{'pull' if pr else 'issues'}/{number}",
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": updated,
        "user": {"login": "carol"},
        "labels": [{"name": "bug"}],
    }
    if pr:
        obj["pull_request"] = {"url": f"https://api.github.com/repos/acme/widget/pulls/{number}"}
    return obj


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (BrokenPipeError, ConnectionResetError) is the client's
        # business: the default prints a traceback to sys.stderr, which is whatever the code
        # under test is capturing then (a CliRunner's output), so a test server never prints.
        pass


def serve_github(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    """Run ``fake`` on 127.0.0.1 (a free port) for the duration of a ``yield``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parsed = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
            fake.requests.append((parsed.path, query, dict(self.headers.items())))
            rep = fake.reply(parsed.path, query)
            data = json.dumps(rep.body).encode()
            self.send_response(rep.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in rep.headers.items():
                self.send_header(k, v.replace("{base}", fake.url))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    server = _QuietServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
