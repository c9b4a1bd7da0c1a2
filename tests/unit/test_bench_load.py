"""The sustained-load client (ragloom.bench.load) against a stub server in a thread: a FastAPI
app that takes 20 ms per request and answers 503 with Retry-After when more than two requests
are in flight (the shape of the real server's admission control)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from ragloom.bench.load import QuestionSource, poisson_schedule, run_rate, saturation

MAX_IN_FLIGHT = 2


def _app() -> tuple[FastAPI, dict[str, Any]]:
    app = FastAPI()
    state: dict[str, Any] = {"in_flight": 0, "queries": []}

    @app.post("/context")
    async def context(body: dict[str, Any]) -> Any:
        state["queries"].append(body["query"])
        if state["in_flight"] >= MAX_IN_FLIGHT:
            return JSONResponse(
                {"error": {"type": "overloaded", "message": "over capacity"}},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        state["in_flight"] += 1
        try:
            await asyncio.sleep(0.02)
        finally:
            state["in_flight"] -= 1
        return {"context": "x", "latency_ms": 20.0}

    @app.post("/slow")
    async def slow(body: dict[str, Any]) -> Any:
        state["queries"].append(body["query"])
        await asyncio.sleep(0.3)
        return {"latency_ms": 300.0}

    return app, state


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[str, dict[str, Any]]]:
    app, state = _app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def test_schedule_offers_exactly_the_rate() -> None:
    times = poisson_schedule(40, 2.0, seed=3)
    assert len(times) == 80
    assert times == sorted(times) and times[0] >= 0 and times[-1] < 2.0


def test_questions_never_repeat() -> None:
    src = QuestionSource(["parse header", "read config", "parse header"])
    qs = src.take(50)
    assert len(set(qs)) == 50 and qs[:2] == ["parse header", "read config"]


def test_run_rate_counts_latencies_and_open_loop(stub: tuple[str, dict[str, Any]]) -> None:
    url, state = stub
    source = QuestionSource([f"question {i}" for i in range(20)])
    low = run_rate(url, 20, 1.0, source, timeout_s=5)
    high = run_rate(url, 150, 1.0, source, timeout_s=5)
    for r, rate in ((low, 20), (high, 150)):
        assert r.sent == rate  # every scheduled request went out
        assert r.answered + r.overloaded + r.errors == r.sent
        assert r.errors == 0, r.error_kinds
        assert r.p50_ms is not None and r.p95_ms is not None and r.p99_ms is not None
        assert r.p50_ms <= r.p95_ms <= r.p99_ms
        assert r.p50_ms >= 20  # the stub's own 20 ms
    # over capacity (2 in flight x 20 ms = 100 answers/s at best): 503s, each with Retry-After
    assert high.overloaded > 0 and high.overloaded_retry_after == high.overloaded
    assert high.overloaded_p95_ms is not None
    assert high.throughput_rps < 0.9 * high.offered_rps
    # the rate over capacity is never the saturation point (the low one is, on an idle machine)
    assert saturation([low, high], p95_bound_ms=5000) in (low, None)
    # open loop: 30 requests of 300 ms each in 1 s still go out on schedule, not one by one
    # (one by one would take 9 s; the bounds leave room for a machine whose cores are busy)
    slow = run_rate(url, 30, 1.0, source, route="/slow", timeout_s=5)
    assert slow.sent == slow.answered == 30
    assert slow.send_span_s < 0.5 * 30 * 0.3
    assert slow.send_lag_p99_ms < 1500
    assert slow.p50_ms is not None and slow.p50_ms >= 300
    assert slow.throughput_rps == pytest.approx(30 / slow.wall_s, rel=0.01)
    # every question the server saw was new
    assert len(state["queries"]) == len(set(state["queries"])) == 20 + 150 + 30
