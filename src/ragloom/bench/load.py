"""Sustained-load benchmark (issue 25): open-loop arrivals at fixed rates against a running
``ragloom serve http``.

    python scripts/bench_load.py INDEX_ROOT [--url URL] [--rates 5,10,20,40,80] [--seconds 20]
        [--route /context|/search] [--p95-ms 2000] [--write] [--json] [--json-out FILE]

**Open loop.** For each rate the arrival times are fixed before the first request: a Poisson
process of that rate over ``seconds``, conditioned on its count (``round(rate * seconds)``
uniform draws, sorted), so every run offers exactly the rate. Each request is sent at its time
whatever the earlier answers' latency: a server that cannot keep up shows queueing (latency
grows, answers pile up after the schedule ends) or rejections (``503``) instead of a client
that politely slows down to its pace (the closed-loop mistake, "coordinated omission").
Latency is measured from the request's *scheduled* time to its last byte, so any lag of the
client itself is counted too (and reported apart: ``send_lag_p99_ms``).

**New questions.** Every request asks a question never asked before in the run (no result or
embedding cache can answer it): :class:`QuestionSource` hands out the index's own questions
(:func:`ragloom.bench.serving.load_queries`: symbol names split into words, or a ``--queries``
file) and, once they are used up, variants of them with a counter ("where is X used to
parse, case 3"), never repeating one.

**Reported per rate**: offered rate, requests sent, achieved throughput (successful answers
per second, over the time from the schedule's start until the last request finished or timed
out), p50/p95/p99 of the successful answers, errors (connection errors, timeouts, any status
other than 200 and 503), and the ``503`` answers (the server's admission control: counted
apart, with their p95 and how many carried ``Retry-After``). A rate ends when its schedule has
ended and all its requests have finished. **Saturation** (:func:`saturation`): the highest rate
whose throughput is within 10 % of the offered rate and whose p95 is below a bound.

The client is one asyncio process with one ``httpx.AsyncClient`` whose connection limit (1000)
is never the bottleneck. On a small machine it shares the CPUs with the server: httpx costs
a few ms of CPU per request (see :class:`ragloom.bench.serving.RawClient`), so at high rates on
two cores part of the measured queueing is the client's; ``send_lag_p99_ms`` shows when the
client itself fell behind its schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ragloom.bench.serving import _commit, _pct, load_queries, running_server, write_section
from ragloom.errors import InputError

__all__ = [
    "QuestionSource",
    "RateResult",
    "main",
    "poisson_schedule",
    "render_markdown",
    "run_curve",
    "run_curve_async",
    "run_rate",
    "run_rate_async",
    "saturation",
]

BEGIN = "<!-- load-bench:begin -->"
END = "<!-- load-bench:end -->"
HEADING = "## Sustained load (issue 25)"
DEFAULT_RATES = (5.0, 10.0, 20.0, 40.0, 80.0)
MAX_CONNECTIONS = 1000
"""The client's connection limit: far above what any measured rate keeps in flight, so requests
never wait for a connection in the client."""

_VERBS = ("parse", "build", "load", "check", "render", "store", "read", "compute", "handle")


# -- questions -----------------------------------------------------------------------------------


class QuestionSource:
    """An endless iterator of distinct questions: ``base`` first (duplicates dropped), then
    variants of them with a counter, ``"where is <q> used to <verb>, case <n>"``. Share one
    source between rates (as :func:`run_curve` does) and no question is ever asked twice."""

    def __init__(self, base: Iterable[str]) -> None:
        self.base = list(dict.fromkeys(q.strip() for q in base if q.strip()))
        if not self.base:
            raise InputError("no questions to ask: the index has no usable symbol names")
        self._seen: set[str] = set()
        self._it = self._generate()
        self.used = 0

    def _generate(self) -> Iterator[str]:
        yield from self.base
        n = 0
        while True:
            for q in self.base:
                n += 1
                yield f"where is {q} used to {_VERBS[n % len(_VERBS)]}, case {n}"

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while True:
            q = next(self._it)
            if q not in self._seen:
                self._seen.add(q)
                self.used += 1
                return q

    def take(self, n: int) -> list[str]:
        return [next(self) for _ in range(n)]


def _take(questions: Iterable[str], n: int) -> list[str]:
    if isinstance(questions, QuestionSource):
        return questions.take(n)
    it = iter(questions)
    out: list[str] = []
    for q in it:
        out.append(q)
        if len(out) == n:
            break
    if len(out) < n:
        raise InputError(f"not enough questions: {n} needed, {len(out)} given")
    return out


# -- schedule and samples ------------------------------------------------------------------------


def poisson_schedule(rate: float, seconds: float, seed: int = 0) -> list[float]:
    """Arrival offsets (seconds from the start) of a Poisson process of ``rate`` per second
    over ``[0, seconds)``, conditioned on its count ``round(rate * seconds)``: the sorted
    uniform draws. The inter-arrival gaps are (nearly) exponential, and every run offers
    exactly the rate."""
    if rate <= 0 or seconds <= 0:
        raise InputError(f"rate and seconds must be positive (got {rate}, {seconds})")
    n = max(1, round(rate * seconds))
    rng = random.Random(seed)
    return sorted(rng.uniform(0.0, seconds) for _ in range(n))


@dataclass
class _Sample:
    scheduled: float
    sent: float
    done: float
    status: int  # 0 for a request that got no answer
    retry_after: bool = False
    server_ms: float | None = None
    error: str | None = None

    @property
    def latency_ms(self) -> float:
        return (self.done - self.scheduled) * 1000


@dataclass
class RateResult:
    """One rate's figures (milliseconds; ``None`` where there was nothing to measure)."""

    route: str
    offered_rps: float
    seconds: float
    sent: int
    answered: int
    overloaded: int
    errors: int
    throughput_rps: float
    wall_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    overloaded_p95_ms: float | None
    overloaded_retry_after: int
    server_p50_ms: float | None
    send_span_s: float
    send_lag_p99_ms: float
    error_kinds: dict[str, int] = field(default_factory=dict)
    first_errors: list[str] = field(default_factory=list)

    def saturated(self, p95_bound_ms: float, tolerance: float = 0.10) -> bool:
        """Not keeping up: throughput more than ``tolerance`` below the offered rate, or p95
        at or above the bound."""
        return not (
            self.throughput_rps >= (1 - tolerance) * self.offered_rps
            and self.p95_ms is not None
            and self.p95_ms < p95_bound_ms
        )


def saturation(
    results: Sequence[RateResult], p95_bound_ms: float, tolerance: float = 0.10
) -> RateResult | None:
    """The highest rate whose throughput is within ``tolerance`` of the offered rate and whose
    p95 is below ``p95_bound_ms``; ``None`` when no rate qualifies."""
    ok = [r for r in results if not r.saturated(p95_bound_ms, tolerance)]
    return max(ok, key=lambda r: r.offered_rps) if ok else None


def _opt_pct(values: Sequence[float], q: float) -> float | None:
    return round(_pct(values, q), 2) if values else None


def _summarize(
    route: str, rate: float, seconds: float, samples: Sequence[_Sample], t0: float
) -> RateResult:
    ok = [s for s in samples if s.status == 200]
    busy = [s for s in samples if s.status == 503]
    bad = [s for s in samples if s.status not in (200, 503)]
    kinds = Counter(s.error or f"http {s.status}" for s in bad)
    end = max((s.done for s in samples), default=t0)
    wall = max(seconds, end - t0)
    lat = [s.latency_ms for s in ok]
    server = [s.server_ms for s in ok if s.server_ms is not None]
    lags = [(s.sent - s.scheduled) * 1000 for s in samples]
    return RateResult(
        route=route,
        offered_rps=rate,
        seconds=seconds,
        sent=len(samples),
        answered=len(ok),
        overloaded=len(busy),
        errors=len(bad),
        throughput_rps=round(len(ok) / wall, 3),
        wall_s=round(wall, 3),
        p50_ms=_opt_pct(lat, 0.50),
        p95_ms=_opt_pct(lat, 0.95),
        p99_ms=_opt_pct(lat, 0.99),
        max_ms=round(max(lat), 2) if lat else None,
        overloaded_p95_ms=_opt_pct([s.latency_ms for s in busy], 0.95),
        overloaded_retry_after=sum(1 for s in busy if s.retry_after),
        server_p50_ms=_opt_pct(server, 0.50),
        send_span_s=round(max((s.sent for s in samples), default=t0) - t0, 3),
        send_lag_p99_ms=round(_pct(lags, 0.99), 2) if lags else 0.0,
        error_kinds=dict(sorted(kinds.items())),
        first_errors=[s.error or f"http {s.status}" for s in bad[:5]],
    )


# -- the client ----------------------------------------------------------------------------------


def make_client(
    url: str, *, timeout_s: float = 30.0, token: str | None = None
) -> httpx.AsyncClient:
    """The benchmark's client: keep-alive connections up to :data:`MAX_CONNECTIONS`."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        base_url=url,
        timeout=httpx.Timeout(timeout_s),
        limits=httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
        ),
        headers=headers,
    )


async def _one(
    client: httpx.AsyncClient, route: str, question: str, scheduled: float, timeout_s: float
) -> _Sample:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    try:
        resp = await asyncio.wait_for(client.post(route, json={"query": question}), timeout_s)
    except (TimeoutError, httpx.TimeoutException):
        return _Sample(scheduled, sent, loop.time(), 0, error="timeout")
    except (httpx.HTTPError, OSError) as exc:
        return _Sample(scheduled, sent, loop.time(), 0, error=type(exc).__name__)
    done = loop.time()
    server_ms: float | None = None
    if resp.status_code == 200:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            server_ms = float(resp.json()["latency_ms"])
    return _Sample(
        scheduled,
        sent,
        done,
        resp.status_code,
        retry_after="retry-after" in resp.headers,
        server_ms=server_ms,
        error=None if resp.status_code in (200, 503) else f"http {resp.status_code}",
    )


async def run_rate_async(
    client: httpx.AsyncClient,
    rate: float,
    seconds: float,
    questions: Iterable[str],
    *,
    route: str = "/context",
    timeout_s: float = 30.0,
    seed: int | None = None,
) -> RateResult:
    """One rate on an open client: send each request at its scheduled time (see the module
    docstring), wait for all of them, summarise."""
    schedule = poisson_schedule(rate, seconds, seed if seed is not None else round(rate * 1000))
    qs = _take(questions, len(schedule))
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.01
    tasks: list[asyncio.Task[_Sample]] = []
    for at, q in zip(schedule, qs, strict=True):
        delay = t0 + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(client, route, q, t0 + at, timeout_s)))
    samples = await asyncio.gather(*tasks)
    return _summarize(route, rate, seconds, samples, t0)


def run_rate(
    url: str,
    rate: float,
    seconds: float,
    questions: Iterable[str],
    *,
    route: str = "/context",
    timeout_s: float = 30.0,
    token: str | None = None,
    seed: int | None = None,
) -> RateResult:
    """``rate`` requests per second (open loop, Poisson) for ``seconds`` against ``url``, each
    a question never asked before (taken from ``questions``), no warm-up."""

    async def go() -> RateResult:
        async with make_client(url, timeout_s=timeout_s, token=token) as client:
            return await run_rate_async(
                client, rate, seconds, questions, route=route, timeout_s=timeout_s, seed=seed
            )

    return asyncio.run(go())


async def run_curve_async(
    client: httpx.AsyncClient,
    rates: Sequence[float],
    seconds: float,
    questions: Iterable[str],
    *,
    route: str = "/context",
    timeout_s: float = 30.0,
    warmup: int = 20,
    pause_s: float = 1.0,
) -> list[RateResult]:
    """Warm-up (``warmup`` new questions, four at a time, not measured), then each rate in
    turn, ``pause_s`` apart; ``questions`` is one iterator for all, so none repeats."""
    it: Iterable[str] = questions if isinstance(questions, QuestionSource) else iter(questions)
    warm = _take(it, warmup) if warmup > 0 else []
    for i in range(0, len(warm), 4):
        await asyncio.gather(
            *(
                _one(client, route, q, asyncio.get_running_loop().time(), timeout_s)
                for q in warm[i : i + 4]
            )
        )
    out: list[RateResult] = []
    for k, rate in enumerate(rates):
        if k:
            await asyncio.sleep(pause_s)
        out.append(
            await run_rate_async(client, rate, seconds, it, route=route, timeout_s=timeout_s)
        )
    return out


def run_curve(
    url: str,
    rates: Sequence[float],
    seconds: float,
    questions: Iterable[str],
    *,
    route: str = "/context",
    timeout_s: float = 30.0,
    token: str | None = None,
    warmup: int = 20,
    pause_s: float = 1.0,
) -> list[RateResult]:
    """:func:`run_curve_async` on a fresh client for ``url``."""

    async def go() -> list[RateResult]:
        async with make_client(url, timeout_s=timeout_s, token=token) as client:
            return await run_curve_async(
                client,
                rates,
                seconds,
                questions,
                route=route,
                timeout_s=timeout_s,
                warmup=warmup,
                pause_s=pause_s,
            )

    return asyncio.run(go())


# -- the server and the report -------------------------------------------------------------------


def wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    """Poll ``GET /healthz`` until it answers 200."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise InputError(f"{url}/healthz did not answer 200 within {timeout_s:.0f} s ({last})")


def _fmt(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v:.{digits}f}"


def render_markdown(r: dict[str, Any], command: str) -> str:
    """The section for docs/benchmarks.md (between its markers)."""
    m = r["machine"]
    idx = r.get("index") or {}
    what = (
        f"`{r['path']}` ({idx.get('chunks', '?')} chunks, {idx.get('files', '?')} files)"
        if r.get("path")
        else f"the server at {r['url']}"
    )
    lines = [
        BEGIN,
        f"### Sustained load: open-loop `{r['route']}` at fixed rates",
        "",
        f"Measured {r['started_at']} at commit {r['commit'] or '?'} with `{command}`: "
        f"{'a running server' if r.get('external') else '`ragloom serve http --no-watch` (own process, default settings)'} "
        f"on {what}; one asyncio client (httpx) sending every request at its time on a Poisson "
        f"schedule whatever the answers' latency, {r['seconds']:g} s per rate, every question "
        f"new (no cache hit), {r['warmup']} warm-up questions first. Python {m['python']}, "
        f"{m['cpus']} CPUs shared by client and server (load average "
        f"{m['loadavg_before'][0]} before, {m['loadavg_after'][0]} after). Latency is from the "
        "scheduled send to the last byte of a 200 answer; throughput is 200 answers per "
        "second until the last request finished; errors are connection errors, timeouts and "
        "statuses other than 200 and 503; 503 (admission control) is counted apart.",
        "",
        "| offered req/s | sent | answers/s | p50 ms | p95 ms | p99 ms | errors | 503 "
        "| 503 p95 ms | engine p50 ms | client lag p99 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["rates"]:
        lines.append(
            f"| {x['offered_rps']:g} | {x['sent']} | {x['throughput_rps']:.1f} | "
            f"{_fmt(x['p50_ms'])} | {_fmt(x['p95_ms'])} | {_fmt(x['p99_ms'])} | "
            f"{x['errors']} | {x['overloaded']} | {_fmt(x['overloaded_p95_ms'])} | "
            f"{_fmt(x['server_p50_ms'])} | {_fmt(x['send_lag_p99_ms'])} |"
        )
    sat = r.get("saturation")
    lines.append("")
    if sat is None:
        lines.append(
            f"- saturation: no rate kept throughput within 10 % of the offered rate with p95 "
            f"below {r['p95_bound_ms']:g} ms."
        )
    else:
        lines.append(
            f"- **saturation: {sat:g} req/s**, the highest rate answered within 10 % of the "
            f"offered rate with p95 below {r['p95_bound_ms']:g} ms."
        )
    errs = [e for x in r["rates"] for e in x["first_errors"]]
    if errs:
        lines.append(f"- first errors: {errs[:5]}")
    lines.append(END)
    return "\n".join(lines)


def _index_info(url: str, token: str | None) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        s = httpx.get(f"{url}/status", headers=headers, timeout=10.0).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {k: s.get(k) for k in ("chunks", "files", "generation", "model", "workers")}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="bench_load", description="Open-loop requests at fixed rates against the HTTP server."
    )
    ap.add_argument("path", type=Path, nargs="?", help="repository root or index folder")
    ap.add_argument("--url", help="a running server (else one is started on PATH)")
    ap.add_argument("--rates", default=",".join(f"{r:g}" for r in DEFAULT_RATES))
    ap.add_argument("--seconds", type=float, default=20.0, help="per rate")
    ap.add_argument("--route", choices=("/context", "/search"), default="/context")
    ap.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--p95-ms", type=float, default=2000.0, help="saturation's latency bound")
    ap.add_argument("--queries", type=Path, help="JSON lines with a query field, or plain lines")
    ap.add_argument("--token", default=os.environ.get("RAGLOOM_BENCH_TOKEN"))
    ap.add_argument("--work-dir", type=Path, default=Path("bench-out/load"))
    ap.add_argument("--write", action="store_true", help="update the section of --out")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    command = "python scripts/bench_load.py " + " ".join(
        str(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    try:
        rates = [float(x) for x in str(args.rates).split(",") if x.strip()]
        if args.path is None and (args.url is None or args.queries is None):
            raise InputError("give an index PATH (or --url and --queries)")
        index_dir: Path | None = None
        if args.path is not None:
            import ragloom

            index = ragloom.Index.at(args.path)
            if not index.exists:
                raise InputError(f"no index at {index.index_dir}; run `ragloom index PATH`")
            index_dir = index.index_dir
        source = QuestionSource(load_queries(args.queries, index_dir or Path(".")))
        args.work_dir.mkdir(parents=True, exist_ok=True)
        load_before = os.getloadavg()
        started = time.time()
        with contextlib.ExitStack() as stack:
            url = args.url or stack.enter_context(
                running_server(args.path, args.work_dir / "server.log", extra=("--no-watch",))
            )
            url = url.rstrip("/")
            wait_healthy(url)
            info = _index_info(url, args.token)
            results = run_curve(
                url,
                rates,
                args.seconds,
                source,
                route=args.route,
                timeout_s=args.timeout,
                token=args.token,
                warmup=args.warmup,
            )
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    sat = saturation(results, args.p95_ms)
    report: dict[str, Any] = {
        "route": args.route,
        "url": url,
        "external": args.url is not None,
        "path": str(args.path) if args.path is not None else None,
        "index": info,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "p95_bound_ms": args.p95_ms,
        "saturation": sat.offered_rps if sat else None,
        "questions_used": source.used,
        "rates": [asdict(r) for r in results],
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "commit": _commit(),
        "started_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
    }
    text = json.dumps(report, indent=2)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text + "\n")
    section = render_markdown(report, command)
    print(text if args.json else section)
    if args.write:
        write_section(args.out, section, HEADING, begin=BEGIN, end=END)
    return 1 if any(r.errors for r in results) else 0
