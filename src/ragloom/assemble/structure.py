"""Structural context: what the selected code calls and what calls it, inside the same budget.

An agent editing a function needs the signatures of the functions it calls (to call them
right) and of its callers (to keep them working). :func:`add_related` appends such definitions
to an assembled context, after its own parts, each marked with its relation (``callee`` or
``caller``) and the symbol it relates to, in every format. The main context is assembled first
with :data:`STRUCTURE_SHARE` of the budget held back; the related definitions then fill what
is left, most relevant first, and the whole text is counted exactly at the end: the budget
holds as it does without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ragloom.assemble.budget import AssemblyPolicy, Format, TokenBudget
from ragloom.assemble.context import AssembledContext, ContextPart
from ragloom.assemble.render import BlockMeta, frame, render, render_block
from ragloom.assemble.snippets import FILE_CACHE, FileReader, _safe_real, split_lines
from ragloom.assemble.stitch import marker
from ragloom.assemble.tokens import TokenCounter
from ragloom.errors import ConfigError
from ragloom.graph.code_graph import CodeGraph
from ragloom.graph.related import related_definitions
from ragloom.index.backend import ReadStore

__all__ = [
    "STRUCTURE_MODES",
    "STRUCTURE_SHARE",
    "Related",
    "Relation",
    "StructureMode",
    "add_related",
    "faithful_text",
    "file_lines",
    "related_parts",
    "structure_budget",
]

Relation = Literal["callee", "caller"]
StructureMode = Literal["off", "signatures", "bodies"]
STRUCTURE_MODES: tuple[StructureMode, ...] = ("off", "signatures", "bodies")
STRUCTURE_SHARE = 0.2
"""Share of the available budget held back from the main context for related definitions
(what they do not use stays unused: the main context is not assembled twice)."""
MAX_RELATED = 60
"""Most related definitions read from the index for one context (far more than fit)."""


@dataclass(frozen=True, slots=True)
class Related:
    """A definition related to the selected code, with the text to show (its signature, or
    its body) and its relevance (higher first)."""

    relation: Relation
    id: str
    path: str
    symbol: str
    kind: str
    language: str
    start_line: int
    end_line: int
    text: str
    score: float
    of: str
    """The symbol of the selected code it is related to."""
    ranges: tuple[tuple[int, int], ...] = ()
    """The lines ``text`` shows (1-based, inclusive); empty: all of ``start_line..end_line``."""

    @property
    def shown(self) -> list[tuple[int, int]]:
        """The shown line ranges."""
        return list(self.ranges) if self.ranges else [(self.start_line, self.end_line)]


def structure_budget(budget: TokenBudget, mode: StructureMode) -> TokenBudget:
    """The main context's budget: ``budget`` less :data:`STRUCTURE_SHARE` of what it makes
    available (unchanged with ``mode`` ``off``)."""
    if mode not in STRUCTURE_MODES:
        raise ConfigError(f"unknown structure mode {mode!r}; choose from {STRUCTURE_MODES}")
    if mode == "off":
        return budget
    held = int(budget.available * STRUCTURE_SHARE)
    if held <= 0 or held >= budget.available:
        return budget
    reserves = {**budget.reserves, "structure": held + budget.reserves.get("structure", 0)}
    return TokenBudget(
        max_total=budget.max_total,
        per_file_max=budget.per_file_max,
        per_part_max=budget.per_part_max,
        reserves=reserves,
        caps_flexible=budget.caps_flexible,
    )


def _block(fmt: Format, r: Related, include_scores: bool) -> str:
    meta = BlockMeta(
        source="code",
        path=r.path,
        ranges=r.shown,
        symbol=r.symbol,
        kind=r.kind,
        language=r.language,
        score=r.score,
        relation=r.relation,
        related_to=r.of,
    )
    return render_block(fmt, meta, r.text, include_scores)


def add_related(
    ctx: AssembledContext,
    related: Sequence[Related],
    budget: TokenBudget,
    policy: AssemblyPolicy,
    counter: TokenCounter,
) -> AssembledContext:
    """``ctx`` with as many of ``related`` (best first) as fit ``budget`` appended as parts.

    A definition any of whose lines the context already shows (a main part or a related part
    added before it) is skipped. The result's text is ``ctx``'s with the new blocks inserted before the frame's
    end, so the main parts render byte for byte as before; its token count is exact."""
    fmt = policy.format
    head, sep, tail = frame(fmt)
    shown = [(p.file_path, a, b) for p in ctx.parts for a, b in p.ranges]

    def overlaps(r: Related) -> bool:
        return any(p == r.path and a <= r.end_line and r.start_line <= b for p, a, b in shown)

    seen: set[str] = set()
    todo: list[Related] = []
    for r in sorted(related, key=lambda r: (-r.score, r.path, r.start_line, r.id)):
        if r.id in seen or overlaps(r):
            continue
        seen.add(r.id)
        todo.append(r)
    if not todo:
        return replace(
            ctx,
            stats=replace(ctx.stats, budget=budget.to_dict()),
            structure={"related": 0, "tokens": 0, "candidates": len(related)},
        )
    base = ctx.text
    used = ctx.stats.tokens_total if base else counter.count(head + tail)
    sep_tokens = counter.count(sep)
    blocks: list[tuple[Related, str, int]] = []
    for r in todo:
        if overlaps(r):  # lines a related part added before it shows
            continue
        block = _block(fmt, r, policy.include_scores)
        n = counter.count(block)
        cost = n + (sep_tokens if base or blocks else 0)
        if used + cost > budget.available:
            continue
        used += cost
        blocks.append((r, block, n))
        shown.extend((r.path, a, b) for a, b in r.shown)

    def compose(chosen: Sequence[tuple[Related, str, int]]) -> str:
        extra = [b for _, b, _ in chosen]
        if not extra:
            return base
        if not base:
            return render(fmt, extra)
        body = base[: len(base) - len(tail)] if tail else base
        return body + sep + sep.join(extra) + tail

    text = compose(blocks)
    total = counter.count(text)
    while blocks and total > budget.available:  # counts are not quite additive: exact check
        blocks.pop()
        text = compose(blocks)
        total = counter.count(text)
    parts = list(ctx.parts)
    for r, _, n in blocks:
        parts.append(
            ContextPart(
                id=r.id,
                file_path=r.path,
                ranges=r.shown,
                kind=r.kind,
                text=r.text,
                score=r.score,
                modality="graph",
                symbol=r.symbol,
                language=r.language,
                tokens=n,
                symbols=[r.symbol],
                relation=r.relation,
                related_to=r.of,
                trimmed=r.shown != [(r.start_line, r.end_line)],
            )
        )
    stats = replace(
        ctx.stats,
        tokens_total=total,
        tokens_per_part=[p.tokens for p in parts],
        unique_files=len({p.file_path for p in parts}),
        budget=budget.to_dict(),  # the whole budget: the main parts had it less the share
    )
    info = {
        "related": len(blocks),
        "tokens": sum(n for _, _, n in blocks),
        "candidates": len(related),
        "callees": sum(1 for r, _, _ in blocks if r.relation == "callee"),
        "callers": sum(1 for r, _, _ in blocks if r.relation == "caller"),
    }
    return replace(ctx, parts=parts, stats=stats, text=text, structure=info)


def _first_line_offset(text: str, line: str) -> int:
    """0-based line of ``text`` where ``line`` (a signature's first line) stands."""
    probe = line.strip()
    for i, raw in enumerate(text.splitlines()):
        if raw.strip() == probe:
            return i
    return 0


def file_lines(
    root: Path, read_files: FileReader | None = None
) -> Callable[[str], Sequence[str] | None]:
    """A reader of the current lines of a file under ``root`` (or from ``read_files``), as
    assembly numbers them; None for a file that is missing or outside ``root``."""
    root_str = str(root.resolve())
    cache: dict[str, Sequence[str] | None] = {}

    def get(path: str) -> Sequence[str] | None:
        if path in cache:
            return cache[path]
        lines: list[str] | None = None
        if read_files is not None:
            data = read_files([path]).get(path)
            lines = split_lines(data) if data is not None else None
        else:
            found = _safe_real(root_str, path)
            if found is not None:
                lines = FILE_CACHE.read(*found)[2]
        if lines and lines[0].startswith("\ufeff"):
            lines = [lines[0][1:], *lines[1:]]
        cache[path] = lines
        return lines

    return get


def _probes(raw: str) -> tuple[str, ...]:
    """How a line of a signature or chunk text may stand in the file: as it is (indentation
    aside), without a stub's ``...`` or without a one-line docstring's added closing quotes."""
    probe = raw.strip()
    if not probe or probe == "...":
        return ()
    out = [probe]
    if probe.endswith(" ..."):
        out.append(probe[:-4].rstrip())
    for q in ('"""', "'''"):
        if len(probe) > 6 and probe.startswith(q) and probe.endswith(q):
            out.append(probe[:-3].rstrip())
    return tuple(out)


def faithful_text(
    text: str, lines: Sequence[str], start: int, end: int, *, tail: bool
) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """The file's own lines ``start..end`` that ``text`` (a signature or a stored chunk, which
    may be dedented or elide bodies) shows, found in order, and the shown ranges; lines between
    them are replaced by the trim marker (``tail``: the lines after the last one too). None
    when fewer than half of ``text``'s lines are found (the file changed)."""
    if not 1 <= start <= end <= len(lines):
        return None
    stripped = [ln.strip() for ln in lines]
    hits: list[int] = []
    wanted = 0
    pos = start
    for raw in text.split("\n"):
        probes = _probes(raw)
        if not probes:
            continue
        wanted += 1
        for i in range(pos, end + 1):
            if stripped[i - 1] in probes:
                hits.append(i)
                pos = i + 1
                break
    if not hits or 2 * len(hits) < wanted:
        return None
    ranges: list[tuple[int, int]] = []
    for i in hits:
        # a gap of blank lines only is shown rather than marked
        if ranges and all(not stripped[j - 1] for j in range(ranges[-1][1] + 1, i)):
            ranges[-1] = (ranges[-1][0], i)
        else:
            ranges.append((i, i))
    out: list[str] = []
    prev: int | None = None
    for a, b in ranges:
        if prev is not None:
            out.append(marker(prev + 1, a - 1, "trimmed"))
        out.extend(lines[a - 1 : b])
        prev = b
    if tail and prev is not None and prev < end:
        out.append(marker(prev + 1, end, "trimmed"))
    return "\n".join(out), tuple(ranges)


def related_parts(
    graph: CodeGraph,
    seeds: Sequence[tuple[str, float]],
    store: ReadStore,
    mode: StructureMode,
    lines_of: Callable[[str], Sequence[str] | None] | None = None,
) -> list[Related]:
    """The callees and callers of ``seeds`` ((chunk id, weight), best first) with the text to
    show: the signature (``signatures``) or the whole chunk (``bodies``; a class chunk is
    stored with its methods' bodies elided).

    With ``lines_of`` (:func:`file_lines`) the text is the file's own lines (indentation as in
    the file), with the trim marker for every line left out and ``ranges`` naming only the
    lines shown (:func:`faithful_text`); a definition not found in its current file is left
    out. Without it the text is the synthesised signature or stored chunk."""
    from ragloom.assemble.signature import signature

    if mode == "off":
        return []
    found = related_definitions(graph, seeds)[:MAX_RELATED]
    rows = store.chunks_by_ids([r.definition.id for r in found])
    texts = store.texts_by_rowids([row.rowid for row in rows.values()])
    out: list[Related] = []
    for r in found:
        d = r.definition
        row = rows.get(d.id)
        text = texts.get(row.rowid) if row is not None else None
        if row is None or text is None:
            continue
        start, end = row.start_line, row.end_line
        ranges: tuple[tuple[int, int], ...] = ()
        if mode == "signatures":
            sig = signature(text, d.language, d.kind)
            if not sig.strip():
                continue
            if lines_of is None:  # the synthesised signature, at its first line
                start += _first_line_offset(text, sig.splitlines()[0])
                end = min(row.end_line, start + sig.count("\n"))
            text = sig
        if lines_of is not None:
            # the definition's whole span stays start..end (what overlap checks use)
            lines = lines_of(d.path)
            got = faithful_text(text, lines, start, end, tail=mode == "bodies") if lines else None
            if got is None:
                continue
            text, ranges = got
        out.append(
            Related(
                relation="callee" if r.relation == "callee" else "caller",
                id=d.id,
                path=d.path,
                symbol=d.symbol,
                kind=d.kind,
                language=d.language,
                start_line=start,
                end_line=end,
                text=text,
                score=round(r.score, 6),
                of=r.of,
                ranges=ranges,
            )
        )
    return out
