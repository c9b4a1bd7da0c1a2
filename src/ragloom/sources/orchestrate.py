"""Querying several sources at once: parallel, each under its own timeout, then fused.

(tamma phase 3 ``retrieveFromAllSources`` / ``retrieveWithTimeout`` and phase 5 ranking.)

1. Every enabled source's ``retrieve`` runs as its own asyncio task under ``asyncio.wait_for``
   with the per-source timeout (default 2000 ms); all of them together are bounded by the total
   timeout (default 5000 ms) with ``asyncio.wait``, which returns at the deadline whatever the
   tasks do (a task that ignores its cancellation is abandoned, not awaited).
2. A source that times out, raises or is disabled is left out of this answer and reported in
   ``statuses`` (``{source, count, latency_ms, status: ok|timeout|error|disabled}``); in strict
   mode the first such failure raises :class:`~ragloom.errors.SearchError` instead. A source
   that was never synced here (its ``indexed()`` is false) is ``not_indexed``, with a
   ``message`` naming the command that indexes it; it is no failure, even in strict mode.
3. With both ``code`` and ``docs``, code hits in files the docs source holds are dropped (the
   code index chunks Markdown and text too): each section counts once, with the docs weight.
4. Weighted RRF over the per-source lists (:func:`ragloom.retrieve.fusion.rrf_fuse_explain`,
   k = 60, weights from the settings: code 1.0, docs 0.3, issues 0.2, prs 0.2, commits 0.1),
   scores divided by the top one, then the recency boost of tamma phase 5
   (:func:`ragloom.retrieve.fusion.recency_boost`: 0.1 for a new item, decaying over 30 days)
   applied as a factor ``score * (1 + boost)`` to the items that have a date.

   Why a factor and not the code retriever's additive boost after min-max: across sources the
   low-weight lists sit near 0 after min-max (a commit at rank 1 is 0.1/61 against code's 1/61),
   so an additive 0.1 ordered the commits by age instead of relevance (a commit's own subject
   found it first 0.866 of the time among code, docs and commits, against 0.975 alone;
   docs/sources.md). A factor keeps each source's weight meaningful and lets recency reorder
   only items within 10 % of each other (about six RRF ranks at k = 60).
5. The fused list is cut to ``top_k`` with a place for each source (:func:`cut_fused`): with
   the weights above a non-code item ranks below most of the code list, so a plain cut
   answered code alone whatever ``-k`` was.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ragloom.errors import SearchError
from ragloom.retrieve.config import RRF_K_DEFAULT, RecencyConfig
from ragloom.retrieve.fusion import SECONDS_PER_DAY, recency_boost, rrf_fuse_explain
from ragloom.sources.base import RetrieveOptions, Source, SourceHit, SourceQuery

__all__ = [
    "DEFAULT_PER_SOURCE_MS",
    "DEFAULT_TOTAL_MS",
    "MultiSearchResult",
    "SourceStatus",
    "cut_fused",
    "fuse_sources",
    "retrieve_all",
    "run_sync",
]

DEFAULT_PER_SOURCE_MS = 2000.0
"""tamma ``timeouts.per_source_ms``."""
DEFAULT_TOTAL_MS = 5000.0
"""tamma ``timeouts.total_ms``."""
_ABANDON_GRACE_S = 0.05
"""After the answer, cancelled tasks get this long to finish before the loop is closed."""

T = TypeVar("T")


@dataclass(slots=True)
class SourceStatus:
    """How one source did for one query."""

    source: str
    count: int
    latency_ms: float
    status: str
    error: str | None = None
    message: str | None = None
    """What to do about the status (``not_indexed``: the command that indexes the source)."""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "source": self.source,
            "count": self.count,
            "latency_ms": round(self.latency_ms, 2),
            "status": self.status,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.message is not None:
            out["message"] = self.message
        return out


@dataclass(slots=True)
class MultiSearchResult:
    """Fused hits of several sources and how each source did."""

    hits: list[SourceHit]
    statuses: list[SourceStatus]
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def sources_json(self) -> list[dict[str, object]]:
        return [s.to_dict() for s in self.statuses]


def _checked_hits(name: str, found: object) -> list[SourceHit]:
    """A source's answer as a list of hits, or TypeError (reported as the source's error) for
    anything else: a third-party source that returns dicts, None or dates as text must not
    fail the whole query further on, in fusion."""
    if not isinstance(found, list | tuple):
        raise TypeError(f"{name}.retrieve returned {type(found).__name__}, not a list of hits")
    for h in found:
        if not isinstance(h, SourceHit):
            raise TypeError(f"{name}.retrieve returned a {type(h).__name__}, not a SourceHit")
        if not isinstance(h.score, int | float) or (
            h.date is not None and not isinstance(h.date, int | float)
        ):
            raise TypeError(f"{name}: hit {h.id!r} has a score or date that is not a number")
    return list(found)


async def _one(
    src: Source, query: SourceQuery, opts: RetrieveOptions, per_source_s: float
) -> tuple[list[SourceHit], SourceStatus]:
    t0 = time.perf_counter()
    if not src.enabled:
        return [], SourceStatus(src.name, 0, 0.0, "disabled")
    indexed = getattr(src, "indexed", None)

    async def ask() -> list[SourceHit] | None:
        # a source that can tell (an ``indexed()`` method: the stored sources) and was never
        # synced here is reported as such, not as an empty ``ok``
        if callable(indexed) and not await asyncio.to_thread(indexed):
            return None
        return _checked_hits(src.name, await src.retrieve(query, opts))

    try:
        found = await asyncio.wait_for(ask(), per_source_s)
    except TimeoutError:
        ms = (time.perf_counter() - t0) * 1000
        return [], SourceStatus(
            src.name, 0, ms, "timeout", f"no answer in {per_source_s * 1000:.0f} ms"
        )
    except Exception as exc:  # a failing source is reported, never the end of the query
        ms = (time.perf_counter() - t0) * 1000
        return [], SourceStatus(src.name, 0, ms, "error", f"{type(exc).__name__}: {exc}")
    ms = (time.perf_counter() - t0) * 1000
    if found is None:
        command = getattr(src, "index_command", None) or f"ragloom index --sources {src.name}"
        return [], SourceStatus(
            src.name,
            0,
            ms,
            "not_indexed",
            message=f"the {src.name} source is not indexed here; index it with `{command}`",
        )
    return list(found), SourceStatus(src.name, len(found), ms, "ok")


async def retrieve_all(
    sources: Sequence[Source],
    query: SourceQuery,
    options: Mapping[str, RetrieveOptions],
    *,
    per_source_ms: float = DEFAULT_PER_SOURCE_MS,
    total_ms: float = DEFAULT_TOTAL_MS,
    strict: bool = False,
) -> tuple[dict[str, list[SourceHit]], list[SourceStatus]]:
    """Each source's hits (only those that answered) and every source's status, in order."""
    t0 = time.perf_counter()
    per_s = max(per_source_ms, 0.0) / 1000
    tasks = {
        src.name: asyncio.create_task(
            _one(src, query, options.get(src.name, RetrieveOptions()), per_s),
            name=f"ragloom-source-{src.name}",
        )
        for src in sources
    }
    if tasks:
        await asyncio.wait(tasks.values(), timeout=max(total_ms, 0.0) / 1000)
    results: dict[str, list[SourceHit]] = {}
    statuses: list[SourceStatus] = []
    for name, task in tasks.items():
        if task.done() and not task.cancelled():
            hits, status = task.result()
        else:
            task.cancel()
            ms = (time.perf_counter() - t0) * 1000
            hits, status = (
                [],
                SourceStatus(name, 0, ms, "timeout", f"total timeout {total_ms:.0f} ms"),
            )
        statuses.append(status)
        if status.status == "ok":
            results[name] = hits
    if strict:
        bad = [s for s in statuses if s.status in ("timeout", "error")]
        if bad:
            raise SearchError(
                "strict mode: " + "; ".join(f"source {s.source} {s.status}: {s.error}" for s in bad)
            )
    return results, statuses


def fuse_sources(
    results: Mapping[str, Sequence[SourceHit]],
    weights: Mapping[str, float],
    *,
    k: float = RRF_K_DEFAULT,
    recency: RecencyConfig | None = None,
    now: float | None = None,
) -> list[SourceHit]:
    """Weighted RRF over the sources' lists, then normalisation and recency (see the module
    docstring). Every returned hit's ``score`` is its final score and ``explain`` says how."""
    by_uid: dict[str, SourceHit] = {}
    source_of: dict[str, str] = {}
    lists: dict[str, list[tuple[str, float]]] = {}
    for name, hits in results.items():
        if weights.get(name, 0.0) <= 0:  # a weight of 0 leaves the source's items out
            continue
        seq: list[tuple[str, float]] = []
        for h in hits:
            uid = f"{name}\x00{h.id}"
            by_uid.setdefault(uid, h)
            source_of[uid] = name
            seq.append((uid, h.score))
        lists[name] = seq
    fused = rrf_fuse_explain(lists, {n: weights.get(n, 0.0) for n in lists}, k)
    if not fused:
        return []
    rrf = {it.id: it for it in fused}
    top = fused[0].score
    norm = {it.id: (it.score / top if top > 0 else 0.0) for it in fused}
    cfg = recency if recency is not None else RecencyConfig()
    when = time.time() if now is None else now
    dates = {uid: h.date for uid, h in by_uid.items() if h.date is not None}
    final: dict[str, float] = {}
    for uid, base in norm.items():
        date = dates.get(uid)
        lift = 0.0 if date is None else recency_boost(when - date, cfg.boost, cfg.decay_days)
        final[uid] = base * (1.0 + lift)
    boosted = sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))
    out: list[SourceHit] = []
    for uid, score in boosted:
        h = by_uid[uid]
        item = rrf[uid]
        date = dates.get(uid)
        explain: dict[str, object] = {
            "source_score": h.score,
            "rrf": {
                "score": item.score,
                "rank": dict(item.ranks),
                "weight": weights.get(source_of[uid], 0.0),
            },
            "normalised": norm[uid],
            "recency": {
                "boost": score - norm[uid],
                "factor": score / norm[uid] if norm[uid] else 1.0,
                "age_days": None
                if date is None
                else round(max(when - date, 0.0) / SECONDS_PER_DAY, 2),
                "max_boost": cfg.boost,
                "decay_days": cfg.decay_days,
            },
        }
        h.explain = {**h.explain, **explain}
        h.score = score
        out.append(h)
    return out


def cut_fused(hits: Sequence[SourceHit], top_k: int, *, main: str = "code") -> list[SourceHit]:
    """The best ``top_k`` of the fused list ``hits`` (best first), with a place for each
    source: every source that answered and is not among the first ``top_k`` gets its best
    item in, taking the place of the lowest-ranked item of a source that has more than one,
    while ``main`` (the code) keeps at least half the places (rounded up) when it answered
    that many. The answer keeps the fused order.

    Why: with tamma's weights (code 1.0, docs 0.3, issues and prs 0.2, commits 0.1) a
    non-code item's first rank scores below the code list's 50th, so the first ``top_k``
    were code alone at any ``-k``, and ``--sources code,docs,issues`` answered as if
    ``--sources code``. tamma answers ``top_k`` per source and lets the budget cut; ragloom
    keeps ``-k`` as the answer's length (``-k 5`` printed 13 hits before 2026-11-23) and
    gives each source its best item."""
    if top_k <= 0:
        return []
    top = list(hits[:top_k])
    if len(hits) <= top_k:
        return top
    present = {h.source for h in top}
    missing: list[SourceHit] = []
    for h in hits[top_k:]:
        if h.source not in present:
            present.add(h.source)
            missing.append(h)
    if not missing:
        return top
    floor = min((top_k + 1) // 2, sum(1 for h in hits if h.source == main))
    counts: dict[str, int] = {}
    for h in top:
        counts[h.source] = counts.get(h.source, 0) + 1
    added: list[SourceHit] = []
    for item in missing:  # the best of them first
        for i in range(len(top) - 1, -1, -1):
            src = top[i].source
            if counts[src] > 1 and (src != main or counts[src] > floor):
                counts[src] -= 1
                counts[item.source] = 1
                del top[i]
                added.append(item)
                break
        else:
            break  # no place left to give
    order = {id(h): i for i, h in enumerate(hits)}
    return sorted(top + added, key=lambda h: order[id(h)])


def run_sync(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on a fresh event loop and return at once when it returns.

    Unlike :func:`asyncio.run`, tasks still pending (a source that ignores cancellation) and
    worker threads (a source blocked in a thread) do not hold the answer back: they get
    :data:`_ABANDON_GRACE_S` and are then abandoned with the loop.
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait(pending, timeout=_ABANDON_GRACE_S))
        loop.close()
