"""Query session A/B: 100 concurrent and 60 sequential hybrid queries on an index, with the
query embedder on its own one-thread session (``query_threads=1``, the default) or on the batch
session (``none``). docs/embedding.md, "Query session". Run in fresh processes, alternating::

    for i in 1 2; do for c in none 1; do .venv/bin/python scripts/bench_query_session.py $c; done; done

The index (default: bench-out/corpora/c100k/.ragloom) must be embedded with the default model.
"""

import asyncio
import statistics
import sys
import time

import ragloom
from ragloom.embed.onnx import OnnxEmbedder
from ragloom.embed.registry import load_embedder

qt = None if sys.argv[1] == "none" else int(sys.argv[1])
d = load_embedder(None).model_dir
emb = OnnxEmbedder(d, query_threads=qt)
at = ragloom.Index.at(sys.argv[2] if len(sys.argv) > 2 else "bench-out/corpora/c100k/.ragloom")
idx = ragloom.Index(at.root, at.index_dir, embedder=emb)
r = idx.retriever
words = [
    "parse",
    "json",
    "decode",
    "string",
    "http",
    "request",
    "retry",
    "header",
    "cookie",
    "path",
    "join",
    "walk",
    "file",
    "socket",
    "thread",
    "lock",
    "queue",
    "timer",
    "email",
    "message",
    "encode",
    "base64",
    "date",
    "time",
    "zone",
    "locale",
    "format",
    "number",
]
qs = [
    f"{words[i % len(words)]} {words[(i * 7) % len(words)]} {words[(i * 13) % len(words)]} {i}"
    for i in range(400)
]
for q in qs[:5]:
    r.search(q, top_k=10)


async def burst(batch):
    async def one(q):
        t = time.perf_counter()
        await r.asearch(q, top_k=10)
        return time.perf_counter() - t

    t0 = time.perf_counter()
    lat = await asyncio.gather(*[one(q) for q in batch])
    return time.perf_counter() - t0, lat


out = []
for k in range(3):
    wall, lat = asyncio.run(burst(qs[100 * k : 100 * k + 100]))
    out.append((100 / wall, statistics.median(lat) * 1000))
seq = []
for q in qs[300:360]:
    t = time.perf_counter()
    r.search(q, top_k=10)
    seq.append((time.perf_counter() - t) * 1000)
print(
    sys.argv[1],
    "q/s",
    [round(a, 1) for a, _ in out],
    "p50",
    [round(b, 1) for _, b in out],
    "seq p50",
    round(statistics.median(seq), 2),
)
