"""Cost of one new question (issue 25 item 1): per-stage wall/CPU through ServingEngine and HTTP.

python scripts/cost_profile.py ROOT [--n 200] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from pathlib import Path

import httpx

from ragloom.bench.serving import load_queries, running_server
from ragloom.retrieve.search import Retriever
from ragloom.server import ServingEngine
from ragloom.server.embedding import BatchingEmbedder
from ragloom.settings import Settings

REC: dict[str, float] = {}


def cpu() -> float:  # process CPU (all threads), ms; clock_gettime(CLOCK_PROCESS_CPUTIME_ID)
    return time.process_time() * 1000


ON = [True]


def wrap(cls, name, key, tt=False):
    orig = getattr(cls, name)

    def w(*a, **k):
        if not ON[0]:
            return orig(*a, **k)
        t, c, th = time.perf_counter(), cpu(), time.thread_time()
        try:
            return orig(*a, **k)
        finally:
            REC[key] = REC.get(key, 0.0) + (time.perf_counter() - t) * 1000
            REC[key + "_cpu"] = REC.get(key + "_cpu", 0.0) + (cpu() - c)
            if tt:
                REC[key + "_thread_cpu"] = (
                    REC.get(key + "_thread_cpu", 0.0) + (time.thread_time() - th) * 1000
                )

    setattr(cls, name, w)
    return orig


_orig_search = Retriever.search


def rsearch(self, *a, **k):
    res = _orig_search(self, *a, **k)
    REC.update({"s." + n: v for n, v in res.timings_ms.items()})
    return res


Retriever.search = rsearch
wrap(BatchingEmbedder, "embed_query", "embed_query")
wrap(BatchingEmbedder, "_run", "embed_onnx")  # inner.embed_documents of the one-query batch
wrap(Retriever, "_timed_sparse", "bm25_thread", tt=True)
from ragloom.server.engine import ServingEngine as SE  # noqa

wrap(SE, "_assemble", "assemble_call")
wrap(SE, "_finish", "finish")


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    i = (len(v) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def one(engine, route, q):
    REC.clear()
    t, c = time.perf_counter(), cpu()
    ans = getattr(engine, route)(q)
    wall = (time.perf_counter() - t) * 1000
    pc = cpu() - c
    assert not ans["cache_hit"], q
    rec = dict(REC)
    rec["wall"] = wall
    rec["proc_cpu"] = pc
    rec["latency_ms"] = ans["latency_ms"]
    if route == "context":
        for n, v in ans["stats"].get("timings_ms", {}).items():
            rec["a." + n] = v
    return rec


def derive(r, route):
    s = {k[2:]: v for k, v in r.items() if k.startswith("s.")}
    out = {}
    out["query processing"] = s.get("query", 0)
    out["bm25 (worker thread, parallel)"] = s.get("bm25", 0)
    out["dense"] = s.get("dense", 0)
    out["  query embedding (batcher)"] = r.get("embed_query", 0)
    out["    ONNX embed_documents"] = r.get("embed_onnx", 0)
    out["    batching wait/hand-off"] = r.get("embed_query", 0) - r.get("embed_onnx", 0)
    out["  HNSW + visibility"] = s.get("dense", 0) - r.get("embed_query", 0)
    out["fusion"] = s.get("fusion", 0)
    known = {"query", "bm25", "dense", "fusion", "hydrate", "total"}
    groups = 0.0
    for g in sorted(k for k in s if k not in known):
        out[f"ranking: {g}"] = s[g]
        groups += s[g]
    out["hydrate"] = s.get("hydrate", 0)
    crit = (
        s.get("query", 0)
        + max(s.get("bm25", 0), s.get("dense", 0))
        + s.get("fusion", 0)
        + groups
        + s.get("hydrate", 0)
    )
    out["search: not covered (sub-queries, BM25 join, notes)"] = s.get("total", 0) - crit
    out["retriever search total"] = s.get("total", 0)
    eng_inner = r["latency_ms"] - s.get("total", 0)
    if route == "context":
        a = {k[2:]: v for k, v in r.items() if k.startswith("a.")}
        for n in ("fetch", "dedup", "trim", "select", "stitch", "render"):
            if n in a:
                out[f"assembly: {n}"] = a[n]
        others = [
            n
            for n in a
            if n not in ("fetch", "dedup", "trim", "select", "stitch", "render", "total")
        ]
        for n in others:
            out[f"assembly: {n}"] = a[n]
        out["assembly total"] = a.get("total", 0)
        out["assembly outside assemble_context (embeddings, counter, parts JSON)"] = r.get(
            "assemble_call", 0
        ) - a.get("total", 0)
        eng_inner -= r.get("assemble_call", 0)
    out["engine overhead inside latency_ms (checks, keys, cache, copies, _finish)"] = eng_inner
    out["  of which _finish (query log, metrics)"] = r.get("finish", 0)
    out["engine latency_ms"] = r["latency_ms"]
    out["pool hand-off (call wall - latency_ms)"] = r["wall"] - r["latency_ms"]
    out["engine call wall"] = r["wall"]
    out["process CPU per question"] = r["proc_cpu"]
    out["  ONNX embed CPU (process)"] = r.get("embed_onnx_cpu", 0)
    out["  BM25 thread CPU"] = r.get("bm25_thread_cpu", 0)
    if route == "context":
        out["  assembly CPU (process)"] = r.get("assemble_call_cpu", 0)
    return out


def table(rows):
    keys = list(rows[0].keys())
    for r in rows[1:]:
        for k in r:
            if k not in keys:
                keys.append(k)
    return {
        k: (pct([r.get(k, 0) for r in rows], 0.5), pct([r.get(k, 0) for r in rows], 0.95))
        for k in keys
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    qs = load_queries(None, a.root / ".ragloom")
    n = a.n
    assert len(qs) >= 5 * n + 20, len(qs)
    sets = [qs[i * n : (i + 1) * n] for i in range(5)]
    warm = qs[5 * n : 5 * n + 20]
    res = {"root": str(a.root), "n": n}
    engine = ServingEngine.open(a.root, Settings())
    try:
        from ragloom.api import Index  # noqa

        with engine._use_reader() as r:
            res["chunks"] = r.retriever.chunk_count()
        for q in warm:
            engine.context(q)
            engine.search(q + " x")
        for route, qset in (("search", sets[0]), ("context", sets[1])):
            rows = [derive(one(engine, route, q), route) for q in qset]
            res[route] = table(rows)
        # cProfile: the undecorated context in this thread (BM25 worker thread not profiled)
        ON[0] = False
        prof = cProfile.Profile()
        t = time.perf_counter()
        ctx = SE.context.__wrapped__
        prof.enable()
        for q in sets[2]:
            ctx(engine, q)
        prof.disable()
        res["cprofile_wall_ms_per_q"] = (time.perf_counter() - t) * 1000 / n
        st = pstats.Stats(prof)
        items = []
        for (fn, ln, name), (_cc, nc, tt, ct, _callers) in st.stats.items():
            items.append((tt, ct, nc, f"{Path(fn).name if '/' in fn else fn}:{ln}({name})", fn))
        items.sort(reverse=True)
        tot = sum(i[0] for i in items)
        res["cprofile_total_own_ms_per_q"] = tot * 1000 / n
        res["cprofile_top"] = [
            {
                "fn": f,
                "path": p,
                "own_ms_per_q": tt * 1000 / n,
                "cum_ms_per_q": ct * 1000 / n,
                "calls_per_q": nc / n,
            }
            for tt, ct, nc, f, p in items[:40]
        ]
    finally:
        engine.close()
    # HTTP
    http = {}
    with (
        running_server(a.root, Path(f"/tmp/cost_http_{a.root.name}.log"), ["--no-watch"]) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        for q in warm:
            c.post("/context", json={"query": q + " warm"})
        for route, qset in (("search", sets[3]), ("context", sets[4])):
            rows = []
            for q in qset:
                t = time.perf_counter()
                resp = c.post(f"/{route}", json={"query": q})
                w = (time.perf_counter() - t) * 1000
                body = resp.json()
                assert resp.status_code == 200 and not body["cache_hit"], body
                rows.append(
                    {
                        "http wall": w,
                        "engine latency_ms": body["latency_ms"],
                        "HTTP overhead": w - body["latency_ms"],
                        "bytes": len(resp.content),
                    }
                )
            http[route] = table(rows)
    res["http"] = http
    txt = json.dumps(res, indent=1)
    if a.out:
        a.out.write_text(txt)
    print(txt)


if __name__ == "__main__":
    main()
