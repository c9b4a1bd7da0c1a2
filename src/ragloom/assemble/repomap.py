"""Repository map: files with their most relevant signatures, filling a token budget exactly.

Pure budget filling, no I/O: the caller scores entries (one per symbol, with its signature
from :func:`ragloom.assemble.signature.signature`) and files; :func:`build_map` chooses what
fits and renders it. Guarantees (tested by property): ``result.tokens ==
counter.count(result.text) <= budget`` for every input, and identical inputs give identical
output.

Choosing what fits. Entries are admitted in descending score order (ties: path, line, symbol,
kind, signature); an entry brings its file's header with it. The largest prefix of that order
whose rendering fits is found by search over the prefix length with exact counts of the
rendered text, as aider's repo map does (``aider/repomap.py``, ``get_ranked_tags_map``); the
search starts at the prefix that the per-entry token estimates say fits and gallops from there,
so it needs O(log n) exact counts in the worst case and a handful in practice (a rendered
line's cl100k tokens hardly depend on its neighbours, see
:func:`ragloom.assemble.tokens.split_safe`, so the estimate is close). Then, with ``fill=True``
(default), a greedy pass tries each remaining entry in order and takes the ones whose
estimated cost still fits the room left; one exact count confirms the result, and the newest
additions are dropped (and the result counted again) until it fits.

Monotonicity. With ``fill=False`` the map is that prefix alone, so a larger budget never shows
fewer entries (the shown sets are nested). With ``fill=True`` a larger budget never loses an
entry of the smaller budget's prefix, but it may show fewer entries in all: at a budget where
a large high-ranked entry starts to fit, it replaces the several small lower-ranked ones the
greedy pass had used the room for. No filling rule can avoid that while the prefix is
admitted in score order: at the budget where prefix ``k + 1`` fits exactly nothing else fits,
so a count that never falls would allow the fill one entry beyond the prefix at most.

Rendering, ``text`` (default): files in descending file score (ties by path), each a
``path:`` line followed by its shown signatures in line order, one blank line between files::

    src/ragloom/api.py:
       12│ def search(self, query: str, k: int = 10) -> list[Hit]:
      140│ @dataclass(frozen=True)
           class Options:

Each signature's first line is prefixed by two spaces, its line number right-aligned to the
width of the file's largest line number, ``│`` and a space; its further lines are indented to
the same column (spaces only: a ``│`` there would cost two more tokens per line). ``markdown``
puts the same lines in a fenced block under ``### path`` (the fence language guessed from the
extension). ``json`` is ``{"files":[{"path":...,"entries":[{"line":...,"kind":...,"symbol":
...,"signature":...}, ...]}, ...]}`` with one object per line and no other whitespace. An entry's
rendering never depends on which other entries are shown (the number width comes from all of
its file's entries), which keeps the per-entry estimates additive.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

from ragloom.assemble.tokens import TokenCounter
from ragloom.ingest.languages import detect_language

__all__ = [
    "MAP_FORMATS",
    "MapEntry",
    "MapFile",
    "MapFormat",
    "RepoMap",
    "build_map",
]

MapFormat = Literal["text", "markdown", "json"]
MAP_FORMATS: tuple[str, ...] = get_args(MapFormat)
"""Output formats of :func:`build_map`."""

_BAR = "│"
"""Between line number and signature; cl100k counts ``  12│ def`` like ``  12: def``."""
_BACKTICKS = re.compile(r"`{3,}")


@dataclass(frozen=True, slots=True)
class MapEntry:
    """One symbol offered to the map: where it is, its signature, and how relevant it is."""

    path: str
    symbol: str
    kind: str
    line: int
    signature: str
    score: float
    """Higher is more relevant; a NaN ranks below every number."""


@dataclass(frozen=True, slots=True)
class MapFile:
    """One file of a map, with the entries shown for it (in line order)."""

    path: str
    score: float
    entries: list[MapEntry]


@dataclass(frozen=True, slots=True)
class RepoMap:
    """A rendered map and what it holds."""

    text: str
    tokens: int
    """``counter.count(text)``, exactly; never above the budget."""
    files: list[MapFile]
    """Shown files in display order (descending file score, then path)."""
    entries_total: int
    entries_shown: int
    truncated: bool
    """True when some entries were left out."""


def _num(x: float) -> float:
    """Sort value of a score: NaN ranks below everything."""
    return -math.inf if x != x else x


@dataclass(slots=True)
class _File:
    """A file's rendering pieces, fixed for the whole build."""

    path: str
    score: float
    members: list[int]  # entry indices in line order
    blocks: list[str]  # rendered entries, parallel to members
    head: str
    tail: str


def _signature_lines(entry: MapEntry) -> list[str]:
    lines = [ln.rstrip() for ln in entry.signature.split("\n")]
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        lines = [entry.symbol.strip() or entry.kind.strip() or "?"]
    lines[0] = lines[0].lstrip()
    return lines


def _text_block(entry: MapEntry, width: int) -> str:
    sig = entry.signature
    if sig and "\n" not in sig and not sig[0].isspace() and not sig[-1].isspace():
        return f"  {str(entry.line).rjust(width)}{_BAR} {sig}"  # the common one-line case
    lines = _signature_lines(entry)
    out = f"  {str(entry.line).rjust(width)}{_BAR} {lines[0]}"
    if len(lines) > 1:
        pad = "\n" + " " * (width + 4)
        out += pad + pad.join(lines[1:])
    return out


def _json_block(entry: MapEntry) -> str:
    obj = {
        "line": entry.line,
        "kind": entry.kind,
        "symbol": entry.symbol,
        "signature": "\n".join(_signature_lines(entry)),
    }
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _fence_language(path: str) -> str:
    lang = detect_language(path)
    return "" if lang == "text" else lang


def _prepare(
    entries: list[MapEntry], file_scores: Mapping[str, float], fmt: MapFormat
) -> list[_File]:
    """Files in display order with their entries rendered."""
    by_path: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        by_path.setdefault(e.path, []).append(i)
    files: list[_File] = []
    for path, idx in by_path.items():
        idx.sort(
            key=lambda i: (
                entries[i].line,
                entries[i].symbol,
                entries[i].kind,
                entries[i].signature,
                -_num(entries[i].score),
            )
        )
        score = file_scores.get(path)
        if score is None:
            score = max((entries[i].score for i in idx), key=_num)
        if fmt == "json":
            blocks = [_json_block(entries[i]) for i in idx]
            head = json.dumps({"path": path}, ensure_ascii=False, separators=(",", ":"))
            head = head[:-1] + ',"entries":['
            tail = "]}"
        else:
            width = max(len(str(entries[i].line)) for i in idx)
            blocks = [_text_block(entries[i], width) for i in idx]
            if fmt == "text":
                head, tail = f"{path}:", ""
            else:
                longest = max((len(m) for b in blocks for m in _BACKTICKS.findall(b)), default=2)
                fence = "`" * max(3, longest + 1)
                head, tail = f"### {path}\n\n{fence}{_fence_language(path)}", fence
        files.append(_File(path, score, idx, blocks, head, tail))
    files.sort(key=lambda f: (-_num(f.score), f.path))
    return files


def _render_map(fmt: MapFormat, parts: list[tuple[str, str, list[str]]]) -> str:
    """Whole map from ``(head, tail, entry blocks)`` per shown file (``""`` when none).

    ``text``/``markdown``: ``head``, the blocks and ``tail`` one per line, files separated by
    a blank line; ``json``: the same inside ``{"files":[ ... ]}``, entries and files separated
    by ``,`` plus newline.
    """
    if not parts:
        return ""
    if fmt == "json":
        files = [f"{head}\n" + ",\n".join(blocks) + f"\n{tail}" for head, tail, blocks in parts]
        return '{"files":[\n' + ",\n".join(files) + "\n]}"
    out: list[str] = []
    for head, tail, blocks in parts:
        block = head + "\n" + "\n".join(blocks)
        out.append(block + "\n" + tail if tail else block)
    return "\n\n".join(out)


class _Builder:
    """Renders and exactly counts subsets of the entries (a mask over entry indices)."""

    def __init__(
        self, items: list[MapEntry], files: list[_File], fmt: MapFormat, counter: TokenCounter
    ) -> None:
        self.items = items
        self.files = files
        self.fmt = fmt
        self.counter = counter

    def render(self, mask: bytearray) -> str:
        parts: list[tuple[str, str, list[str]]] = []
        for f in self.files:
            blocks = [b for i, b in zip(f.members, f.blocks, strict=True) if mask[i]]
            if blocks:
                parts.append((f.head, f.tail, blocks))
        return _render_map(self.fmt, parts)

    def count(self, mask: bytearray) -> tuple[str, int]:
        text = self.render(mask)
        return text, self.counter.count(text)


EMPTY_MAP_JSON = '{"files":[]}'
"""The JSON map without entries: still a JSON document."""


def build_map(
    entries: Iterable[MapEntry],
    file_scores: Mapping[str, float],
    budget: int,
    counter: TokenCounter,
    *,
    fmt: MapFormat = "text",
    fill: bool = True,
) -> RepoMap:
    """The map of ``entries`` that fits ``budget`` tokens as counted by ``counter``.

    ``file_scores`` orders the files (a file missing from it takes its best entry's score).
    ``fill=False`` shows only the largest prefix of the score order that fits (see the module
    docstring for what each choice guarantees). ``budget <= 0``, no entries, or a budget too
    small for the first entry with its file header all give an empty map (``text == ""``,
    ``tokens == 0``; in ``json``, :data:`EMPTY_MAP_JSON` when the budget holds it, so a
    script parsing the map never meets an empty string). Raises ``ValueError`` for an
    unknown ``fmt``.
    """
    got = _build_map(entries, file_scores, budget, counter, fmt=fmt, fill=fill)
    if fmt == "json" and not got.text:
        tokens = counter.count(EMPTY_MAP_JSON)
        if tokens <= budget:
            return replace(got, text=EMPTY_MAP_JSON, tokens=tokens)
    return got


def _build_map(
    entries: Iterable[MapEntry],
    file_scores: Mapping[str, float],
    budget: int,
    counter: TokenCounter,
    *,
    fmt: MapFormat,
    fill: bool,
) -> RepoMap:
    if fmt not in MAP_FORMATS:
        raise ValueError(f"unknown map format {fmt!r}; expected one of {', '.join(MAP_FORMATS)}")
    items = list(entries)
    n = len(items)
    files = _prepare(items, file_scores, fmt) if n else []
    b = _Builder(items, files, fmt, counter)
    if budget <= 0 or n == 0:
        return _result(b, bytearray(n), "", 0, n)
    order = sorted(
        range(n),
        key=lambda i: (
            -_num(items[i].score),
            items[i].path,
            items[i].line,
            items[i].symbol,
            items[i].kind,
            items[i].signature,
        ),
    )
    # per-entry and per-file token estimates, in two batch calls: what an entry adds (its
    # block and separator) and what a file's first entry adds besides (header, tail, blank)
    file_of = [0] * n
    block_of = [""] * n
    sep = "\n" if fmt != "json" else ",\n"
    heads: list[str] = []
    for fi, f in enumerate(files):
        for i, blk in zip(f.members, f.blocks, strict=True):
            file_of[i] = fi
            block_of[i] = blk
        heads.append(f.head + "\n" + (f.tail + sep if f.tail else "") + "\n")
    cost = counter.count_batch([block_of[i] + sep for i in order])  # in priority order
    *head_cost, frame_cost = counter.count_batch(
        [*heads, '{"files":[\n\n]}' if fmt == "json" else ""]
    )

    # estimated tokens of each prefix: est[k] for the first k entries of `order`
    est = [0] * (n + 1)
    seen = bytearray(len(files))
    total = frame_cost
    for k, i in enumerate(order):
        fi = file_of[i]
        if not seen[fi]:
            seen[fi] = 1
            total += head_cost[fi]
        total += cost[k]
        est[k + 1] = total

    exact: dict[int, tuple[str, int]] = {0: ("", 0)}

    def measure(k: int) -> tuple[str, int]:
        got = exact.get(k)
        if got is None:
            mask = bytearray(n)
            for i in order[:k]:
                mask[i] = 1
            got = b.count(mask)
            exact[k] = got
        return got

    # largest k with measure(k) <= budget: start where the estimate says, gallop, bisect
    k0 = bisect.bisect_right(est, budget) - 1
    if measure(k0)[1] <= budget:
        lo, hi, step = k0, n + 1, 1
        while lo + step <= n and measure(lo + step)[1] <= budget:
            lo, step = lo + step, step * 2
        hi = min(lo + step, n + 1)
    else:
        hi, step = k0, 1
        while hi - step > 0 and measure(hi - step)[1] > budget:
            hi, step = hi - step, step * 2
        lo = max(hi - step, 0)
    while hi - lo > 1:  # invariant: measure(lo) fits, measure(hi) does not (or hi == n + 1)
        mid = (lo + hi) // 2
        if measure(mid)[1] <= budget:
            lo = mid
        else:
            hi = mid
    k = lo
    text, tokens = measure(k)
    mask = bytearray(n)
    for i in order[:k]:
        mask[i] = 1
    if not fill or k >= n:
        return _result(b, mask, text, tokens, n)

    # greedy pass: the rest in score order by estimated cost (order[k] is known not to fit)
    shown = bytearray(len(files))
    for i in order[:k]:
        shown[file_of[i]] = 1
    room = budget - tokens
    if k == 0:
        room -= frame_cost
    added: list[tuple[int, int]] = []  # (entry, estimated cost with a new file header)
    for pos in range(k + 1, n):
        i = order[pos]
        fi = file_of[i]
        need = cost[pos] + (0 if shown[fi] else head_cost[fi])
        if need <= room:
            room -= need
            mask[i] = 1
            if not shown[fi]:
                shown[fi] = 1
            added.append((i, need))
    if not added:
        return _result(b, mask, text, tokens, n)
    text2, tokens2 = b.count(mask)
    while tokens2 > budget:
        # drop the newest additions worth at least the overshoot, then count again; with
        # nothing added left the mask is the measured prefix again, which fits
        over = tokens2 - budget
        while added and over > 0:
            i, need = added.pop()
            mask[i] = 0
            over -= need
        if not added:
            return _result(b, mask, text, tokens, n)
        text2, tokens2 = b.count(mask)
    return _result(b, mask, text2, tokens2, n)


def _result(b: _Builder, mask: bytearray, text: str, tokens: int, total: int) -> RepoMap:
    files: list[MapFile] = []
    for f in b.files:
        shown = [i for i in f.members if mask[i]]
        if shown:
            files.append(MapFile(f.path, f.score, [b.items[i] for i in shown]))
    shown_n = sum(len(f.entries) for f in files)
    return RepoMap(text, tokens, files, total, shown_n, shown_n < total)
