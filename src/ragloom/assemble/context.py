"""``assemble_context``: ranked hits -> a deduplicated, stitched, fresh context within budget.

Pipeline (ploke-rag-plan.md section 2; tamma phase 6):

1. filter hits by ``policy.kinds`` and rank them (score desc, then path, line, id);
2. read each hit from disk, verifying freshness (:mod:`.snippets`);
3. drop exact and near duplicates (:mod:`.dedup`);
4. merge overlapping/adjacent ranges of a file into segments (:mod:`.stitch`);
5. trim each segment to the part cap, keeping its signature (:mod:`.trim`);
6. choose segments by relevance density under the budget and per-file cap (:mod:`.select`);
7. stitch chosen segments of one file into parts, with elision markers for gaps;
8. order parts (:mod:`.order`), render (:mod:`.render`), count the rendered text with the real
   counter and drop the least valuable part until every limit holds.

Guarantees (tested by property): ``counter.count(result.text) <= budget.available``, every
part's rendered block ``<= min(per_part_max, per_file_max)``, each file's blocks together
``<= per_file_max``, and identical inputs give identical parts and text. With
``caps_flexible`` budgets (``TokenBudget.for_total``'s), when no part fits those caps they are
lifted to ``available`` (a small budget, one long block): one large part rather than none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragloom.assemble.budget import AssemblyPolicy, TokenBudget
from ragloom.assemble.dedup import DedupReport, dedup_exact, dedup_near
from ragloom.assemble.order import DEFINITION_KINDS, OrderItem, order_items, short_name
from ragloom.assemble.render import BlockMeta, frame, render, render_block
from ragloom.assemble.select import Item, greedy_select
from ragloom.assemble.snippets import FileReader, Resolver, Snippet, fetch_snippets
from ragloom.assemble.stitch import Draft, Segment, build_segments, draft_ranges, draft_text
from ragloom.assemble.tokens import TokenCounter
from ragloom.assemble.trim import trim_segment
from ragloom.errors import ConfigError, ContextError
from ragloom.ingest.chunker import part_label
from ragloom.retrieve.query.lexer import lex
from ragloom.types import Hit

__all__ = [
    "VALUE_FLOOR",
    "AssembledContext",
    "AssemblyStats",
    "ContextPart",
    "assemble_context",
]

VALUE_FLOOR = 0.05
"""ragloom's choice: relevance values are scores min-max normalised into [0.05, 1], so even the
lowest-ranked hit has some value and scores of any sign or scale (RRF, BM25, rerank logits)
give the same selection."""


@dataclass(slots=True)
class ContextPart:
    """One part of the context: stitched ranges of one file (ploke ``ContextPart``)."""

    id: str
    file_path: str
    ranges: list[tuple[int, int]]
    kind: str
    text: str
    score: float
    modality: str
    symbol: str
    language: str
    tokens: int
    source: str = "code"
    symbols: list[str] = field(default_factory=list)
    hit_ids: list[str] = field(default_factory=list)
    trimmed: bool = False
    relation: str | None = None
    """``callee`` or ``caller`` for a definition structural context added
    (:mod:`ragloom.assemble.structure`); None for the parts retrieval chose."""
    related_to: str | None = None
    """With ``relation``: the symbol of the selected code it relates to."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``relation`` and ``related_to`` only on structural parts)."""
        out: dict[str, Any] = {
            "id": self.id,
            "file_path": self.file_path,
            "ranges": [[a, b] for a, b in self.ranges],
            "kind": self.kind,
            "symbol": self.symbol,
            "symbols": list(self.symbols),
            "language": self.language,
            "source": self.source,
            "score": self.score,
            "modality": self.modality,
            "tokens": self.tokens,
            "trimmed": self.trimmed,
            "hit_ids": list(self.hit_ids),
            "text": self.text,
        }
        if self.relation is not None:
            out["relation"] = self.relation
            out["related_to"] = self.related_to
        return out


@dataclass(slots=True)
class AssemblyStats:
    """What assembly did (ploke ``ContextStats`` plus freshness and timing)."""

    tokens_total: int
    tokens_per_part: list[int]
    budget: dict[str, Any]
    unique_files: int
    duplication_ratio: float
    coverage_by_kind: dict[str, float]
    stale_reresolved: int
    stale_dropped: int
    truncated: bool
    timings_ms: dict[str, float]
    hits_in: int = 0
    hits_included: int = 0
    duplicates: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    dropped_for_budget: int = 0

    def shortfall_notes(self) -> list[str]:
        """Why hits are missing from the context, for an agent that gets less than it asked:
        hits whose code could not be found again in their changed files, and hits no part of
        which fits the budget."""
        notes: list[str] = []
        if self.stale_dropped:
            notes.append(
                f"{self.stale_dropped} hits left out: their files changed since indexing and "
                "the code was not found again (`ragloom index` brings the index up to date)"
            )
        if self.dropped_for_budget and not self.tokens_per_part:
            notes.append(
                f"no part of the {self.hits_in} hits fits the budget of "
                f"{self.budget.get('available', self.budget.get('max_total'))} tokens"
            )
        return notes

    @property
    def coverage(self) -> float:
        """Share of input hits (after the kind filter) shown at least in part."""
        return self.hits_included / self.hits_in if self.hits_in else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "tokens_total": self.tokens_total,
            "tokens_per_part": list(self.tokens_per_part),
            "budget": dict(self.budget),
            "unique_files": self.unique_files,
            "duplication_ratio": self.duplication_ratio,
            "duplicates": dict(self.duplicates),
            "coverage_by_kind": dict(self.coverage_by_kind),
            "coverage": self.coverage,
            "hits_in": self.hits_in,
            "hits_included": self.hits_included,
            "stale_reresolved": self.stale_reresolved,
            "stale_dropped": self.stale_dropped,
            "refused": self.refused,
            "dropped_for_budget": self.dropped_for_budget,
            "truncated": self.truncated,
            "timings_ms": dict(self.timings_ms),
        }


@dataclass(slots=True)
class AssembledContext:
    """The assembled context: ordered parts, stats, and the rendered text."""

    parts: list[ContextPart]
    stats: AssemblyStats
    text: str
    query: str = ""
    format: str = "xml"
    structure: dict[str, int] | None = None
    """What structural context added (``related``, ``tokens``, ``callees``, ``callers``,
    ``candidates``); None when it was not asked for."""
    notes: list[str] = field(default_factory=list)
    """Warnings about the answer (the search's notes, then why hits are missing), as the
    servers' ``notes``; set by ``Index.assemble``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``structure`` only when structural context was asked for)."""
        out: dict[str, Any] = {
            "query": self.query,
            "format": self.format,
            "parts": [p.to_dict() for p in self.parts],
            "stats": self.stats.to_dict(),
            "text": self.text,
            "notes": list(self.notes),
        }
        if self.structure is not None:
            out["structure"] = dict(self.structure)
        return out


class _Counter:
    """Memoising wrapper: a text is counted once per assembly."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.memo: dict[str, int] = {}

    def count(self, text: str) -> int:
        got = self.memo.get(text)
        if got is None:
            got = self.counter.count(text)
            if isinstance(got, bool) or not isinstance(got, int) or got < 0:
                raise ContextError(f"token counter returned {got!r} for a text")
            self.memo[text] = got
        return got


def _modality(snippets: Sequence[Snippet]) -> str:
    mods = {m for sn in snippets for m in sn.hit.ranks if m in ("bm25", "dense")}
    mods |= {m for sn in snippets for m in sn.hit.scores if m in ("bm25", "dense")}
    if len(mods) == 2:
        return "hybrid"
    return next(iter(mods)) if mods else "unknown"


def _values(ranked: Sequence[tuple[int, Snippet]]) -> dict[int, float]:
    scores = [sn.hit.score for _, sn in ranked]
    finite = [s for s in scores if math.isfinite(s)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out: dict[int, float] = {}
    for rank, sn in ranked:
        s = sn.hit.score
        if not math.isfinite(s) or hi <= lo:
            norm = 1.0 if hi <= lo and math.isfinite(s) else 0.0
        else:
            norm = (s - lo) / (hi - lo)
        out[rank] = VALUE_FLOOR + (1.0 - VALUE_FLOOR) * norm
    return out


def assemble_context(
    query: str,
    hits: Sequence[Hit],
    *,
    root: Path,
    budget: TokenBudget,
    policy: AssemblyPolicy,
    counter: TokenCounter,
    embeddings: Mapping[str, np.ndarray] | None = None,
    resolver: Resolver | None = None,
    read_files: FileReader | None = None,
) -> AssembledContext:
    """Assemble ``hits`` (ranked search results) into a context that fits ``budget``.

    ``root`` is the indexed root (no file outside it is read); ``embeddings`` maps hit ids to
    vectors for near-duplicate removal; ``resolver`` re-parses changed files (default: the
    chunker); ``read_files`` gives the files' bytes instead of ``root`` (a node without the
    source tree). Raises :class:`ConfigError` for bad arguments.
    """
    if not isinstance(budget, TokenBudget):
        raise ConfigError(f"budget must be a TokenBudget, got {type(budget).__name__}")
    if not isinstance(policy, AssemblyPolicy):
        raise ConfigError(f"policy must be an AssemblyPolicy, got {type(policy).__name__}")
    if not isinstance(counter, TokenCounter):
        raise ConfigError("counter must provide count(text) and count_batch(texts)")
    timings: dict[str, float] = {}
    t0 = t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[name] = round((now - t) * 1000.0, 3)
        t = now

    tc = _Counter(counter)
    fmt = policy.format
    hits_in = [h for h in hits if policy.kinds is None or h.kind in policy.kinds]
    ranked_hits = sorted(hits_in, key=lambda h: (-_finite(h.score), h.path, h.start_line, h.id))
    snippets, files, fetch = fetch_snippets(
        ranked_hits, Path(root), resolver=resolver, read_files=read_files
    )
    lap("fetch")

    dup = DedupReport()
    kept = dedup_exact(snippets, dup)
    kept = dedup_near(kept, embeddings, float(policy.dedup_threshold), dup)
    ranked = list(enumerate(kept))
    values = _values(ranked)
    segments = build_segments(ranked, policy.fill_gap_lines, dup)
    lap("dedup")

    head, sep, tail = frame(fmt)
    frame_tokens = tc.count(head + tail) if head or tail else 0
    sep_tokens = tc.count(sep)
    part_cap = budget.part_cap
    file_cap = budget.file_cap

    def block_of(segs: Sequence[Segment]) -> str:
        path = segs[0].path
        best = min((m for s in segs for m in s.shown_members()), key=lambda m: m[0])[1]
        meta = BlockMeta(
            source=best.hit.source,
            path=path,
            ranges=draft_ranges(segs),
            symbol=part_label(best.hit.id, best.hit.text) or best.hit.symbol,
            kind=best.hit.kind,
            language=best.hit.language,
            score=best.hit.score,
        )
        return render_block(fmt, meta, draft_text(segs, files[path]), policy.include_scores)

    # the question's identifiers: a best hit too long to show whole is shown around them
    focus = [w.text for w in lex(query) if w.typed]

    def trim(seg: Segment, cap: int) -> int | None:
        return trim_segment(
            seg, files[seg.path], cap, lambda s: tc.count(block_of([s])), counter.count_batch,
            focus,
        )  # fmt: skip

    def fit(seg: Segment, cap: int) -> tuple[list[tuple[Segment, int]], int]:
        """``seg`` trimmed to ``cap``; when that hides lines of its best hit that the hit's
        own lines would show, the hit's own segment and the rest re-segmented instead."""
        got = trim(seg, cap)
        best = seg.members[0][1]
        own_range = (best.start_line, best.end_line)
        if own_range == (seg.start, seg.end) or _shown_lines(seg, best) == (
            best.end_line - best.start_line + 1
        ):
            return ([(seg, got)], 0) if got is not None else ([], 1)
        stitched_shows = _shown_lines(seg, best) if got is not None else 0
        inner = [
            m
            for m in seg.members
            if best.start_line <= m[1].start_line and m[1].end_line <= best.end_line
        ]
        own = Segment(seg.path, best.start_line, best.end_line, inner)
        own_got = trim(own, cap)
        if own_got is None or _shown_lines(own, best) <= stitched_shows:
            return ([(seg, got)], 0) if got is not None else ([], 1)
        # the members that do not touch the best hit's lines stitch and trim as before; those
        # that overlap it (an enclosing class chunk) are left out: their lines would repeat
        rest = [
            m
            for m in seg.members
            if m[1].end_line < best.start_line or m[1].start_line > best.end_line
        ]
        out: list[tuple[Segment, int]] = [(own, own_got)]
        dropped = sum(1 for m in seg.members if m not in inner and m not in rest)
        for sub in build_segments(sorted(rest), policy.fill_gap_lines, DedupReport()):
            got_sub, n = fit(sub, cap)
            out.extend(got_sub)
            dropped += n
        return out, dropped

    def shows_top(got: Sequence[tuple[Segment, int]]) -> bool:
        return any(r == 0 for seg, _ in got for r, _ in seg.shown_members())

    def trimmed(cap: int, top_cap: int = 0) -> tuple[list[tuple[Segment, int]], int]:
        """The segments trimmed to ``cap`` tokens, and how many could not be; the best hit's
        segment may take up to ``top_cap`` when nothing of that hit fits ``cap``."""
        out: list[tuple[Segment, int]] = []
        dropped = 0
        for seg in segments:
            got, n = fit(seg, cap)
            if top_cap > cap and seg.members[0][0] == 0 and not shows_top(got):
                got, n = fit(seg, top_cap)
                if not shows_top(got):
                    got, n = fit(seg, cap)
            out.extend(got)
            dropped += n
        return out, dropped

    # flexible caps: the best hit's part may take the per-file cap when the part cap hides it
    # (less the separator its selection weighs with: at exactly the file cap it did not fit)
    top_cap = (
        min(file_cap - sep_tokens, budget.available - frame_tokens) if budget.caps_flexible else 0
    )
    # a part is selected with its separator's tokens (Item.weight below), against the file cap
    cap = min(part_cap, file_cap - sep_tokens, budget.available - frame_tokens)
    candidates, too_big = trimmed(cap, top_cap)
    if not candidates and segments and budget.caps_flexible:
        # No part fits the per-part cap (a quarter of a small budget, or a hit that is one
        # long block): rather than an empty context, the parts may take the whole budget.
        part_cap = file_cap = budget.available - frame_tokens
        candidates, too_big = trimmed(part_cap - sep_tokens)
    trimmed_any = too_big > 0 or any(seg.trimmed for seg, _ in candidates)
    lap("trim")

    items = [
        Item(
            weight=tok + sep_tokens,
            value=sum(values[r] for r, _ in seg.shown_members()),
            group=seg.path,
        )
        for seg, tok in candidates
    ]
    # the part that shows the best-ranked hit is taken first (when it fits on its own)
    top = next(
        (i for i, (seg, _) in enumerate(candidates) if any(r == 0 for r, _ in seg.shown_members())),
        None,
    )
    chosen = greedy_select(items, budget.available - frame_tokens + sep_tokens, file_cap, top)
    # a segment no trim could fit counts as left out for the budget, as one not chosen does
    dropped_for_budget = len(candidates) - len(chosen) + too_big
    picked = [candidates[i][0] for i in chosen]
    lap("select")

    drafts = _stitch(picked, part_cap, block_of, tc)
    # per-file cap with real counts (stitching may change counts slightly)
    drafts = _enforce_file_cap(drafts, file_cap, values)
    lap("stitch")

    while True:
        order = order_items([_order_item(d) for d in drafts], policy.ordering)
        drafts = [drafts[i] for i in order]
        text = render(fmt, [d.block for d in drafts])
        total = tc.count(text)
        if not drafts and total > budget.available:  # even the empty JSON document
            text, total = "", 0
        if total <= budget.available or not drafts:
            break
        worst = min(
            range(len(drafts)), key=lambda i: (_draft_value(drafts[i], values), -drafts[i].rank)
        )
        drafts.pop(worst)
        dropped_for_budget += 1
    lap("render")

    parts = [_to_part(d, files[d.path]) for d in drafts]
    included = {hid for p in parts for hid in p.hit_ids}
    by_kind_total: dict[str, int] = {}
    by_kind_in: dict[str, int] = {}
    for h in hits_in:
        by_kind_total[h.kind] = by_kind_total.get(h.kind, 0) + 1
        if h.id in included:
            by_kind_in[h.kind] = by_kind_in.get(h.kind, 0) + 1
    n_in = len(hits_in)
    timings["total"] = round((time.perf_counter() - t0) * 1000.0, 3)
    stats = AssemblyStats(
        tokens_total=total,
        tokens_per_part=[p.tokens for p in parts],
        budget=budget.to_dict(),
        unique_files=len({p.file_path for p in parts}),
        duplication_ratio=(dup.total / len(snippets)) if snippets else 0.0,
        coverage_by_kind={k: by_kind_in.get(k, 0) / v for k, v in sorted(by_kind_total.items())},
        stale_reresolved=fetch.stale_reresolved,
        stale_dropped=fetch.stale_dropped,
        truncated=trimmed_any or dropped_for_budget > 0 or any(p.trimmed for p in parts),
        timings_ms=timings,
        hits_in=n_in,
        hits_included=sum(1 for h in hits_in if h.id in included),
        duplicates={"exact": dup.exact, "near": dup.near, "overlap": dup.overlap},
        refused=fetch.refused,
        dropped_for_budget=dropped_for_budget,
    )
    return AssembledContext(parts=parts, stats=stats, text=text, query=query, format=fmt)


def _shown_lines(seg: Segment, sn: Snippet) -> int:
    """How many of ``sn``'s lines ``seg`` shows."""
    return sum(max(0, min(b, sn.end_line) - max(a, sn.start_line) + 1) for a, b in seg.shown)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else -math.inf


def _stitch(picked: Sequence[Segment], part_cap: int, block_of: Any, tc: _Counter) -> list[Draft]:
    """Merge chosen segments of one file, in source order, while the block fits the part cap."""
    by_path: dict[str, list[Segment]] = {}
    for seg in picked:
        by_path.setdefault(seg.path, []).append(seg)
    drafts: list[Draft] = []
    for path in sorted(by_path):
        segs = sorted(by_path[path], key=lambda s: s.start)
        cur: list[Segment] = [segs[0]]
        cur_block: str = block_of(cur)
        for seg in segs[1:]:
            merged = [*cur, seg]
            block = block_of(merged)
            if tc.count(block) <= part_cap:
                cur, cur_block = merged, block
                continue
            drafts.append(Draft(path, cur, tc.count(cur_block), cur_block))
            cur = [seg]
            cur_block = block_of(cur)
        drafts.append(Draft(path, cur, tc.count(cur_block), cur_block))
    return drafts


def _draft_value(d: Draft, values: Mapping[int, float]) -> float:
    return sum(values[r] for s in d.segments for r, _ in s.shown_members())


def _enforce_file_cap(
    drafts: list[Draft], file_cap: int, values: Mapping[int, float]
) -> list[Draft]:
    out: list[Draft] = []
    by_path: dict[str, list[Draft]] = {}
    for d in drafts:
        by_path.setdefault(d.path, []).append(d)
    for path in sorted(by_path):
        group = by_path[path]
        while sum(d.tokens for d in group) > file_cap:
            worst = min(group, key=lambda d: (_draft_value(d, values), -d.rank))
            group.remove(worst)
        out.extend(group)
    return out


def _order_item(d: Draft) -> OrderItem:
    members = [sn for s in d.segments for _, sn in s.shown_members()]
    best = min((m for s in d.segments for m in s.shown_members()), key=lambda m: m[0])
    defines = frozenset(
        short_name(sn.hit.symbol)
        for sn in members
        if sn.hit.kind in DEFINITION_KINDS and sn.hit.symbol
    )
    return OrderItem(
        path=d.path,
        score=_finite(best[1].hit.score),
        rank=best[0],
        first_line=d.first_line,
        defines=defines,
        text=d.block,
    )


def _to_part(d: Draft, lines: Sequence[str]) -> ContextPart:
    members = sorted((m for s in d.segments for m in s.shown_members()), key=lambda m: m[0])
    best = members[0][1]
    hit = best.hit
    return ContextPart(
        id=hit.id,
        file_path=d.path,
        ranges=draft_ranges(d.segments),
        kind=hit.kind,
        text=draft_text(d.segments, lines),
        score=hit.score,
        modality=_modality([sn for _, sn in members]),
        symbol=hit.symbol,
        language=hit.language,
        tokens=d.tokens,
        source=hit.source,
        symbols=[sn.hit.symbol for _, sn in members if sn.hit.symbol],
        hit_ids=[sn.hit.id for _, sn in members],
        trimmed=any(s.trimmed for s in d.segments),
    )
