"""Stitching: ranges of one file become segments, and segments of one file become one part.

A *segment* is a maximal run of overlapping or adjacent hit ranges of one file (gaps of at
most ``fill_gap_lines`` lines are filled). A *draft* is what becomes one ``ContextPart``: one or
more segments of one file in source order; the lines between two segments are replaced by an
elision marker that names the skipped lines, and lines cut by trimming get a marker too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ragloom.assemble.dedup import DedupReport
from ragloom.assemble.snippets import Snippet

__all__ = ["Draft", "Segment", "build_segments", "draft_ranges", "draft_text", "marker"]


@dataclass(slots=True)
class Segment:
    """A contiguous line range of one file covering one or more snippets."""

    path: str
    start: int
    end: int
    members: list[tuple[int, Snippet]]  # (rank, snippet), best rank first
    shown: list[tuple[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.shown:
            self.shown = [(self.start, self.end)]

    @property
    def rank(self) -> int:
        """Best (smallest) rank among the members."""
        return self.members[0][0]

    @property
    def trimmed(self) -> bool:
        """Some lines of the segment are not shown."""
        return self.shown != [(self.start, self.end)]

    def shown_members(self) -> list[tuple[int, Snippet]]:
        """Members with at least one shown line."""
        return [
            (r, sn)
            for r, sn in self.members
            if any(a <= sn.end_line and sn.start_line <= b for a, b in self.shown)
        ]


@dataclass(slots=True)
class Draft:
    """One future context part: segments of one file, in source order."""

    path: str
    segments: list[Segment]
    tokens: int = 0
    block: str = ""

    @property
    def rank(self) -> int:
        """Best rank of any shown member."""
        return min(seg.rank for seg in self.segments)

    @property
    def first_line(self) -> int:
        """First line of the draft."""
        return self.segments[0].start


def marker(a: int, b: int, why: str) -> str:
    """Elision marker naming the lines ``a..b`` that are not shown and why."""
    what = f"line {a}" if a == b else f"lines {a}-{b}"
    return f"... [{what} {why}] ..."


def build_segments(
    ranked: Sequence[tuple[int, Snippet]], fill_gap_lines: int, report: DedupReport
) -> list[Segment]:
    """Merge ranked snippets into segments per file; counts contained hits as overlap duplicates."""
    by_path: dict[str, list[tuple[int, Snippet]]] = {}
    for item in ranked:
        by_path.setdefault(item[1].hit.path, []).append(item)
    segments: list[Segment] = []
    for path in sorted(by_path):
        items = sorted(by_path[path], key=lambda it: (it[1].start_line, -it[1].end_line, it[0]))
        cur: Segment | None = None
        for rank, sn in items:
            if cur is not None and sn.start_line <= cur.end + 1 + fill_gap_lines:
                if any(
                    o.start_line <= sn.start_line and sn.end_line <= o.end_line
                    for _, o in cur.members
                ):
                    report.overlap += 1
                cur.members.append((rank, sn))
                cur.end = max(cur.end, sn.end_line)
                cur.shown = [(cur.start, cur.end)]
                continue
            if cur is not None:
                segments.append(cur)
            cur = Segment(path, sn.start_line, sn.end_line, [(rank, sn)])
        if cur is not None:
            segments.append(cur)
    for seg in segments:
        seg.members.sort(key=lambda it: it[0])
    return segments


def draft_text(segments: Sequence[Segment], lines: Sequence[str]) -> str:
    """Text of consecutive segments of one file, with elision and trim markers."""
    out: list[str] = []
    prev_end: int | None = None
    for seg in segments:
        if prev_end is not None and seg.start > prev_end + 1:
            out.append(marker(prev_end + 1, seg.start - 1, "omitted"))
        pos = seg.start
        for a, b in seg.shown:
            if a > pos:
                out.append(marker(pos, a - 1, "trimmed"))
            out.extend(lines[a - 1 : b])
            pos = b + 1
        if pos <= seg.end:
            out.append(marker(pos, seg.end, "trimmed"))
        prev_end = seg.end
    return "\n".join(out)


def draft_ranges(segments: Sequence[Segment]) -> list[tuple[int, int]]:
    """Shown line ranges (1-based, inclusive), adjacent ones merged."""
    ranges: list[tuple[int, int]] = []
    for seg in segments:
        for a, b in seg.shown:
            if ranges and a <= ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], max(ranges[-1][1], b))
            else:
                ranges.append((a, b))
    return ranges
