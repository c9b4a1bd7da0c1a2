"""Parallel retrieval with timeouts and cross-source fusion: a hanging source, a source that
ignores cancellation, one blocked in a thread, one raising, strict mode, disabled sources,
weights and the recency boost."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragloom.errors import SearchError
from ragloom.sources.base import (
    RetrieveOptions,
    SourceContext,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.orchestrate import cut_fused, fuse_sources, retrieve_all, run_sync

DISPOSED: list[str] = []
"""Names of the ``short-dispose`` sources whose dispose ran to its end."""


class Scripted:
    """A source whose ``retrieve`` does what the test says (answer, hang, raise, block)."""

    def __init__(self, name: str, behaviour: str = "ok", n: int = 3, delay: float = 0.0) -> None:
        self.name = name
        self.behaviour = behaviour
        self.n = n
        self.delay = delay
        self.settings = SourceSettings()

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def initialize(self, settings: SourceSettings) -> None:
        self.settings = settings

    async def retrieve(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]:
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        if self.behaviour == "stubborn":  # swallows its cancellation and goes on
            for _ in range(100):
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0.05)
        if self.behaviour == "thread":
            await asyncio.to_thread(time.sleep, 5.0)
        self.calls = getattr(self, "calls", 0) + 1
        if self.behaviour == "block":  # a plug-in's classic slip: a blocking call in async code
            time.sleep(5.0)
        if self.behaviour == "block-short":
            time.sleep(1.0)
        if self.behaviour == "raise":
            raise RuntimeError("index is corrupt")
        if self.behaviour == "dicts":  # a plug-in's slip: not SourceHits
            return [{"not": "a hit"}]  # type: ignore[list-item]
        if self.behaviour == "none":
            return None  # type: ignore[return-value]
        if self.behaviour == "text-date":
            return [SourceHit(self.name, "x", "t", "text", 1.0, date="yesterday")]  # type: ignore[arg-type]
        if self.delay:
            await asyncio.sleep(self.delay)
        return [
            SourceHit(self.name, f"{self.name}-{i}", f"t{i}", "text", 10.0 - i)
            for i in range(min(self.n, options.top_k))
        ]

    async def health_check(self) -> bool:
        return True

    async def dispose(self) -> None:
        if self.behaviour == "slow-dispose":
            await asyncio.sleep(8.0)
        if self.behaviour == "short-dispose":
            await asyncio.sleep(0.3)
            DISPOSED.append(self.name)

    def sync(self) -> SyncReport:
        if self.behaviour == "sync-hang":
            time.sleep(5.0)
        if self.behaviour == "sync-raise":
            raise RuntimeError("sync exploded")
        return SyncReport(self.name)

    def freshness(self) -> dict[str, object]:
        if self.behaviour == "freshness-hang":
            time.sleep(30.0)
        return {"items": self.n}


def _run(
    sources: list[Scripted], **kw: float | bool
) -> tuple[dict[str, list[SourceHit]], dict[str, str], float]:
    t0 = time.perf_counter()
    results, statuses = run_sync(
        lambda: retrieve_all(sources, SourceQuery("q"), {}, **kw)  # type: ignore[arg-type]
    )
    return results, {s.source: s.status for s in statuses}, time.perf_counter() - t0


@pytest.mark.parametrize("behaviour", ["hang", "stubborn", "thread"])
def test_a_hung_source_is_left_out_at_the_total_timeout(behaviour: str) -> None:
    srcs = [Scripted("code"), Scripted("slow", behaviour), Scripted("docs", delay=0.02)]
    results, status, took = _run(srcs, per_source_ms=10_000, total_ms=1000)
    assert status == {"code": "ok", "slow": "timeout", "docs": "ok"}
    assert set(results) == {"code", "docs"} and len(results["code"]) == 3
    # generous (a busy machine is slow), yet short of the hung source's 5 s
    assert took < 3.5, f"answered in {took:.2f} s, the total timeout is 1 s"


def test_the_per_source_timeout() -> None:
    srcs = [Scripted("code"), Scripted("slow", delay=30.0)]
    _, status, took = _run(srcs, per_source_ms=100, total_ms=20_000)
    assert status == {"code": "ok", "slow": "timeout"}
    assert took < 10.0  # generous: neither the slow source's 30 s nor the total 20 s


def test_a_raising_source_is_reported_not_fatal() -> None:
    srcs = [Scripted("code"), Scripted("broken", "raise")]
    results, statuses = run_sync(
        lambda: retrieve_all(srcs, SourceQuery("q"), {})  # type: ignore[arg-type]
    )
    broken = next(s for s in statuses if s.source == "broken")
    assert broken.status == "error" and "index is corrupt" in (broken.error or "")
    assert broken.to_dict()["count"] == 0
    assert list(results) == ["code"]


def test_strict_mode_raises() -> None:
    srcs = [Scripted("code"), Scripted("broken", "raise")]
    with pytest.raises(SearchError, match="broken error"):
        run_sync(lambda: retrieve_all(srcs, SourceQuery("q"), {}, strict=True))  # type: ignore[arg-type]


def test_disabled_sources_are_reported() -> None:
    off = Scripted("prs")
    off.initialize(SourceSettings(enabled=False))
    results, status, _ = _run([Scripted("code"), off])
    assert status == {"code": "ok", "prs": "disabled"} and "prs" not in results


def _hits(source: str, n: int, dates: list[float | None] | None = None) -> list[SourceHit]:
    return [
        SourceHit(source, f"{source}{i}", "t", "x", 1.0 / (i + 1), date=(dates or [None] * n)[i])
        for i in range(n)
    ]


def test_weights_order_the_fused_list() -> None:
    fused = fuse_sources(
        {"code": _hits("code", 3), "commits": _hits("commits", 3)},
        {"code": 1.0, "commits": 0.1},
        now=0.0,
    )
    assert [h.id for h in fused] == ["code0", "code1", "code2", "commits0", "commits1", "commits2"]
    assert fused[0].explain["rrf"] == {"score": 1 / 61, "rank": {"code": 1}, "weight": 1.0}
    even = fuse_sources(
        {"code": _hits("code", 2), "commits": _hits("commits", 2)},
        {"code": 0.1, "commits": 1.0},
        now=0.0,
    )
    assert [h.id for h in even][:2] == ["commits0", "commits1"]


def test_recency_boost_lifts_recent_items_and_is_explained() -> None:
    day = 86_400.0
    now = 1_000 * day
    fused = fuse_sources(
        {
            "issues": _hits("issues", 2, [now - 400 * day, now - 1 * day]),
            "prs": _hits("prs", 2, [now - 400 * day, now - 400 * day]),
        },
        {"issues": 0.2, "prs": 0.2},
        now=now,
    )
    by_id = {h.id: h for h in fused}
    fresh = by_id["issues1"].explain["recency"]
    assert isinstance(fresh, dict) and fresh["age_days"] == 1.0
    assert 0.09 < float(fresh["boost"]) < 0.1
    stale = by_id["prs1"].explain["recency"]
    assert isinstance(stale, dict) and float(stale["boost"]) < 1e-5
    # same RRF rank (2nd in its list, same weight): the recent one ranks above the stale one
    ids = [h.id for h in fused]
    assert ids.index("issues1") < ids.index("prs1")


def _fused(sources: list[str]) -> list[SourceHit]:
    return [
        SourceHit(source=s, id=f"{s}{i}", title="", text="", score=1.0 / (i + 1))
        for i, s in enumerate(sources)
    ]


def test_the_cut_gives_each_source_a_place() -> None:
    """With tamma's weights every code hit outranks the other sources' first items: a plain
    cut to ``-k`` answered code alone (a user trial: ``--sources code,docs,issues`` at any
    ``-k`` showed no docs and no issue). Now each source's best item gets a place, the code
    keeping at least half of them."""
    fused = _fused(["code"] * 12 + ["docs", "issues", "docs", "prs", "commits"])
    five = cut_fused(fused, 5)
    assert [h.id for h in five] == ["code0", "code1", "code2", "docs12", "issues13"]
    ten = cut_fused(fused, 10)
    assert [h.source for h in ten] == ["code"] * 6 + ["docs", "issues", "prs", "commits"]
    assert [h.id for h in cut_fused(fused, 1)] == ["code0"]
    assert cut_fused(fused, 0) == []
    few_code = _fused(["code", "docs", "docs", "docs", "issues"])
    assert [h.id for h in cut_fused(few_code, 3)] == ["code0", "docs1", "issues4"]
    assert [h.id for h in cut_fused(few_code[:3], 5)] == ["code0", "docs1", "docs2"]


@given(
    sources=st.lists(st.sampled_from(["code", "docs", "issues", "commits"]), max_size=30),
    top_k=st.integers(min_value=0, max_value=12),
)
def test_cut_properties(sources: list[str], top_k: int) -> None:
    fused = _fused(sources)
    out = cut_fused(fused, top_k)
    assert len(out) == min(top_k, len(fused))
    pos = [fused.index(h) for h in out]
    assert pos == sorted(pos) and len(set(pos)) == len(pos)  # the fused order, no repeats
    code_in_plain_cut = sources[:top_k].count("code")  # the code never loses below half
    assert sum(h.source == "code" for h in out) >= min((top_k + 1) // 2, code_in_plain_cut)
    if top_k >= 2 * len(set(sources)):  # room for every source's best item
        assert {h.source for h in out} == set(sources)
    assert cut_fused(fused, top_k) == out


@pytest.mark.parametrize("behaviour", ["dicts", "none", "text-date"])
def test_a_plug_in_answering_something_else_is_a_source_error(behaviour: str) -> None:
    """A third-party source returning dicts, None or a date as text failed the whole query
    in fusion (an internal error, HTTP 500); it is now that source's error."""
    results, statuses, _ = _run([Scripted("code"), Scripted("notes", behaviour)])
    assert statuses == {"code": "ok", "notes": "error"} and "notes" not in results


def test_a_broken_plug_in_breaks_only_what_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One installed package with a plug-in that cannot be imported stopped every ``index``,
    ``status`` and ``--sources`` command on the machine."""
    from ragloom.errors import ConfigError
    from ragloom.sources import registry
    from ragloom.sources.multi import SourceSet

    class Broken:
        name, value = "Broken", "no_such_module_xyz:Thing"

        def load(self) -> object:
            raise ModuleNotFoundError("No module named 'no_such_module_xyz'")

    monkeypatch.setattr(registry, "entry_points", lambda group: [Broken()])
    factories = registry.source_factories()
    assert {"code", "docs", "broken"} <= set(factories)
    with pytest.raises(ConfigError, match="no_such_module_xyz"):
        registry.create_source("broken", SourceContext(tmp_path, tmp_path / ".ragloom"))
    with pytest.raises(ConfigError, match="no_such_module_xyz"):
        SourceSet(tmp_path, tmp_path / ".ragloom", ["docs", "broken"])
    tolerant = SourceSet(tmp_path, tmp_path / ".ragloom", ["docs", "broken"], tolerant=True)
    assert set(tolerant.sources) == {"docs"} and "no_such_module_xyz" in tolerant.broken["broken"]
    assert {r.source: r.status for r in tolerant.sync()} == {"docs": "ok", "broken": "error"}
    tolerant.close()


def _plug_in(name: str, behaviour: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """``Scripted`` installed as a third-party source (an entry point), made as ragloom makes
    one."""
    from ragloom.sources import registry

    class Entry:
        value = "tests:Scripted"

        def __init__(self) -> None:
            self.name = name

        def load(self) -> object:
            return lambda context: Scripted(name, behaviour)

    monkeypatch.setattr(registry, "entry_points", lambda group: [Entry()])
    return registry.create_source(name, SourceContext(tmp_path, tmp_path / ".ragloom"))


def test_a_plug_in_blocking_its_loop_does_not_stall_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``time.sleep`` inside a plug-in's ``async def retrieve`` blocked the event loop every
    source shares: the timeouts could not fire and the query took the sleep's 5 s. A plug-in
    now runs on a loop of its own: its timeout holds and the others answer."""
    from ragloom.sources.isolate import IsolatedSource

    notes = _plug_in("notes", "block", monkeypatch, tmp_path)
    assert isinstance(notes, IsolatedSource) and notes.name == "notes" and notes.enabled
    code = Scripted("code")
    results, status, took = _run([code, notes], per_source_ms=300, total_ms=2000)
    assert status == {"code": "ok", "notes": "timeout"} and len(results["code"]) == 3
    assert took < 2.5, f"answered in {took:.2f} s; the plug-in blocks for 5 s"
    t0 = time.perf_counter()
    run_sync(notes.dispose)  # busy: closed in the background, not waited for
    assert time.perf_counter() - t0 < 1.0


def test_a_plug_in_on_its_own_loop_answers_and_keeps_its_loop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    notes = _plug_in("notes", "ok", monkeypatch, tmp_path)
    before = set(threading.enumerate())
    loops: list[object] = []
    for _ in range(2):
        results, status, _ = _run([Scripted("code"), notes])
        assert status == {"code": "ok", "notes": "ok"} and len(results["notes"]) == 3
        loops.append(notes._loop)
    assert loops[0] is loops[1] is not None  # one loop for the source's life
    assert notes.freshness() == {"items": 3} and notes.behaviour == "ok"  # its own attributes
    (thread,) = [t for t in set(threading.enumerate()) - before if t.name == "ragloom-source-notes"]
    run_sync(notes.dispose)
    assert notes._loop is None
    thread.join(timeout=2.0)
    assert not thread.is_alive() and loops[0].is_closed()  # type: ignore[attr-defined]


def test_built_in_sources_are_not_wrapped(tmp_path: Path) -> None:
    from ragloom.sources import registry
    from ragloom.sources.isolate import IsolatedSource

    docs = registry.create_source("docs", SourceContext(tmp_path, tmp_path / ".ragloom"))
    assert not isinstance(docs, IsolatedSource)


def test_a_hung_plug_in_sync_is_a_failed_sync_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plug-in whose sync never returned held the sources' write lock for ever."""
    from ragloom.errors import SourceSyncError

    hung = _plug_in("notes", "sync-hang", monkeypatch, tmp_path)
    hung.sync_timeout_s = 0.3
    t0 = time.perf_counter()
    with pytest.raises(SourceSyncError, match=r"no answer in 0\.3 s"):
        hung.sync()
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(SourceSyncError, match="last sync has given no answer yet"):
        _plug_in("notes", "ok", monkeypatch, tmp_path).sync()  # the hung one still runs
    with pytest.raises(RuntimeError, match="sync exploded"):  # its own error, as it raised it
        _plug_in("notes2", "sync-raise", monkeypatch, tmp_path).sync()
    assert _plug_in("notes3", "ok", monkeypatch, tmp_path).sync().source == "notes3"


def test_calls_given_up_behind_a_blocked_one_are_not_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each question that timed out behind a blocked plug-in call ran later anyway, one after
    another, blocking the source again (a trial: four questions kept it blocked for 40 s)."""
    notes = _plug_in("notes", "block-short", monkeypatch, tmp_path)

    async def four() -> list[str]:
        runs = [
            retrieve_all([notes], SourceQuery("q"), {}, per_source_ms=100, total_ms=500)
            for _ in range(4)
        ]
        done = await asyncio.gather(*runs)
        return [statuses[0].status for _, statuses in done]

    assert run_sync(four) == ["timeout"] * 4
    time.sleep(1.5)  # the first call ends; the three given up behind it must not start
    assert notes.inner.calls == 1
    run_sync(notes.dispose)


def test_a_plug_in_freshness_and_dispose_are_bounded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plug-in's ``freshness`` that never returned hung a server's ``status``; a slow
    ``dispose`` of a source never asked was waited for whole (8 s on every ``status``)."""
    from ragloom.errors import DbError
    from ragloom.sources import isolate

    monkeypatch.setattr(isolate, "PLUGIN_FRESHNESS_TIMEOUT_S", 0.2)
    hung = _plug_in("notes", "freshness-hang", monkeypatch, tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(DbError, match="freshness gave no answer"):
        hung.freshness()
    slow = _plug_in("notes", "slow-dispose", monkeypatch, tmp_path)
    run_sync(slow.dispose)  # never asked: waited for up to PLUGIN_DISPOSE_WAIT_S, not 8 s
    slow_later = _plug_in("notes", "slow-dispose", monkeypatch, tmp_path)
    slow_later.dispose_later()  # a server's: not waited for at all
    assert time.perf_counter() - t0 < 0.2 + isolate.PLUGIN_DISPOSE_WAIT_S + 1.5
    # asked again while the last freshness still runs: no second thread (a server's status,
    # polled, started one every time, for ever)
    threads = sum(t.name == "ragloom-freshness-notes" for t in threading.enumerate())
    again = _plug_in("notes", "freshness-hang", monkeypatch, tmp_path)
    t1 = time.perf_counter()
    with pytest.raises(DbError, match="last freshness has given no answer yet"):
        again.freshness()
    assert time.perf_counter() - t1 < 0.1
    assert sum(t.name == "ragloom-freshness-notes" for t in threading.enumerate()) == threads


def test_closing_waits_for_a_plug_in_dispose_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``ragloom status`` closed its sources without waiting (a server's way): the process
    ended before a plug-in's dispose did, so its clients and stores were never closed."""
    from ragloom.sources.multi import SourceSet

    _plug_in("notes", "short-dispose", monkeypatch, tmp_path)  # installs the entry point
    DISPOSED.clear()
    SourceSet(tmp_path, tmp_path / ".ragloom", ["notes"]).close()
    assert DISPOSED == ["notes"]
    SourceSet(tmp_path, tmp_path / ".ragloom", ["notes"]).close(wait=False)
    assert DISPOSED == ["notes"]  # started, not waited for
    time.sleep(1.0)
    assert DISPOSED == ["notes", "notes"]
