"""Time limits while serving: ``timeouts.query_ms`` bounds an answer (TimeoutError_, the
computation runs on and its answer is cached), ``timeouts.bm25_ms`` bounds the wait for a hybrid
query's BM25 side (the answer comes from dense alone, with a note: the seed's lenient BM25)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ragloom.api import Index
from ragloom.errors import InputError, TimeoutError_
from ragloom.server.engine import ServingEngine
from ragloom.settings import load_settings
from tests.conftest import copy_stdlib_packages

pytestmark = pytest.mark.integration

QUERY = "parse a JSON document"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_stdlib_packages(tmp_path_factory.mktemp("timeouts"), ["json", "csv"])
    with Index.at(root, embedder="hashing") as idx:
        idx.index()
    return root


def _engine(repo: Path, **overrides: Any) -> ServingEngine:
    settings = load_settings(repo, overrides=overrides, env={}).settings
    return ServingEngine.open(repo, settings)


def _ask(eng: ServingEngine, route: str, via_loop: bool, **kw: Any) -> dict[str, Any]:
    """``route`` as a library caller asks it, or as the HTTP routes do (answer_async)."""
    if via_loop:
        import asyncio

        return asyncio.run(eng.answer_async(route, QUERY, **kw))
    answer: dict[str, Any] = getattr(eng, route)(QUERY, **kw)
    return answer


@pytest.mark.parametrize(
    ("route", "via_loop"), [("search", False), ("context", True)], ids=["call", "event-loop"]
)
def test_query_time_limit(repo: Path, route: str, via_loop: bool) -> None:
    """Past the limit: TimeoutError_, counted; the computation runs on and its answer is
    cached for the next ask (both paths: a direct call and the HTTP routes' answer_async)."""
    with _engine(repo, **{"timeouts.query_ms": 40.0}) as eng:
        retriever = eng._reader.retriever
        real = retriever.search

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0.3)
            return real(*args, **kwargs)

        retriever.search = slow  # type: ignore[method-assign]
        with pytest.raises(TimeoutError_, match=r"timeouts\.query_ms = 40 ms"):
            _ask(eng, route, via_loop)
        assert eng.status()["fallbacks"]["query_timeout"] == 1
        retriever.search = real  # type: ignore[method-assign]
        deadline = time.monotonic() + 10
        while True:  # the timed-out computation finishes and caches its answer
            try:
                answer = _ask(eng, route, via_loop)
            except TimeoutError_:  # still waiting for that computation (single flight)
                answer = {"cache_hit": False}
            if answer["cache_hit"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer["cache_hit"] and answer["hits" if route == "search" else "context"]
        if via_loop:
            assert _ask(eng, "search", True, top_k=3)["hits"]
            with pytest.raises(InputError, match="no query route"):
                _ask(eng, "status", True)


def test_bm25_wait_limit_answers_from_dense(repo: Path) -> None:
    with _engine(repo, **{"timeouts.bm25_ms": 20.0}) as eng:
        retriever = eng._reader.retriever
        assert retriever.bm25_timeout_ms == 20.0
        real = retriever._timed_sparse

        def slow(*args: Any) -> Any:
            time.sleep(0.5)
            return real(*args)

        retriever._timed_sparse = slow  # type: ignore[method-assign]
        answer = eng.search(QUERY, strategy="hybrid")
        assert any("bm25 did not answer within 20 ms" in n for n in answer["notes"])
        assert answer["hits"] and all(set(h["ranks"]) == {"dense"} for h in answer["hits"])
        assert eng.status()["fallbacks"]["bm25_timeout"] == 1
        retriever._timed_sparse = real  # type: ignore[method-assign]
        # a real BM25 search may miss 20 ms on a busy machine: the limit is generous now
        retriever.bm25_timeout_ms = 60_000.0
        again = eng.search(QUERY, strategy="hybrid")  # not served from a cached fallback
        assert not again["cache_hit"] and any("bm25" in h["ranks"] for h in again["hits"])


def test_the_http_path_refuses_at_the_door_when_the_pool_is_backed_up(repo: Path) -> None:
    """answer_async answers 503 at once, from the event loop, while twice the admission limit
    of questions wait in the query pool (they would otherwise queue for the CPU first)."""
    import asyncio

    from ragloom.errors import OverloadedError
    from ragloom.server.answers import DOOR_FACTOR

    with _engine(repo, **{"server.max_inflight": 2}) as eng:
        eng._queued = DOOR_FACTOR * 2
        with pytest.raises(OverloadedError, match="max_inflight = 2"):
            asyncio.run(eng.answer_async("search", QUERY))
        assert eng.status()["fallbacks"]["overloaded"] == 1
        eng._queued = 0
        assert asyncio.run(eng.answer_async("search", QUERY))["hits"]
        assert eng._queued == 0  # handed over and answered: counted out again
