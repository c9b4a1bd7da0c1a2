"""File evidence: every chunk of a file with several strong hits gains a decaying share of its
file's further hits (issue 11; docs/ranking.md "Real agent questions (issue 11)", the
``file_scores`` / ``file_evidence`` formula in :mod:`ragloom.retrieve.fusion`).

Off by weight (:data:`FILE_EVIDENCE` = 0.0), so by default the stage only re-sorts; callers
that rank files may raise the weight. Rows the history stage pinned keep their places: the
evidence is computed on their scores from before the pin, and the pin is applied again after.
"""

from __future__ import annotations

from ragloom.retrieve.fusion import file_evidence
from ragloom.retrieve.stages.base import RankState, StageBase, issue_reading
from ragloom.retrieve.stages.history import pin_first

__all__ = ["FILE_EVIDENCE", "FILE_EVIDENCE_DECAY", "FILE_EVIDENCE_TOP", "FileRankStage"]

FILE_EVIDENCE = 0.0
"""Weight of a file's other hits in each of its chunks' scores (``file_evidence``); 0 = off.
Issue-11 tune split (chi+axios, role prior 0.5): off 0.634, 0.25 0.648, 0.5 0.646, 1.0 0.631
file MRR@10; R@10 0.766 off, 0.776 at 0.5. Off by default all the same: the gain is small and
file-level only, while chunk answers suffer: at 0.5 the chunk ranked first by BM25 *and* dense
for "brand new function" (a one-function file) fell out of the top 10 under four siblings of a
larger file (tests/integration/test_index_cli.py). Callers ranking files may raise it."""
FILE_EVIDENCE_DECAY = 0.5
"""Each further hit of the same file counts this much less than the one before."""
FILE_EVIDENCE_TOP = 4
"""At most this many other hits of a file count."""


class FileRankStage(StageBase):
    """Add each file's further evidence to its chunks and re-sort (then re-apply a pin)."""

    name: str = "filerank"
    reads: frozenset[str] = frozenset({"path"})
    group: str = "priors"

    def __init__(
        self,
        weight: float | None = None,
        decay: float = FILE_EVIDENCE_DECAY,
        top: int = FILE_EVIDENCE_TOP,
    ) -> None:
        self.weight = weight
        """None reads :data:`FILE_EVIDENCE` when the stage runs (so a harness can patch it)."""
        self.decay = decay
        self.top = top

    def apply(self, state: RankState) -> None:
        weight = FILE_EVIDENCE if self.weight is None else self.weight
        issue, _ = issue_reading(state)
        if issue is not None and state.issue_weights is not None:
            w = state.issue_weights.file_evidence
            weight = weight if w is None else w
        base = [(r, state.pre_pin.get(r, s)) for r, s in state.ranked]
        paths: dict[int, str] = {}
        if weight != 0.0:  # at 0 no file's evidence counts, so no path is needed
            info = state.source.chunk_info([r for r, _ in state.ranked])
            paths = {r: m[0] for r, m in info.items()}
        out = file_evidence(base, paths, weight, self.decay, self.top)
        state.ranked = pin_first(out, state.pinned) if state.pinned else out
