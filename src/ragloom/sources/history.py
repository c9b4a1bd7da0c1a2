"""History-aware code ranking (issue 13 item 4), opt-in: past commits that resemble the question
vote for the library files they changed, and the code list is re-ranked with those votes.

The method is exactly the one measured time-split on the git-history evaluation
(docs/sources.md, ``scripts/eval_history.py``): each of the top ``depth`` commits (BM25 over the
commits source) at rank r votes ``1 / (60 + r) / files it touched`` for each library source file
(:func:`ragloom.ingest.git.path_role` is ``"source"``) it changed that exists in the work tree;
the voted files form a list fused with the code list's file ranking by weighted RRF (k = 60,
code 1.0, history ``weight``). Code hits are re-ordered by their file's fused rank (their own
order kept within a file); a voted file with no code hit is added as a ``history`` hit naming the
commits that changed it.

Off by default: on the held-back test split it raised R@10 (0.852 -> 0.869) but lowered MRR@10
(0.701 -> 0.690) at the weight chosen on tune (0.5, 20 commits).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ragloom.ingest.git import path_role
from ragloom.retrieve.config import RRF_K_DEFAULT
from ragloom.retrieve.fusion import rrf_fuse_explain
from ragloom.sources.base import SourceHit

__all__ = ["HISTORY_DEPTH_DEFAULT", "history_rerank", "vote_files"]

HISTORY_DEPTH_DEFAULT = 20
"""Commits that vote (the evaluation's tune split chose 20 over 10)."""


def vote_files(
    commits: Sequence[SourceHit], root: Path, depth: int = HISTORY_DEPTH_DEFAULT
) -> tuple[list[str], dict[str, list[str]]]:
    """Files voted by the first ``depth`` commits, best first, and the commits behind each."""
    votes: dict[str, float] = defaultdict(float)
    behind: dict[str, list[str]] = defaultdict(list)
    for rank, c in enumerate(commits[:depth], 1):
        for p in c.paths:
            if path_role(p) == "source" and (root / p).is_file():
                votes[p] += 1.0 / (RRF_K_DEFAULT + rank) / max(len(c.paths), 1)
                behind[p].append(c.id)
    ranked = sorted(votes, key=lambda p: (-votes[p], p))
    return ranked, dict(behind)


def history_rerank(
    code: Sequence[SourceHit],
    commits: Sequence[SourceHit],
    root: Path,
    weight: float,
    depth: int = HISTORY_DEPTH_DEFAULT,
) -> list[SourceHit]:
    """The code list re-ranked with the history votes (see the module docstring)."""
    voted, behind = vote_files(commits, root, depth)
    if weight <= 0 or not voted:
        return list(code)
    file_order = list(dict.fromkeys(h.paths[0] for h in code if h.paths))
    fused = rrf_fuse_explain(
        {"code": [(f, 0.0) for f in file_order], "history": [(f, 0.0) for f in voted]},
        {"code": 1.0, "history": weight},
    )
    rank_of = {it.id: i for i, it in enumerate(fused)}
    titles = {c.id: c.title for c in commits}
    out: list[tuple[int, int, SourceHit]] = []
    for i, h in enumerate(code):
        path = h.paths[0] if h.paths else ""
        if path in behind:
            h.explain = {**h.explain, "history": {"commits": behind[path][:5]}}
        out.append((rank_of.get(path, len(rank_of)), i, h))
    have = set(file_order)
    for path in voted:
        if path in have:
            continue
        shas = behind[path][:5]
        text = f"{path} was changed by commits like the question:\n" + "\n".join(
            f"  {s[:10]} {titles.get(s, '')}" for s in shas
        )
        hit = SourceHit(
            source="history",
            id=path,
            title=path,
            text=text,
            score=0.0,
            attribution={"path": path, "commits": shas},
            kind="file",
            paths=(path,),
            explain={"history": {"commits": shas}},
        )
        out.append((rank_of[path], len(code), hit))
    out.sort(key=lambda t: (t[0], t[1]))
    return [h for _, _, h in out]
