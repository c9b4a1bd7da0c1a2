"""Trimming: cut a segment at line boundaries so its block fits a token cap.

What is kept, in priority order: the signature (decorators and the header up to the line that
opens the body), then the ranges of the best-ranked hits inside the segment (a method hit inside
a class chunk stays visible), then as many following lines as fit. Cut lines are replaced by a
``... [lines a-b trimmed] ...`` marker. A segment whose signature alone does not fit is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ragloom.assemble.stitch import Segment

__all__ = ["FIT_CHARS_PER_TOKEN", "SIGNATURE_MAX_LINES", "signature_lines", "trim_segment"]

SIGNATURE_MAX_LINES = 12
"""ragloom's choice: a header longer than 12 lines is cut after its first line."""

FIT_CHARS_PER_TOKEN = 8
"""ragloom's choice: code averages 4.33 characters per cl100k token (shared/research/
DEPENDENCIES.md); a segment longer than 8 characters per token of the cap is trimmed without
counting the whole block. This only decides *whether* to trim; every kept block is counted."""

_LINE_BATCH = 32
"""Lines counted per call while planning a cut (counting stops once the cap is reached)."""

_BODY_OPENERS = re.compile(r"(:|\{|=>|->\s*\S*\s*\{?|\bdo|\bthen|\bbegin)\s*(#.*|//.*)?$")
_DECORATOR = re.compile(r"\s*(@|#\[|\[\w)")


def signature_lines(lines: Sequence[str], start: int, end: int) -> int:
    """Number of lines from ``start`` that form the signature (>= 1)."""
    i = start
    while i < end and (_DECORATOR.match(lines[i - 1]) or not lines[i - 1].strip()):
        i += 1  # decorators / attributes / blank lines before the header
    depth = 0
    for j in range(i, min(end, i + SIGNATURE_MAX_LINES - 1) + 1):
        text = lines[j - 1]
        depth += text.count("(") + text.count("[") - text.count(")") - text.count("]")
        if depth <= 0 and _BODY_OPENERS.search(text.rstrip()):
            return j - start + 1
    if i == start:
        return 1
    return i - start + 1


def _union(ranges: list[tuple[int, int]], new: tuple[int, int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted([*ranges, new]):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _window(
    rng: tuple[int, int],
    lines: Sequence[str],
    focus: Sequence[str],
    t: Callable[[int], int],
    budget: int,
    *,
    only_focus: bool = False,
) -> tuple[int, int] | None:
    """The lines of ``rng`` that fit ``budget`` tokens: from two lines before the first line
    holding a ``focus`` word (whole word), else from the range's start (``only_focus``: else
    None), then downward."""
    a, b = rng
    start = a
    words = [re.compile(r"(?<![\w$])" + re.escape(w) + r"(?![\w$])") for w in focus if w]
    hit = (
        next((i for i in range(a, b + 1) if any(w.search(lines[i - 1]) for w in words)), None)
        if words
        else None  # no identifier in the question: no line to scan for one
    )
    if hit is not None:
        start = max(a, hit - 2)
    elif only_focus:
        return None
    end = start - 1
    used = 0
    while end < b and used + t(end + 1) <= budget:
        end += 1
        used += t(end)
    return (start, max(start, end))


def trim_segment(
    seg: Segment,
    lines: Sequence[str],
    cap: int,
    block_tokens: Callable[[Segment], int],
    line_tokens: Callable[[Sequence[str]], list[int]],
    focus: Sequence[str] = (),
) -> int | None:
    """Shrink ``seg.shown`` until ``block_tokens(seg) <= cap``; return the tokens or None (drop).

    ``block_tokens`` renders and counts the segment's block exactly; ``line_tokens`` gives
    per-line estimates used to plan the cut before the exact check. When the best-ranked hit's
    range does not fit whole, a window of it is kept instead: around its first line holding one
    of the ``focus`` words (the question's identifiers), else from its start.
    """
    tok: list[int] = []

    def ensure(upto: int) -> None:
        """Count lines (relative index) up to ``upto`` inclusive, in batches."""
        while len(tok) <= upto:
            lo = seg.start - 1 + len(tok)
            hi = min(seg.end, lo + _LINE_BATCH)
            tok.extend(line_tokens([ln + "\n" for ln in lines[lo:hi]]))

    # Count the whole block exactly only when it can plausibly fit (cheap character test).
    seg.shown = [(seg.start, seg.end)]
    chars = sum(len(ln) + 1 for ln in lines[seg.start - 1 : seg.end])
    if chars <= cap * FIT_CHARS_PER_TOKEN:
        full = block_tokens(seg)
        if full <= cap:
            return full

    def t(line: int) -> int:
        ensure(line - seg.start)
        return tok[line - seg.start]

    def cost(ranges: list[tuple[int, int]]) -> int:
        return sum(t(i) for a, b in ranges for i in range(a, b + 1))

    sig = signature_lines(lines, seg.start, seg.end)
    shown = [(seg.start, seg.start + sig - 1)]
    seg.shown = shown
    base = block_tokens(seg)  # header + signature + trailing marker
    if base > cap:
        return None
    marker_cost = 12  # tokens of one "... [lines a-b trimmed] ..." marker (about 10 in cl100k)
    budget = cap - base
    anchors: list[tuple[int, int]] = []
    for i, (_, sn) in enumerate(seg.members):
        rng = (sn.start_line, sn.end_line)
        if rng == (seg.start, seg.end):
            # the best hit is the segment: its lines around the question's identifiers, when
            # they are past the signature (else the lines after the signature, as before)
            found = _window((seg.start + sig, seg.end), lines, focus, t, budget - 2 * marker_cost,
                            only_focus=True) if i == 0 and seg.start + sig <= seg.end else None  # fmt: skip
            if found is None:
                continue
            rng = found
        cand = _union(shown, rng)
        extra = cost(cand) - cost(shown) + marker_cost * (len(cand) - len(shown) + 1)
        if extra > budget and i == 0:  # the best hit, too long: a window of it
            rng = _window(rng, lines, focus, t, budget - 2 * marker_cost) or rng
            cand = _union(shown, rng)
            extra = cost(cand) - cost(shown) + marker_cost * (len(cand) - len(shown) + 1)
        if extra <= budget:
            budget -= extra
            shown = cand
            anchors.append(rng)
    # extend the first range (signature) while it fits
    first_end = shown[0][1]
    while first_end < seg.end:
        nxt = first_end + 1
        if len(shown) > 1 and nxt >= shown[1][0]:
            break
        if t(nxt) > budget:
            break
        budget -= t(nxt)
        first_end = nxt
    shown = _union(shown, (seg.start, first_end))
    while True:
        seg.shown = shown
        got = block_tokens(seg)
        if got <= cap:
            return got
        # over by (got - cap): shrink the first range beyond the signature, then drop anchors
        excess = got - cap
        a, b = shown[0]
        sig_end = seg.start + sig - 1
        if b > sig_end:
            while b > sig_end and excess > 0:
                excess -= t(b)
                b -= 1
            shown = [(a, b), *shown[1:]]
        elif anchors:
            anchors.pop()
            shown = [(seg.start, sig_end)]
            for rng in anchors:
                shown = _union(shown, rng)
        else:
            seg.shown = [(seg.start, sig_end)]
            return None
