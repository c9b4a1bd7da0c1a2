"""Issue texts: files and symbols an issue names rise, and issues get their own reading of
roles and history (issue 21; docs/ranking.md "Issue texts").

A question that reads as a GitHub issue (``ProcessedQuery.issue``, set by query processing)
names code: traceback frames, file and module paths, functions, classes. This stage adds a
reciprocal-rank bonus (the scale of the fused RRF scores) to the candidates those names point
at: a chunk whose symbol the issue names gets ``symbol / (k + rank)`` by the name's place among
symbols and traceback functions, strongest first; then a file the issue names gives its best
chunk (that bonus counted) ``path / (k + rank)``, ``rank`` being the name's place among the
issue's paths and modules. The bonus is scaled by the role prior (a test file an issue names
rises less).

Other stages read :class:`IssueWeights` too (:func:`issue_reading`): the priors and the history
read an issue's title (not its body, where "test" and "fix" appear everywhere) for what roles
it asks for and whether it asks for a change, and the history uses the weights
``IssueWeights.history`` names. Every weight was chosen on the tune half of the SWE-bench
evaluation (docs/evaluation.md, "SWE-bench localisation"); ``+no-issue`` turns the whole reading
off (the question is then read as plain text, as before issue 21).
"""

from __future__ import annotations

from ragloom.retrieve.roles import query_intent
from ragloom.retrieve.stages.base import ISSUE_WEIGHTS, IssueWeights, RankState, StageBase, by_score
from ragloom.retrieve.stages.priors import role_prior

__all__ = ["IssueStage", "module_paths", "path_matches"]


def module_paths(module: str) -> tuple[str, str]:
    """``a.b.c`` -> (``a/b/c.py``, ``a/b/c/__init__.py``)."""
    stem = module.replace(".", "/")
    return f"{stem}.py", f"{stem}/__init__.py"


def path_matches(path: str, named: str) -> bool:
    """True when the indexed ``path`` is the file ``named`` (a suffix on a folder boundary,
    either way round: ``src/pkg/a.py`` matches ``pkg/a.py`` and ``/home/u/pkg/a.py``)."""
    return path == named or named.endswith("/" + path) or path.endswith("/" + named)


def _last(name: str) -> str:
    return name.rstrip("()").rsplit(".", 1)[-1]


class IssueStage(StageBase):
    """Add the bonus of the names an issue gives to the candidates they point at, then sort."""

    name: str = "issue"
    reads: frozenset[str] = frozenset({"query", "role", "symbol"})
    group: str = "priors"

    def __init__(self, weights: IssueWeights = ISSUE_WEIGHTS) -> None:
        self.weights = weights

    def __repr__(self) -> str:
        return f"IssueStage({self.weights!r})"

    def applies(self, state: RankState) -> bool:
        return state.pq.issue is not None and (self.weights.path > 0 or self.weights.symbol > 0)

    def apply(self, state: RankState) -> None:
        issue = state.pq.issue
        if issue is None:
            return
        w = self.weights
        sig = issue.signals
        files = [p.value for p in sig.paths]
        for m in sig.modules:
            files.extend(module_paths(m.value))
        names: dict[str, int] = {}
        for n in sorted([*sig.symbols, *sig.functions], key=lambda x: -x.weight):
            last = _last(n.value)
            if last and last not in names and len(names) < w.max_names:
                names[last] = len(names) + 1
        path_rank: dict[str, int] = {}
        for f in files:
            if f not in path_rank and len(path_rank) < 2 * w.max_names:
                path_rank[f] = len(path_rank) + 1
        if not names and not path_rank:
            return
        info = state.source.chunk_info([r for r, _ in state.ranked])
        rows = state.source.store.chunks_by_rowids([r for r, _ in state.ranked]) if names else {}
        intent = query_intent(issue.text.title if w.title_intent else state.query)
        bonus: dict[int, float] = {}
        for r, _ in state.ranked:  # a chunk whose symbol the issue names
            row = rows.get(r)
            rank = names.get(_last(row.symbol)) if row is not None and row.symbol else None
            if rank is not None:
                bonus[r] = w.symbol / (w.k + rank)
        seen_files: set[str] = set()
        for r, _ in by_score([(r, s + bonus.get(r, 0.0)) for r, s in state.ranked]):
            meta = info.get(r)  # a file the issue names: its best chunk, named symbols counted
            if meta is None or meta[0] in seen_files or not path_rank:
                continue
            seen_files.add(meta[0])
            best = min((k for f, k in path_rank.items() if path_matches(meta[0], f)), default=None)
            if best is not None:
                bonus[r] = bonus.get(r, 0.0) + w.path / (w.k + best)
        out = []
        for r, s in state.ranked:
            b = bonus.get(r, 0.0)
            meta = info.get(r)
            if b and meta is not None:
                b *= role_prior(meta[1], intent)
                state.note(r, "issue", b)
            out.append((r, s + b))
        state.ranked = by_score(out)
