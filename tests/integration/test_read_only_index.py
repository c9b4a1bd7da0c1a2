"""An index folder nobody may write (a read-only mount: a CI cache, a container image, an NFS
export) answers as it does when writable: the database is read as immutable and each BM25
engine from a private copy, since tantivy takes a lock file even to read."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ragloom.api import Index
from ragloom.index import bm25 as bm25_module
from tests.conftest import copy_stdlib_packages, run_cli

QUESTION = "decode a JSON object"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("ro") / "repo", ["json"])
    run_cli("index", str(root), "--model", "hashing:64", check=True)
    return root


def _hits(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str | None]]:
    assert proc.returncode == 0, proc.stderr
    return [(h["id"], h.get("symbol")) for h in json.loads(proc.stdout)]


def test_a_read_only_bm25_folder_is_read_from_a_copy(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Index.at(repo) as idx:
        want = [h.id for h in idx.search(QUESTION, top_k=5, strategy="sparse").hits]
    assert want
    real_access = os.access
    engines = {repo / ".ragloom" / "bm25" / "engine", repo / ".ragloom" / "bm25-files" / "engine"}

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        if Path(path) in engines and mode & os.W_OK:
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(bm25_module.os, "access", access)
    before = {p.name for p in Path(tempfile.gettempdir()).glob("ragloom-ro-bm25-*")}
    engine = bm25_module.TantivyBm25(repo / ".ragloom" / "bm25")
    copies = {p.name for p in Path(tempfile.gettempdir()).glob("ragloom-ro-bm25-*")} - before
    assert len(copies) == 1
    assert engine.doc_count() > 0
    assert not list((repo / ".ragloom" / "bm25" / "engine").glob("*.lock.new"))
    del engine
    gc.collect()
    left = {p.name for p in Path(tempfile.gettempdir()).glob("ragloom-ro-bm25-*")}
    assert not copies & left, "the copy outlives its engine"
    with Index.at(repo) as idx:
        got = [h.id for h in idx.search(QUESTION, top_k=5, strategy="sparse").hits]
    assert got == want
    # a copy left by a killed process (no exit handler ran) goes with the next copy made
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = Path(tempfile.gettempdir()) / f"ragloom-ro-bm25-{dead.pid}-x" / "engine"
    orphan.mkdir(parents=True)
    engine = bm25_module.TantivyBm25(repo / ".ragloom" / "bm25")
    assert not orphan.parent.exists()
    del engine


def test_the_copy_of_a_folder_read_only_by_its_mode_is_writable(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder made read-only by its permissions (``chmod -R a-w``, not a mount): the copy
    kept the mode, so tantivy's lock failed in the copy too (BM25 off for a user who is not
    root) and the copy could not be removed."""
    import stat

    folder = tmp_path / "bm25"
    shutil.copytree(repo / ".ragloom" / "bm25", folder)
    for path in sorted(folder.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~0o222)
    monkeypatch.setattr(
        bm25_module.os,
        "access",
        lambda p, mode, **kw: not (mode & os.W_OK) or "engine" not in str(p),
    )
    try:
        engine = bm25_module.TantivyBm25(folder)
        copies = sorted(Path(tempfile.gettempdir()).glob(f"ragloom-ro-bm25-{os.getpid()}-*"))
        assert copies and engine.doc_count() > 0
        for path in [copies[-1], *copies[-1].rglob("*")]:
            if path.is_dir():
                assert stat.S_IMODE(path.stat().st_mode) & 0o200, path
        del engine
        gc.collect()
    finally:
        for path in folder.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)


def _unshare_works() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs root and mount namespaces (unshare -m)")
def test_a_read_only_mount_answers_as_the_writable_folder(repo: Path) -> None:
    folder = repo / ".ragloom"
    args = ["search", QUESTION, "--index-dir", str(folder), "--json", "-k", "5"]
    want = {s: _hits(run_cli(*args, "--strategy", s)) for s in ("sparse", "hybrid")}
    script = (
        'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 98; shift; '
        'if touch "$0/probe" 2>/dev/null; then echo "still writable" >&2; exit 99; fi; '
        'exec "$@"'
    )
    for strategy, hits in want.items():
        proc = subprocess.run(
            [
                *("unshare", "-m", "sh", "-c", script, str(folder), str(folder)),
                *(sys.executable, "-m", "ragloom.cli", *args, "--strategy", strategy),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert _hits(proc) == hits, strategy
    assert not (folder / "probe").exists()
    # ratings are read there too (`feedback stats` failed: "unable to open database file")
    answer = json.loads(run_cli(*args, "--strategy", "sparse").stdout)[0]
    run_cli("feedback", "add", answer["query_id"], answer["id"], "--rating", "helpful",
            "--index-dir", str(folder), check=True)  # fmt: skip
    stats = ["feedback", "stats", "--index-dir", str(folder), "--json"]
    want_stats = run_cli(*stats, check=True).stdout
    proc = subprocess.run(
        [
            *("unshare", "-m", "sh", "-c", script, str(folder), str(folder)),
            *(sys.executable, "-m", "ragloom.cli", *stats),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == want_stats and '"helpful_count": 1' in want_stats
    # a rating there says why it cannot be kept (it was "cannot open the feedback database")
    add = ["feedback", "add", answer["query_id"], answer["id"], "--rating", "helpful",
           "--index-dir", str(folder)]  # fmt: skip
    proc = subprocess.run(
        [
            *("unshare", "-m", "sh", "-c", script, str(folder), str(folder)),
            *(sys.executable, "-m", "ragloom.cli", *add),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 25 and "is read-only" in proc.stderr, proc.stderr


SERVE_READ_ONLY = """
import json, sys
from fastapi.testclient import TestClient
from ragloom.server.engine import ServingEngine
from ragloom.server.http import create_app

engine = ServingEngine.open(sys.argv[1], warm=False)
try:
    with TestClient(create_app(engine)) as client:
        answer = client.post("/search", json={"query": sys.argv[2], "top_k": 3}).json()
        rate = client.post("/feedback", json={
            "query_id": answer["query_id"], "chunk_id": answer["hits"][0]["id"],
            "rating": "helpful"})
        print(json.dumps({
            "hits": len(answer["hits"]),
            "rate": [rate.status_code, rate.json()],
            "summary": [(r := client.get("/feedback")).status_code, r.json()],
            "old": [(r := client.get("/feedback/" + sys.argv[3])).status_code, r.json()],
            "own": [(r := client.get("/feedback/" + answer["query_id"])).status_code, r.json()],
        }))
finally:
    engine.close()
"""


@pytest.mark.skipif(not _unshare_works(), reason="needs root and mount namespaces (unshare -m)")
def test_a_server_on_a_read_only_mount_refuses_ratings_clearly_and_reads_them(
    repo: Path,
) -> None:
    """A server of a read-only folder answers; a rating is a 503 ``feedback_unavailable`` that
    says why (it was a 500 ``db_error``), and the figures are read from the folder's database
    (they were a 500 too)."""
    folder = repo / ".ragloom"
    args = ["search", QUESTION, "--index-dir", str(folder), "--json", "-k", "3"]
    answer = json.loads(run_cli(*args, "--strategy", "sparse").stdout)[0]
    run_cli("feedback", "add", answer["query_id"], answer["id"], "--rating", "helpful",
            "--index-dir", str(folder), check=True)  # fmt: skip
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 98; exec "$2" -c "$3" "$4" "$5" "$6"'
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(folder), sys.executable,
         SERVE_READ_ONLY, str(folder), QUESTION, answer["query_id"]],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["hits"] == 3
    status, body = got["rate"]
    assert status == 503 and body["error"]["type"] == "feedback_unavailable"
    assert "keeps no ratings" in body["error"]["message"]
    assert got["summary"][0] == 200 and got["summary"][1]["helpful_count"] >= 1
    assert got["old"][0] == 200 and got["old"][1]["helpful_count"] == 1
    # this server's own answers are not logged: asking for one says why (it was a 404, "pruned")
    status, body = got["own"]
    assert status == 503 and body["error"]["type"] == "feedback_unavailable"
