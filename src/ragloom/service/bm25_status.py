"""The BM25 actor's status machine values (ploke-rag-plan.md section 3 A):
``Uninitialized | Building | Ready(docs) | Empty | Error(message)``.

The transitions are drawn in :mod:`ragloom.service.bm25_actor`, which enforces them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Bm25Status", "Building", "Empty", "Error", "Ready", "Uninitialized", "status_label"]


@dataclass(frozen=True, slots=True)
class Uninitialized:
    """No engine yet: nothing was built, loaded or seeded."""

    label: Literal["uninitialized"] = "uninitialized"


@dataclass(frozen=True, slots=True)
class Building:
    """A Rebuild (or a Load from a non-Ready state) is queued or running."""

    label: Literal["building"] = "building"


@dataclass(frozen=True, slots=True)
class Ready:
    """The engine holds ``docs`` documents (exact, ``docs >= 1``)."""

    docs: int
    label: Literal["ready"] = "ready"


@dataclass(frozen=True, slots=True)
class Empty:
    """The engine exists and holds no document."""

    label: Literal["empty"] = "empty"


@dataclass(frozen=True, slots=True)
class Error:
    """The last Rebuild or Load failed; ``message`` says why. A Rebuild recovers."""

    message: str
    label: Literal["error"] = "error"


Bm25Status = Uninitialized | Building | Ready | Empty | Error
"""``Uninitialized | Building | Ready(docs) | Empty | Error(message)`` (ploke section 3 A)."""


def status_label(status: Bm25Status) -> str:
    """``uninitialized``, ``building``, ``ready``, ``empty`` or ``error``."""
    return status.label
