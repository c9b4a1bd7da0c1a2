"""Ordering of parts (ploke section 2: "by fused score, then by structural importance (e.g.
definitions before references)").

Parts of one file stay together, in source order. Files are ordered by their best fused score
(ties: path). With ``definitions_first``, a file that defines a symbol referenced by an earlier
file is moved just before the first file that references it (depth-first, cycles broken by the
score order), so a reader meets a definition before its uses. Everything is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["DEFINITION_KINDS", "OrderItem", "order_items", "short_name"]

DEFINITION_KINDS = frozenset(
    {"function", "method", "class", "struct", "enum", "impl", "interface", "trait"}
)
"""Chunk kinds that define a name (``ragloom.types.ChunkKind`` minus module/section/window)."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MIN_NAME = 2
"""ragloom's choice: one-letter names (``f``, ``x``) are too common to count as references."""


@dataclass(frozen=True, slots=True)
class OrderItem:
    """What ordering needs to know about one part."""

    path: str
    score: float
    rank: int
    first_line: int
    defines: frozenset[str]
    text: str


def short_name(symbol: str) -> str:
    """Last component of a qualified symbol (``pkg.mod.Class.meth`` -> ``meth``)."""
    for sep in ("::", "#", "/"):
        symbol = symbol.replace(sep, ".")
    return symbol.rsplit(".", 1)[-1].split("(", 1)[0]


def order_items(items: Sequence[OrderItem], ordering: str) -> list[int]:
    """Indices of ``items`` in output order."""
    if ordering == "source":
        return sorted(range(len(items)), key=lambda i: (items[i].path, items[i].first_line, i))
    files: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        files.setdefault(it.path, []).append(i)
    for idx in files.values():
        idx.sort(key=lambda i: (items[i].first_line, i))

    def file_key(path: str) -> tuple[float, int, str]:
        best = min(files[path], key=lambda i: (-items[i].score, items[i].rank))
        return (-items[best].score, items[best].rank, path)

    file_order = sorted(files, key=file_key)
    if ordering == "definitions_first":
        file_order = _definitions_first(file_order, files, items)
    return [i for path in file_order for i in files[path]]


def _definitions_first(
    file_order: list[str], files: dict[str, list[int]], items: Sequence[OrderItem]
) -> list[str]:
    defines = {
        p: frozenset(n for i in files[p] for n in items[i].defines if len(n) >= _MIN_NAME)
        for p in file_order
    }
    refs = {
        p: frozenset().union(*(_identifiers(items[i].text) for i in files[p])) for p in file_order
    }
    deps = {
        p: [q for q in file_order if q != p and (defines[q] - defines[p]) & refs[p]]
        for p in file_order
    }
    out: list[str] = []
    state: dict[str, int] = {}  # 1 = visiting, 2 = done

    def visit(p: str) -> None:
        if state.get(p):
            return
        state[p] = 1
        for q in deps[p]:
            visit(q)
        state[p] = 2
        out.append(p)

    for p in file_order:
        visit(p)
    return out


@lru_cache(maxsize=512)
def _identifiers(text: str) -> frozenset[str]:
    """The identifiers in a part's block. Memoised: the same blocks come back in the contexts
    of related questions, and scanning every block was ~10% of a warm assembly at 100k chunks."""
    return frozenset(_IDENT.findall(text))
