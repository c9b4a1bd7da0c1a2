"""Serving-engine measurements for docs/serving.md (not part of the test suite).

    .venv/bin/python scripts/bench_engine.py INDEXED_REPO [--rounds 10] [--threads 32]

Prints, for the index at INDEXED_REPO (built with embeddings):

- ``batching``: ``--threads`` concurrent distinct hybrid queries, result cache off, with the
  micro-batcher's window at 2 ms vs off (0): per-query latency p50/p95, wall time per round,
  underlying embedding calls; the configurations alternate round by round (a shared machine's
  load drifts) and run in the same process;
- ``ranking``: top-10 overlap of dense answers with batched vs unbatched query vectors;
- ``readers``: one shared engine vs one ``ragloom.open`` per thread (sharing the model), and
  the BM25 worker pool at 1 vs 4 threads: queries per second and p50 with ``--threads`` threads;
- ``cache``: a repeated-query mix (each query 4 times, shuffled) through the result cache: hit
  rate and p50 of hits vs misses.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ragloom
from ragloom.embed.registry import load_embedder
from ragloom.server import ServingEngine
from ragloom.settings import Settings

QUERIES = [
    "parse an email address",
    "decode a JSON document",
    "HTTP cookie expiry date",
    "send a request with basic authentication",
    "rotate log files by size",
    "format a log record with a timestamp",
    "read the response headers",
    "quote a URL path",
    "XML parser event handler",
    "thread pool executor shutdown",
    "encode a MIME header",
    "multipart message boundary",
    "redirect handler for HTTP 302",
    "escape special characters in XML",
    "parse query string into a dict",
    "future result with timeout",
    "JSON encoder for custom objects",
    "SMTP style header folding",
    "proxy handler environment variables",
    "logging configuration from a dictionary",
    "base64 encode message payload",
    "cookie jar policy for domains",
    "HTTP status codes and phrases",
    "DOM element attributes",
    "process pool worker crashed",
    "charset of an email message",
    "robots.txt parser",
    "stream handler flush",
    "url join relative reference",
    "content transfer encoding quoted printable",
    "server sends a chunked response",
    "wait for the first completed future",
]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def burst(fn: Callable[[str], Any], queries: list[str]) -> tuple[list[float], float]:
    """All ``queries`` at once, one thread each; per-query latencies (ms) and wall (ms)."""
    lat = [0.0] * len(queries)
    barrier = threading.Barrier(len(queries) + 1)

    def run(i: int) -> None:
        barrier.wait()
        t = time.perf_counter()
        fn(queries[i])
        lat[i] = (time.perf_counter() - t) * 1000

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(queries))]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return lat, (time.perf_counter() - t0) * 1000


def batching(repo: Path, rounds: int, threads: int) -> None:
    model = load_embedder("default")
    off = {"cache": {"enabled": False}}
    engines = {
        "window 2 ms": ServingEngine.open(
            repo,
            Settings.model_validate({**off, "server": {"batch_window_ms": 2.0}}),
            embedder=model,
        ),
        "no batching": ServingEngine.open(
            repo,
            Settings.model_validate({**off, "server": {"batch_window_ms": 0.0}}),
            embedder=model,
        ),
    }
    qs = (QUERIES * (threads // len(QUERIES) + 1))[:threads]
    lat: dict[str, list[float]] = {k: [] for k in engines}
    walls: dict[str, list[float]] = {k: [] for k in engines}
    cpu: dict[str, list[float]] = {k: [] for k in engines}
    for r in range(rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        for name in order:
            eng = engines[name]
            c0 = time.process_time()
            ls, wall = burst(lambda q, eng=eng: eng.search(q, strategy="hybrid"), qs)
            cpu[name].append((time.process_time() - c0) * 1000 / len(qs))
            lat[name] += ls
            walls[name].append(wall)
    print(f"batching: {threads} concurrent hybrid queries x {rounds} rounds, result cache off")
    for name, eng in engines.items():
        b = eng.status()["batching"]
        print(
            f"  {name:12s} p50 {pct(lat[name], 0.5):7.1f} ms  p95 {pct(lat[name], 0.95):7.1f} ms"
            f"  wall/round p50 {statistics.median(walls[name]):7.1f} ms"
            f"  process CPU/query {statistics.median(cpu[name]):6.2f} ms"
            f"  embedding calls {b['batches']} for {b['queries']} queries"
            f" (largest {b['largest_batch']})"
        )
    for eng in engines.values():
        eng.close()


def ranking(repo: Path) -> None:
    model = load_embedder("default")
    eng = ServingEngine.open(
        repo,
        Settings.model_validate({"cache": {"enabled": False}, "server": {"batch_window_ms": 50.0}}),
        embedder=model,
    )
    solo = {q: [h["id"] for h in eng.search(q, strategy="dense")["hits"]] for q in QUERIES}
    got: dict[str, list[str]] = {}
    burst(
        lambda q: got.__setitem__(q, [h["id"] for h in eng.search(q, strategy="dense")["hits"]]),
        QUERIES,
    )
    same_top1 = sum(solo[q][:1] == got[q][:1] for q in QUERIES)
    overlap = statistics.mean(len(set(solo[q]) & set(got[q])) / 10 for q in QUERIES)
    identical = sum(solo[q] == got[q] for q in QUERIES)
    b = eng.status()["batching"]
    print(
        f"ranking: dense top-10, {len(QUERIES)} queries batched ({b['batches']} batches) vs alone:"
        f" same top-1 {same_top1}/{len(QUERIES)}, identical lists {identical}/{len(QUERIES)},"
        f" mean overlap {overlap:.3f}"
    )
    eng.close()


def readers(repo: Path, rounds: int, threads: int) -> None:
    model = load_embedder("default")
    settings = Settings.model_validate(
        {"cache": {"enabled": False}, "server": {"batch_window_ms": 0.0}}
    )
    shared = ServingEngine.open(repo, settings, embedder=model)
    one_worker = ServingEngine.open(repo, settings, embedder=model)
    retriever = one_worker._reader.retriever
    retriever.close()  # drops the pool the warm-up query made
    retriever.bm25_workers = 1
    local = threading.local()

    def per_thread(q: str) -> Any:
        idx = getattr(local, "idx", None)
        if idx is None:
            idx = local.idx = ragloom.Index.at(repo, embedder=model)
        return idx.search(q, top_k=10)

    configs: dict[str, Callable[[str], Any]] = {
        "shared engine, bm25 pool 4": lambda q: shared.search(q),
        "shared engine, bm25 pool 1": lambda q: one_worker.search(q),
        "Index per thread": per_thread,
    }
    per_round = 4 * threads
    qs = (QUERIES * (per_round // len(QUERIES) + 1))[:per_round]
    lat: dict[str, list[float]] = {k: [] for k in configs}
    qps: dict[str, list[float]] = {k: [] for k in configs}
    for r in range(rounds):
        names = list(configs) if r % 2 == 0 else list(reversed(configs))
        for name in names:
            fn = configs[name]
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(fn, qs[:threads]))  # warm each thread's reader
                t0 = time.perf_counter()

                def timed(q: str, fn: Callable[[str], Any] = fn) -> float:
                    t = time.perf_counter()
                    fn(q)
                    return (time.perf_counter() - t) * 1000

                ls = list(pool.map(timed, qs))
                qps[name].append(len(qs) / (time.perf_counter() - t0))
            lat[name] += ls
    print(f"readers: {threads} threads, {per_round} hybrid queries per round x {rounds} rounds")
    for name in configs:
        print(
            f"  {name:28s} {statistics.median(qps[name]):7.1f} q/s"
            f"  p50 {pct(lat[name], 0.5):7.1f} ms  p95 {pct(lat[name], 0.95):7.1f} ms"
        )
    shared.close()
    one_worker.close()


def cache(repo: Path) -> None:
    eng = ServingEngine.open(repo, Settings(), embedder=load_embedder("default"))
    mix = QUERIES * 4
    random.Random(7).shuffle(mix)
    hit_ms: list[float] = []
    miss_ms: list[float] = []
    for q in mix:
        a = eng.context(q)
        (hit_ms if a["cache_hit"] else miss_ms).append(a["latency_ms"])
    c = eng.status()["cache"]
    print(
        f"cache: {len(mix)} context requests ({len(QUERIES)} distinct, each 4x): hit rate"
        f" {c['hit_rate']:.2f}; p50 hit {pct(hit_ms, 0.5):.2f} ms, miss {pct(miss_ms, 0.5):.1f} ms"
    )
    eng.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--only", choices=["batching", "ranking", "readers", "cache"], default=None)
    a = ap.parse_args()
    if a.only in (None, "batching"):
        batching(a.repo, a.rounds, a.threads)
    if a.only in (None, "ranking"):
        ranking(a.repo)
    if a.only in (None, "readers"):
        readers(a.repo, max(2, a.rounds // 2), min(a.threads, 8))
    if a.only in (None, "cache"):
        cache(a.repo)


if __name__ == "__main__":
    main()
