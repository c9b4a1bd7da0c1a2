"""Serving benchmark (issue 12): concurrent ``/context`` requests against the real HTTP server.

    python scripts/bench_serving.py INDEX_PATH [--concurrency 100] [--rounds 5]
        [--queries docstring.jsonl] [--touch-files 200] [--out docs/benchmarks.md]

``INDEX_PATH`` is a repository root or its index folder (``make bench`` passes the 100k-chunk
``bench-out/corpora/c100k``). The server is ``ragloom serve http`` in a process of its own (as
a team would run it) on a free loopback port; the client is one asyncio process with ``httpx``
and one keep-alive connection per concurrent request. First two sequential baselines: one
cached answer asked 200 times (the HTTP layer's own cost: client latency minus the engine's)
and 50 new queries one at a time (what one query costs without queueing). Then three phases:

1. **cold**: ``rounds`` bursts of ``concurrency`` simultaneous ``POST /context`` requests,
   every query distinct and never asked before (no cache can answer): client-side latency
   p50/p95/p99 (send to last byte), the engine's own ``latency_ms``, errors, throughput;
2. **during re-index**: ``touch-files`` files of the corpus get one comment line appended,
   ``POST /index`` starts an incremental refresh, and bursts of fresh queries run until the job
   finishes; the same figures, the generations seen and the job's duration. The files are
   restored afterwards and the index refreshed again (unmeasured), so the corpus and its index
   end as they started;
3. **repeated mix**: ``mix-requests`` requests drawn (seeded, Zipf-like) from a pool of
   ``mix-pool`` queries, sent in bursts of ``concurrency``: the share of answers served from
   the result cache (``cache_hit``; identical concurrent misses wait for one computation and
   count as hits) and the engine's own cache counters.

Queries come from ``--queries`` (JSON lines with a ``query`` field, e.g. the docstring eval
set, or plain lines), else from the index's own symbol names split into words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ragloom.errors import InputError

__all__ = ["ServingBenchConfig", "main", "render_markdown", "run_serving_bench"]

BEGIN = "<!-- serving-bench:begin -->"
END = "<!-- serving-bench:end -->"
TOUCH_MARK = "# ragloom serving benchmark: touched to be re-indexed\n"


@dataclass
class ServingBenchConfig:
    path: Path
    concurrency: int = 100
    rounds: int = 5
    budget: int = 4000
    queries_file: Path | None = None
    touch_files: int = 200
    reindex_rounds_max: int = 50
    mix_pool: int = 40
    mix_requests: int = 1000
    overhead_requests: int = 200
    sequential_cold: int = 50
    seed: int = 12


@dataclass
class Sample:
    seconds: float
    status: int
    server_ms: float | None = None
    cache_hit: bool = False
    generation: int | None = None
    error: str | None = None


@dataclass
class PhaseResult:
    name: str
    requests: int
    errors: int
    statuses: dict[str, int]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    server_p50_ms: float | None
    server_p95_ms: float | None
    cache_hits: int
    wall_s: float
    throughput_rps: float
    bursts: int
    generations: list[int] = field(default_factory=list)
    first_errors: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[idx]


def summarize(name: str, samples: Sequence[Sample], wall_s: float, bursts: int) -> PhaseResult:
    lat = [s.seconds * 1000 for s in samples]
    server = [s.server_ms for s in samples if s.server_ms is not None]
    errors = [s for s in samples if s.status != 200]
    return PhaseResult(
        name=name,
        requests=len(samples),
        errors=len(errors),
        statuses={str(k): v for k, v in sorted(Counter(s.status for s in samples).items())},
        p50_ms=_pct(lat, 0.50),
        p95_ms=_pct(lat, 0.95),
        p99_ms=_pct(lat, 0.99),
        max_ms=max(lat) if lat else float("nan"),
        server_p50_ms=_pct(server, 0.50) if server else None,
        server_p95_ms=_pct(server, 0.95) if server else None,
        cache_hits=sum(1 for s in samples if s.cache_hit),
        wall_s=wall_s,
        throughput_rps=len(samples) / wall_s if wall_s > 0 else float("nan"),
        bursts=bursts,
        generations=sorted({s.generation for s in samples if s.generation is not None}),
        first_errors=[e.error or str(e.status) for e in errors[:5]],
    )


# -- queries -------------------------------------------------------------------------------------

_SPLIT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def load_queries(queries_file: Path | None, index_dir: Path) -> list[str]:
    """Distinct queries, in a fixed order: from the file, else from the index's symbols."""
    out: list[str] = []
    if queries_file is not None:
        for line in queries_file.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            q = str(json.loads(line).get("query", "")) if line.startswith("{") else line
            if q.strip():
                out.append(q.strip())
    else:
        from ragloom.index.store import Store
        from ragloom.retrieve.reader import DB_NAME

        store = Store(index_dir / DB_NAME, readonly=True)
        try:
            table = store.symbol_table()
        finally:
            store.close()
        for symbol, path, _ in sorted(table):
            words = _SPLIT.findall(symbol.replace(".", " ").replace("_", " "))
            if len(words) >= 2:
                stem = Path(path).stem.replace("_", " ")
                out.append(f"{' '.join(w.lower() for w in words)} in {stem}")
    seen: dict[str, None] = dict.fromkeys(out)
    distinct = list(seen)
    random.Random(7).shuffle(distinct)
    return distinct


# -- the server ----------------------------------------------------------------------------------


@contextlib.contextmanager
def running_server(
    path: Path,
    log_path: Path,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """``ragloom serve http PATH --port 0 [EXTRA...]`` in its own process; yields its URL.
    ``env`` defaults to this process's environment without ``RAGLOOM_API_TOKEN``."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in ("RAGLOOM_API_TOKEN",)}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragloom.cli",
                "serve",
                "http",
                str(path),
                "--port",
                "0",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            m = re.search(r"on (http://\S+)", line)
            if not m:
                raise InputError(f"the server did not start: {line!r}; see {log_path}")
            yield m.group(1)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


# -- the client ----------------------------------------------------------------------------------


class RawClient:
    """A minimal HTTP/1.1 client for the measured requests: ``concurrency`` keep-alive
    connections, requests written and answers read with asyncio streams.

    Why not httpx here: on a two-core machine the client shares the CPUs with the server, and
    httpx costs a few milliseconds of CPU per request (about 2.5 ms measured sequentially
    against 0.5 ms for this client), which a burst of 100 requests turns into queueing that
    is the client's, not the server's. httpx still makes the control calls (status, jobs).
    """

    def __init__(self, url: str, concurrency: int, token: str | None = None) -> None:
        m = re.fullmatch(r"http://\[?([^\]/]+?)\]?:(\d+)/?", url)
        if not m:
            raise InputError(f"not an http://host:port URL: {url}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.concurrency = concurrency
        self.auth = f"authorization: Bearer {token}\r\n" if token else ""
        self._pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )

    async def open(self) -> None:
        for _ in range(self.concurrency):
            self._pool.put_nowait(await asyncio.open_connection(self.host, self.port))

    async def close(self) -> None:
        while not self._pool.empty():
            _, writer = self._pool.get_nowait()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def post(self, path: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        """Status and body of one POST; a keep-alive connection the server closed while idle
        (uvicorn closes them after 5 s) is replaced and the request sent again, as any
        HTTP client does."""
        body = json.dumps(payload).encode()
        request = (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{self.auth}\r\n"
        ).encode() + body
        reader, writer = await self._pool.get()
        for attempt in (1, 2):
            try:
                status, data, keep = await self._exchange(reader, writer, request)
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                writer.close()
                reader, writer = await asyncio.open_connection(self.host, self.port)
                stale = not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial
                if attempt == 2 or not stale:
                    self._pool.put_nowait((reader, writer))
                    raise
                continue
            if not keep:
                writer.close()
                reader, writer = await asyncio.open_connection(self.host, self.port)
            self._pool.put_nowait((reader, writer))
            return status, data
        raise AssertionError("unreachable")

    @staticmethod
    async def _exchange(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
    ) -> tuple[int, bytes, bool]:
        writer.write(request)
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        data = await reader.readexactly(int(headers.get("content-length", "0")))
        return status, data, headers.get("connection", "").lower() != "close"


async def _one(client: RawClient, body: dict[str, Any]) -> Sample:
    t0 = time.perf_counter()
    try:
        status, raw = await client.post("/context", body)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        return Sample(time.perf_counter() - t0, 0, error=f"{type(exc).__name__}: {exc}")
    dt = time.perf_counter() - t0
    if status != 200:
        return Sample(dt, status, error=raw[:300].decode("utf-8", "replace"))
    data = json.loads(raw)
    return Sample(
        dt,
        200,
        server_ms=float(data["latency_ms"]),
        cache_hit=bool(data["cache_hit"]),
        generation=int(data["generation"]),
    )


async def burst(client: RawClient, queries: Sequence[str], budget: int) -> list[Sample]:
    """All ``queries`` sent at once, one connection each."""
    return list(
        await asyncio.gather(*(_one(client, {"query": q, "budget": budget}) for q in queries))
    )


def _client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=120.0)


class _Queries:
    def __init__(self, queries: list[str]) -> None:
        self.queries = queries
        self.pos = 0

    def take(self, n: int) -> list[str]:
        if self.pos + n > len(self.queries):
            raise InputError(
                f"not enough distinct queries: {len(self.queries)} available, "
                f"{self.pos + n} needed (fewer --rounds, or a bigger --queries file)"
            )
        out = self.queries[self.pos : self.pos + n]
        self.pos += n
        return out


def _touch(root: Path, rels: Sequence[str]) -> dict[Path, bytes]:
    saved: dict[Path, bytes] = {}
    for rel in rels:
        p = root / rel
        data = p.read_bytes()
        saved[p] = data
        p.write_bytes(data + b"\n" + TOUCH_MARK.encode())
    return saved


def _restore(saved: dict[Path, bytes]) -> None:
    for p, data in saved.items():
        p.write_bytes(data)


async def _wait_job(client: httpx.AsyncClient, job_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job = (await client.get(f"/jobs/{job_id}")).json()
        if job.get("state") in ("succeeded", "failed") or time.monotonic() > deadline:
            return dict(job)
        await asyncio.sleep(0.2)


async def _run(cfg: ServingBenchConfig, url: str, root: Path, queries: _Queries) -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw = RawClient(url, cfg.concurrency)
    await raw.open()
    try:
        return await _phases(cfg, raw, root, queries, out, url)
    finally:
        await raw.close()


async def _phases(
    cfg: ServingBenchConfig,
    raw: RawClient,
    root: Path,
    queries: _Queries,
    out: dict[str, Any],
    url: str,
) -> dict[str, Any]:
    async with _client(url) as client:
        status = (await client.get("/status")).json()
        out["index"] = {
            "chunks": status.get("chunks"),
            "files": status.get("files"),
            "generation": status.get("generation"),
            "model": status.get("model"),
        }
        # warm-up: open every connection and run each pipeline stage once (not measured)
        await burst(raw, queries.take(cfg.concurrency), cfg.budget)

        # 0. the HTTP layer's own cost: one cached query, one request at a time
        hot = queries.take(1)
        await burst(raw, hot, cfg.budget)
        samples: list[Sample] = []
        t0 = time.perf_counter()
        for _ in range(cfg.overhead_requests):
            samples += await burst(raw, hot, cfg.budget)
        out["overhead"] = summarize(
            "sequential, cached", samples, time.perf_counter() - t0, cfg.overhead_requests
        )

        # 0b. one cold request at a time: what a single query costs without queueing
        samples = []
        t0 = time.perf_counter()
        for q in queries.take(cfg.sequential_cold):
            samples += await burst(raw, [q], cfg.budget)
        out["sequential_cold"] = summarize(
            "sequential, cold", samples, time.perf_counter() - t0, cfg.sequential_cold
        )

        # 1. cold
        samples = []
        t0 = time.perf_counter()
        for _ in range(cfg.rounds):
            samples += await burst(raw, queries.take(cfg.concurrency), cfg.budget)
        out["cold"] = summarize("cold", samples, time.perf_counter() - t0, cfg.rounds)

        # 2. during a re-index
        files = _python_files(root)
        step = max(1, len(files) // max(1, cfg.touch_files))
        chosen = files[::step][: cfg.touch_files]
        saved = _touch(root, chosen)
        try:
            started = await client.post("/index")
            job_id = started.json()["job_id"]
            t_job = time.perf_counter()
            samples = []
            bursts = 0
            t0 = time.perf_counter()
            while bursts < cfg.reindex_rounds_max:
                job = (await client.get(f"/jobs/{job_id}")).json()
                if job["state"] in ("succeeded", "failed") and bursts > 0:
                    break
                samples += await burst(raw, queries.take(cfg.concurrency), cfg.budget)
                bursts += 1
            wall = time.perf_counter() - t0
            job = await _wait_job(client, job_id, 1800)
            job_s = time.perf_counter() - t_job
            res = summarize("during re-index", samples, wall, bursts)
            res.extra = {
                "files_touched": len(chosen),
                "job_state": job.get("state"),
                "job_seconds": round(job_s, 2),
                "job_stats": {
                    k: (job.get("stats") or {}).get(k)
                    for k in ("files_changed", "chunks_added", "chunks_removed", "embedded")
                },
                "bursts_while_running": bursts,
            }
            out["reindex"] = res
        finally:
            _restore(saved)
        # put the index back in step with the restored files (not measured)
        restore = await client.post("/index")
        out["restore_job"] = (await _wait_job(client, restore.json()["job_id"], 1800)).get("state")

        # 3. repeated-query mix
        pool = queries.take(cfg.mix_pool)
        rng = random.Random(cfg.seed)
        weights = [1.0 / (i + 1) for i in range(len(pool))]
        seq = rng.choices(pool, weights=weights, k=cfg.mix_requests)
        before = await cache_counters(client)
        samples = []
        t0 = time.perf_counter()
        bursts = 0
        for i in range(0, len(seq), cfg.concurrency):
            samples += await burst(raw, seq[i : i + cfg.concurrency], cfg.budget)
            bursts += 1
        res = summarize("repeated mix", samples, time.perf_counter() - t0, bursts)
        after = await cache_counters(client)
        hits = after["hits"] - before["hits"]
        misses = after["misses"] - before["misses"]
        coalesced = after["coalesced"] - before["coalesced"]
        res.extra = {
            "pool": len(pool),
            "distinct_asked": len(set(seq)),
            "hit_rate": res.cache_hits / res.requests if res.requests else 0.0,
            "best_possible_hit_rate": 1 - len(set(seq)) / len(seq) if seq else 0.0,
            "engine_cache_hits": hits,
            "engine_cache_misses": misses,
            "engine_coalesced": coalesced,
            "workers_counted": f"{after['workers_seen']} of {after['workers']}",
        }
        out["mix"] = res
    return out


async def cache_counters(client: httpx.AsyncClient, tries: int = 64) -> dict[str, int]:
    """The engine's answer-cache counters (hits, misses, coalesced) summed over every worker of
    the server. Each ``/status`` asked on a new connection reaches whichever worker accepts it,
    so it is asked until every worker (``workers``, told apart by ``worker.index``) answered,
    at most ``tries`` rounds; ``workers_seen`` says how many did. After the first answer each
    round asks ``workers`` at once: asked one at a time, idle workers sharing a listening socket
    can leave every connection to the same one (the kernel wakes the same waiter), and a worker
    busy with one request leaves the next to another."""
    seen: dict[int, Mapping[str, Any]] = {}
    workers = 1
    for _ in range(tries):
        asks = (
            client.get("/status", headers={"connection": "close"})
            for _ in range(workers if seen else 1)
        )
        for answer in await asyncio.gather(*asks):
            status = answer.json()
            workers = int(status.get("workers") or 1)
            seen[int((status.get("worker") or {}).get("index", 0))] = status.get("cache", {})
        if len(seen) >= workers:
            break
    out = {k: sum(int(c.get(k, 0)) for c in seen.values()) for k in ("hits", "misses", "coalesced")}
    out.update(workers=workers, workers_seen=len(seen))
    return out


def _python_files(root: Path) -> list[str]:
    """Python files of the corpus (relative paths, sorted): what the re-index phase touches."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py"):
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def run_serving_bench(cfg: ServingBenchConfig, *, work_dir: Path) -> dict[str, Any]:
    """Run the three phases against a fresh ``ragloom serve http``; JSON-ready results."""
    import ragloom

    index = ragloom.Index.at(cfg.path)
    if not index.exists:
        raise InputError(f"no index at {index.index_dir}; create one with `ragloom index PATH`")
    queries = load_queries(cfg.queries_file, index.index_dir)
    # warm-up, cold bursts, mix pool, the cached query, sequential cold queries
    fixed = cfg.concurrency * (1 + cfg.rounds) + cfg.mix_pool + 1 + cfg.sequential_cold
    spare_bursts = (len(queries) - fixed) // cfg.concurrency  # for the re-index phase
    if spare_bursts < 1:
        raise InputError(
            f"{len(queries)} distinct queries; the benchmark needs at least "
            f"{fixed + cfg.concurrency} (fewer --rounds, or a bigger --queries file)"
        )
    cfg.reindex_rounds_max = min(cfg.reindex_rounds_max, spare_bursts)
    work_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.time()
    with running_server(cfg.path, work_dir / "server.log") as url:
        results = asyncio.run(_run(cfg, url, index.root, _Queries(queries)))
    results["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    results["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    results["commit"] = _commit()
    results["started_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    results["path"] = str(cfg.path)
    return {k: asdict(v) if isinstance(v, PhaseResult) else v for k, v in results.items()}


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


# -- report --------------------------------------------------------------------------------------


def _row(p: dict[str, Any]) -> str:
    server = (
        f"{p['server_p50_ms']:.1f} / {p['server_p95_ms']:.1f}"
        if p["server_p50_ms"] is not None
        else "n/a"
    )
    return (
        f"| {p['name']} | {p['requests']} ({p['bursts']} bursts) | {p['errors']} | "
        f"{p['p50_ms']:.1f} | {p['p95_ms']:.1f} | {p['p99_ms']:.1f} | {p['max_ms']:.1f} | "
        f"{server} | {p['throughput_rps']:.0f} | {p['cache_hits']} |"
    )


def render_markdown(r: dict[str, Any], command: str) -> str:
    idx = r["index"]
    cfg = r["config"]
    m = r["machine"]
    mix = r["mix"]["extra"]
    rx = r["reindex"]["extra"]
    lines = [
        BEGIN,
        "### Serving: concurrent `/context` over HTTP",
        "",
        f"Measured {r['started_at']} at commit {r['commit'] or '?'} with `{command}`: the "
        f"real `ragloom serve http` (own process, default settings) on `{r['path']}` "
        f"({idx['chunks']} chunks, {idx['files']} files, {idx['model']}); one asyncio client "
        f"process (raw HTTP/1.1 on {cfg['concurrency']} keep-alive connections), every burst "
        f"{cfg['concurrency']} "
        f"simultaneous `POST /context` (budget {cfg['budget']} tokens). Python {m['python']}, "
        f"{m['cpus']} CPUs shared with other work (load average {m['loadavg_before'][0]} "
        f"before, {m['loadavg_after'][0]} after). Latency is the client's (send to last "
        "byte, queueing included); the engine column is the server's own `latency_ms`.",
        "",
        "| phase | requests | errors | p50 ms | p95 ms | p99 ms | max ms | engine p50 / p95 ms "
        "| req/s | cache hits |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        _row(r["overhead"]),
        _row(r["sequential_cold"]),
        _row(r["cold"]),
        _row(r["reindex"]),
        _row(r["mix"]),
        "",
        f"- cold: every query distinct and new (no cache). During re-index: {rx['files_touched']}"
        f" files touched, `POST /index` job {rx['job_state']} in {rx['job_seconds']} s, "
        f"{rx['bursts_while_running']} bursts sent while it ran; generations answered: "
        f"{r['reindex']['generations']}.",
        f"- repeated mix: {r['mix']['requests']} requests over {mix['distinct_asked']} distinct "
        f"queries (Zipf-like, pool {mix['pool']}): **cache hit rate "
        f"{mix['hit_rate']:.1%}** (best possible {mix['best_possible_hit_rate']:.1%}; tamma "
        f"target > 60%); engine counters: {mix['engine_cache_hits']} hits, "
        f"{mix['engine_cache_misses']} misses, {mix['engine_coalesced']} coalesced "
        "(identical concurrent misses answered by one computation).",
    ]
    ov = r["overhead"]
    if ov["server_p50_ms"] is not None:
        lines.append(
            f"- sequential, cached: one request at a time for one cached answer; the HTTP "
            f"layer's own cost (client p50 minus engine p50) is "
            f"{ov['p50_ms'] - ov['server_p50_ms']:.2f} ms."
        )
    phases = ("overhead", "sequential_cold", "cold", "reindex", "mix")
    errs = [e for k in phases for e in r[k]["first_errors"]]
    if errs:
        lines.append(f"- first errors: {errs[:5]}")
    lines.append(END)
    return "\n".join(lines)


def write_section(
    out: Path,
    section: str,
    heading: str = "## Serving benchmark",
    *,
    begin: str = BEGIN,
    end: str = END,
) -> None:
    """Replace the part of ``out`` between the ``begin`` and ``end`` markers with ``section``
    (which carries the markers itself), or append it under ``heading``."""
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n" + section + "\n"
    out.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="bench_serving", description="Concurrent /context requests against the HTTP server."
    )
    ap.add_argument("path", type=Path, help="repository root or index folder")
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5, help="cold bursts")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--queries", type=Path, help="JSON lines with a query field, or plain lines")
    ap.add_argument("--touch-files", type=int, default=200)
    ap.add_argument("--reindex-rounds-max", type=int, default=50)
    ap.add_argument("--mix-pool", type=int, default=40)
    ap.add_argument("--mix-requests", type=int, default=1000)
    ap.add_argument("--overhead-requests", type=int, default=200)
    ap.add_argument("--sequential-cold", type=int, default=50)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--work-dir", type=Path, default=Path("bench-out/serving"))
    ap.add_argument("--out", type=Path, help="markdown file to update (section between markers)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    cfg = ServingBenchConfig(
        path=args.path,
        concurrency=args.concurrency,
        rounds=args.rounds,
        budget=args.budget,
        queries_file=args.queries,
        touch_files=args.touch_files,
        reindex_rounds_max=args.reindex_rounds_max,
        mix_pool=args.mix_pool,
        mix_requests=args.mix_requests,
        overhead_requests=args.overhead_requests,
        sequential_cold=args.sequential_cold,
        seed=args.seed,
    )
    command = "python scripts/bench_serving.py " + " ".join(
        str(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    try:
        results = run_serving_bench(cfg, work_dir=args.work_dir)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    text = json.dumps(results, indent=2)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text + "\n")
    section = render_markdown(results, command)
    print(section)
    if args.out:
        write_section(args.out, section)
    phases = ("overhead", "sequential_cold", "cold", "reindex", "mix")
    errors = sum(results[k]["errors"] for k in phases)
    return 1 if errors else 0
