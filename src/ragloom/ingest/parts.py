"""The ids and labels of a split symbol's parts (a leaf module: the chunker writes them,
retrieval and the public ``Hit`` read them).

The 2nd, 3rd, ... part of a split chunk has the id ``<first part's id>#part<k>`` (the first
part keeps the plain id) and its text starts with a label line, ``# Foo.bar (part 3 of 64)``
written as a comment of its language.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["head_id", "is_part", "part_id", "part_label"]

_PART: Final = "#part"
"""The 2nd, 3rd, ... part of a split chunk has the id ``<first part's id>#part<k>`` (the first
part keeps the plain id): a piece names its head without a lookup, so retrieval can count a
split symbol once and rank the part holding its definition line (see :func:`head_id`)."""

_LABEL_RE: Final = re.compile(
    r"(?:#|//|<!--) (?P<label>.* \(part (?P<k>[0-9]+) of (?P<n>[0-9]+)\))(?: -->)?"
)


def is_part(chunk_id: str) -> bool:
    """True for the 2nd, 3rd, ... part of a split chunk (ids written by the chunker)."""
    return _PART in chunk_id


def part_id(head: str, k: int) -> str:
    """The id of the ``k``-th part (``k`` >= 2) of the split chunk whose first part is ``head``."""
    return f"{head}{_PART}{k}"


def head_id(chunk_id: str) -> str:
    """The id of the first part of the split chunk ``chunk_id`` belongs to (itself when it is
    a first part or was never split)."""
    return chunk_id.split(_PART, 1)[0]


def part_label(chunk_id: str, text: str) -> str | None:
    """``"Foo.bar (part 3 of 64)"`` for a later part of a split symbol (read from the label line
    its text starts with), ``None`` for any other chunk."""
    if not is_part(chunk_id):
        return None
    m = _LABEL_RE.fullmatch(text.split("\n", 1)[0])
    return m.group("label") if m else None
