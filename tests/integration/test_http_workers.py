"""``ragloom serve http --workers N`` end to end (issue 25 item 2): real processes on a loopback
port, the hashing embedder. Connections are spread over the workers by the kernel, so each
test pins one keep-alive client to each worker (a new client until ``/status`` names the
worker wanted) and checks what crosses workers: re-index jobs, feedback, the primary's watcher.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import ragloom
from ragloom.bench.serving import cache_counters
from ragloom.embed.base import HashingEmbedder

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workers") / "repo"
    root.mkdir()
    shutil.copy(textwrap.__file__, root / "wrapping.py")
    (root / "colours.py").write_text(
        "def blend_colours(a, b):\n    return [(x + y) / 2 for x, y in zip(a, b)]\n"
    )
    with ragloom.Index(root, root / ".ragloom", embedder=HashingEmbedder(64)) as idx:
        idx.index(history=False)
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    env.update(extra)
    return env


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def status(self, client: httpx.Client) -> dict[str, Any]:
        resp = client.get("/status")
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body

    def pinned(self, index: int, tries: int = 60) -> httpx.Client:
        """A keep-alive client whose connection is served by worker ``index``."""
        for _ in range(tries):
            c = self.client()
            if self.status(c)["worker"]["index"] == index:
                return c
            c.close()
        raise AssertionError(f"no connection reached worker {index} in {tries} tries")


@contextmanager
def serving(repo: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragloom.cli", "serve", "http", str(repo), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield Server(proc, match.group(1))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


async def _cache_counters(url: str) -> dict[str, int]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        return await cache_counters(client)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop(server: Server) -> str:
    """SIGTERM; everything is stopped within a few seconds, gracefully (exit 0)."""
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    _, err = server.proc.communicate(timeout=20)
    assert server.proc.returncode == 0, err
    assert time.monotonic() - t0 < 15, err
    return err


def test_two_workers_share_the_load_jobs_and_feedback(repo: Path) -> None:
    with serving(repo, "--workers", "2", "--no-watch") as server:
        pids: set[int] = set()
        for _ in range(40):  # a new connection per request: the kernel spreads them
            with server.client() as c:
                st = server.status(c)
            assert st["workers"] == 2 and st["worker"]["index"] in (0, 1)
            pids.add(st["worker"]["pid"])
            if len(pids) == 2:
                break
        assert len(pids) == 2, pids
        a, b = server.pinned(0), server.pinned(1)
        with closing(a), closing(b):
            for c in (a, b):
                found = c.post("/search", json={"query": "blend colours"})
                assert found.status_code == 200, found.text
                assert any(h["path"] == "colours.py" for h in found.json()["hits"])
                ctx = c.post("/context", json={"query": "wrap text into lines"})
                assert ctx.status_code == 200 and "wrap" in ctx.json()["context"]
            assert "ragloom_workers 2.0" in a.get("/metrics").text
            # the serving bench sums every worker's answer-cache counters (one /context each)
            counted = asyncio.run(_cache_counters(server.url))
            assert counted["workers"] == counted["workers_seen"] == 2, counted
            assert counted["misses"] >= 2, counted

            # feedback on an answer of the other worker, at once
            answer = a.post("/search", json={"query": "blend colours"}).json()
            chunk = answer["hits"][0]["id"]
            rated = b.post(
                "/feedback",
                json={"query_id": answer["query_id"], "chunk_id": chunk, "rating": "helpful"},
            )
            assert rated.status_code == 201, rated.text
            assert rated.json()["in_results"] is True
            unknown = b.post(
                "/feedback", json={"query_id": "0" * 32, "chunk_id": chunk, "rating": "helpful"}
            )
            assert unknown.status_code == 404, unknown.text

            # a job started on one worker is visible, and running, from the other
            started = a.post("/index")
            assert started.status_code == 202, started.text
            job_id = started.json()["job_id"]
            again = b.post("/index").json()["job_id"]
            deadline = time.monotonic() + 60
            while True:
                job = b.get(f"/jobs/{job_id}")
                assert job.status_code == 200, job.text
                if job.json()["state"] in ("succeeded", "failed"):
                    break
                assert time.monotonic() < deadline, job.json()
                time.sleep(0.1)
            assert job.json()["state"] == "succeeded", job.json()
            # the second POST named the running job, or (it had finished) started its own
            assert again == job_id or b.get(f"/jobs/{again}").status_code == 200

            # a worker that dies is restarted
            victim = server.status(b)["worker"]["pid"]
            os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            with server.client() as c:
                st = server.status(c)
            if st["worker"]["index"] == 1 and st["worker"]["pid"] != victim:
                break
            assert time.monotonic() < deadline, "worker 1 was not restarted"
            time.sleep(0.05)
        with closing(server.pinned(0)) as c:
            pids = {st["worker"]["pid"], server.status(c)["worker"]["pid"]}
        err = _stop(server)
    assert "worker 1" in err and "restarting it" in err, err
    assert all(_gone(pid) for pid in pids | {victim})


def test_the_primary_watches_and_every_worker_sees_the_edit(repo: Path) -> None:
    probe = repo / "probe_edit.py"
    try:
        with serving(repo, "--workers", "2") as server:
            primary, other = server.pinned(0), server.pinned(1)
            with closing(primary), closing(other):
                deadline = time.monotonic() + 60
                while not server.status(primary)["watch"]["ready"]:
                    assert time.monotonic() < deadline, server.status(primary)["watch"]
                    time.sleep(0.05)
                assert server.status(other)["watch"]["watching"] is False
                probe.write_text("def zebra_quantum_marker(x):\n    return x * 7\n")
                for c in (primary, other):
                    deadline = time.monotonic() + 30
                    while True:
                        hits = c.post("/search", json={"query": "zebra_quantum_marker"}).json()
                        if any(h["path"] == "probe_edit.py" for h in hits["hits"]):
                            break
                        assert time.monotonic() < deadline, hits
                        time.sleep(0.05)
            _stop(server)
    finally:
        probe.unlink(missing_ok=True)


def test_one_worker_is_one_process(repo: Path) -> None:
    with serving(repo, "--workers", "1", "--no-watch") as server, server.client() as c:
        st = server.status(c)
        assert st["workers"] == 1
        assert st["worker"] == {"index": 0, "pid": server.proc.pid}
        assert c.post("/search", json={"query": "blend colours"}).status_code == 200
        _stop(server)


def test_a_worker_failing_at_start_stops_the_server(repo: Path) -> None:
    """The index's model is the hashing one; asking for another makes every worker fail while
    opening its engine: the command exits with the worker's error line, it does not hang."""
    env = _env(RAGLOOM_EMBEDDING__MODEL="hashing:32", RAGLOOM_SERVER__WORKERS="2")
    proc = subprocess.run(
        [sys.executable, "-m", "ragloom.cli", "serve", "http", str(repo), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert "error:" in proc.stderr and "hashing" in proc.stderr, proc.stderr
