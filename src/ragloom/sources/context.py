"""Context assembly over several sources: code through the assembler, other items beside it.

The least invasive route (the assembler is untouched): the fused hits are split in two. Code
hits go through :func:`ragloom.assemble.assemble_context` exactly as ``ragloom context`` sends
them (freshness checks, dedup, stitching, trimming), with the budget that the other items leave.
Every other item (a documentation section, a commit, an issue, a pull request) becomes one part,
rendered with the same :func:`~ragloom.assemble.render.render_block` as code parts, so each
format shows it the same way: ``source`` is the source name, ``path`` the item's URL (or its
label when it has none: ``commit 1a2b3c4d5e``, ``issue #12``; a document's path), ``symbol`` its
title, ``kind`` its kind; the text starts with an attribution line (the label and the URL).

Budget: the non-code items, taken in fused order, get at most half of the available tokens
(:data:`NON_CODE_SHARE`) and one part cap each (longer items are cut at a line); the code gets
the rest. Code parts come first (the assembler's order), then the other items in fused order;
the whole text is counted with the real counter and trailing non-code parts, then trailing code
parts, are dropped until it fits (the budget holds at any size: until 2026-11-28 code always got
at least 64 tokens, so ``--budget 1`` gave 55).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
from ragloom.assemble.context import AssembledContext, ContextPart
from ragloom.assemble.render import BlockMeta, render, render_block
from ragloom.sources.base import SourceHit
from ragloom.types import Hit

if TYPE_CHECKING:
    from ragloom.api import Index
    from ragloom.assemble.budget import Format
    from ragloom.assemble.tokens import TokenCounter

__all__ = ["NON_CODE_SHARE", "assemble_sources", "item_label"]

NON_CODE_SHARE = 0.5
"""At most this share of the available tokens goes to non-code items (ragloom's choice: the
code stays the main answer; with the tamma weights non-code items rank below most code)."""


def item_label(h: SourceHit) -> str:
    """How a person cites the item: ``commit <short sha>``, ``issue #12``, ``pull request #7``,
    a document path (with its lines), or ``<source> <id>``."""
    a = h.attribution
    if "commit" in a:
        return f"commit {str(a['commit'])[:10]}"
    if "issue" in a:
        return f"issue #{a['issue']}"
    if "pr" in a:
        return f"pull request #{a['pr']}"
    if "path" in a:
        if "start_line" in a:
            return f"{a['path']}:{a['start_line']}-{a.get('end_line', a['start_line'])}"
        return str(a["path"])
    return f"{h.source} {h.id}"


def _cut(text: str, limit: int, tc: TokenCounter) -> tuple[str, bool]:
    """``text`` cut at a line so that it counts at most ``limit`` tokens."""
    if tc.count(text) <= limit:
        return text, False
    lines = text.split("\n")
    lo, hi = 0, len(lines)
    while lo < hi:  # the most lines that fit
        mid = (lo + hi + 1) // 2
        if tc.count("\n".join(lines[:mid]) + "\n[...]") <= limit:
            lo = mid
        else:
            hi = mid - 1
    return ("\n".join(lines[:lo]) + "\n[...]") if lo else "", True


def _ranges(h: SourceHit) -> list[tuple[int, int]]:
    a = h.attribution
    s, e = a.get("start_line"), a.get("end_line")
    return [(s, e)] if isinstance(s, int) and isinstance(e, int) else []


def assemble_sources(
    index: Index,
    query: str,
    hits: list[SourceHit],
    *,
    budget: int = 8000,
    format: Format = "xml",
    counter: str | TokenCounter = "cl100k",
    include_scores: bool = False,
) -> AssembledContext:
    """One context from fused multi-source hits (see the module docstring)."""
    tc = get_counter(counter) if isinstance(counter, str) else counter
    tb = TokenBudget.for_total(budget)
    policy = AssemblyPolicy(format=format, include_scores=include_scores)
    others: list[tuple[ContextPart, str]] = []
    used = 0
    cut_any = False
    limit = int(tb.available * NON_CODE_SHARE)
    for h in hits:
        if h.source == "code":
            continue
        label = item_label(h)
        head = label + (f" {h.url}" if h.url else "")
        where = h.url or str(h.attribution.get("path") or label)  # the block's ranges add lines
        meta = BlockMeta(
            source=h.source,
            path=where,
            ranges=_ranges(h),
            symbol=h.title,
            kind=h.kind or h.source,
            language="markdown" if h.source == "docs" else "",
            score=h.score,
        )
        shell = tc.count(render_block(format, meta, head, include_scores))
        room = min(tb.part_cap, limit - used) - shell
        if room <= 8:
            cut_any = True
            continue
        body, cut = _cut(h.text, room, tc)
        cut_any |= cut
        text = f"{head}\n{body}" if body else head
        block = render_block(format, meta, text, include_scores)
        tokens = tc.count(block)
        used += tokens
        part = ContextPart(
            id=f"{h.source}:{h.id}",
            file_path=where,
            ranges=_ranges(h),
            kind=h.kind or h.source,
            text=text,
            score=h.score,
            modality=h.source,
            symbol=h.title,
            language=meta.language,
            tokens=tokens,
            source=h.source,
            hit_ids=[h.id],
            trimmed=cut,
        )
        others.append((part, block))
    code_hits = [h.payload for h in hits if h.source == "code" and isinstance(h.payload, Hit)]
    code_total = tb.available - used
    retriever = index.retriever
    ctx = assemble_context(
        query,
        code_hits if code_total > 0 else [],
        root=index.root,
        budget=TokenBudget.for_total(max(code_total, 1)),
        policy=policy,
        counter=tc,
        embeddings=retriever.embeddings_for_hits(code_hits) if code_hits else {},
    )
    code = [
        (
            p,
            render_block(
                format,
                BlockMeta(p.source, p.file_path, p.ranges, p.symbol, p.kind, p.language, p.score),
                p.text,
                include_scores,
            ),
        )
        for p in ctx.parts
    ]
    dropped = 0
    while True:  # the whole text within the budget: trailing other items first, then code
        blocks = [b for _, b in code] + [b for _, b in others]
        text = render(format, blocks)
        total = tc.count(text)
        if not blocks and total > tb.available:  # even the empty JSON document
            text, total = "", 0
        if total <= tb.available or not blocks:
            break
        (others or code).pop()
        dropped += 1
    parts = [*(p for p, _ in code), *(p for p, _ in others)]
    code_included = {hid for p, _ in code for hid in p.hit_ids}
    stats = replace(
        ctx.stats,
        tokens_total=total,
        tokens_per_part=[p.tokens for p in parts],
        budget=tb.to_dict(),
        unique_files=len({p.file_path for p, _ in code}),
        hits_in=len(code_hits) + sum(1 for h in hits if h.source != "code"),
        hits_included=len(code_included) + len(others),
        truncated=ctx.stats.truncated or cut_any or dropped > 0,
        dropped_for_budget=ctx.stats.dropped_for_budget
        + dropped
        + (len(code_hits) if code_total <= 0 else 0),
    )
    return AssembledContext(parts=parts, stats=stats, text=text, query=query, format=format)
