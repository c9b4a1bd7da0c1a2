"""Query-embedding micro-batching alone (no retrieval), for docs/serving.md.

    .venv/bin/python scripts/bench_engine_embed.py [N]

N threads (default 32) each embed one query, all released together, 8 rounds, configurations
alternated round by round: every query alone (window 0), a 2 ms window, and "natural" batching
(a 0.01 ms window: what queued while a batch ran) with 2 or 4 batches allowed to run at once.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import QUERIES, burst, pct

from ragloom.embed.registry import load_embedder
from ragloom.server.embedding import BatchingEmbedder


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    model = load_embedder("default")
    model.embed_query("warm up")
    queries = (QUERIES * (n // len(QUERIES) + 1))[:n]
    natural2 = BatchingEmbedder(model, window_ms=0.01, idle_s=0)
    natural2._run_lock = threading.Semaphore(2)  # type: ignore[assignment]
    natural4 = BatchingEmbedder(model, window_ms=0.01, idle_s=0)
    natural4._run_lock = threading.Semaphore(4)  # type: ignore[assignment]
    configs = {
        "alone": BatchingEmbedder(model, window_ms=0),
        "window 2 ms": BatchingEmbedder(model, window_ms=2.0, idle_s=0),
        "natural, 2 at once": natural2,
        "natural, 4 at once": natural4,
    }
    lat: dict[str, list[float]] = {k: [] for k in configs}
    walls: dict[str, list[float]] = {k: [] for k in configs}
    cpu: dict[str, list[float]] = {k: [] for k in configs}
    for r in range(8):
        for name in list(configs) if r % 2 else list(reversed(configs)):
            c0 = time.process_time()
            ls, wall = burst(configs[name].embed_query, queries)
            cpu[name].append((time.process_time() - c0) * 1000 / n)
            lat[name] += ls
            walls[name].append(wall)
    for name, emb in configs.items():
        print(
            f"{name:20s} n={n} p50 {pct(lat[name], 0.5):6.1f} ms p95 {pct(lat[name], 0.95):6.1f}"
            f" ms wall {statistics.median(walls[name]):6.1f} ms"
            f" process CPU/query {statistics.median(cpu[name]):5.2f} ms"
            f" model calls {emb.stats.batches}"
        )


if __name__ == "__main__":
    main()
