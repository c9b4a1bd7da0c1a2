"""The exact-match boost: hits that are a symbol or file the question names, with enough
confidence, move to the top after retrieval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragloom.retrieve.query.config import QueryConfig
from ragloom.retrieve.query.entities import Entity
from ragloom.retrieve.query.lexer import norm_path

__all__ = ["EXACT_MATCH_BONUS", "exact_match_boost"]

EXACT_MATCH_BONUS = 1.0
"""A boosted hit scores ``top score + EXACT_MATCH_BONUS * confidence`` (ragloom's choice): above
every other hit, and higher-confidence entities above lower ones."""


def _path_matches(path: str, value: str) -> bool:
    p = norm_path(path)
    v = norm_path(value)
    return p == v or p.endswith("/" + v)


def _symbol_matches(symbol: str, value: str) -> bool:
    return symbol == value or symbol.endswith("." + value)


def exact_match_boost(
    hits: Sequence[tuple[str, float]],
    entities: Sequence[Entity],
    cfg: QueryConfig | None = None,
    *,
    id_paths: Mapping[str, str] | None = None,
    id_symbols: Mapping[str, str] | None = None,
) -> list[tuple[str, float]]:
    """Bring hits that are a named symbol or file to the top.

    A hit matches a symbol entity when its id is one of the entity's ``ids``, or its symbol
    (``id_symbols``) equals the name or ends with ``.name``; it matches a file entity when its
    path (``id_paths``) equals the path or ends with ``/path``. Only entities with confidence
    ``>= cfg.exact_min_confidence`` count, and nothing moves when ``cfg.exact_boost`` is off.
    A matching hit scores ``top + EXACT_MATCH_BONUS * confidence`` (its best entity), where
    ``top`` is the highest input score, so the output stays sorted by score; boosted hits are
    ordered by that score, then their original score, then their original position; the other
    hits follow in their original order with their original scores. Hits are never added or
    dropped (a named symbol that retrieval missed is for the caller to fetch: ``Entity.ids``).
    """
    c = cfg if cfg is not None else QueryConfig()
    if not hits or not c.exact_boost:
        return list(hits)
    strong = [e for e in entities if e.confidence >= c.exact_min_confidence]
    if not strong:
        return list(hits)
    paths = id_paths or {}
    syms = id_symbols or {}
    top = max(s for _, s in hits)
    boosted: list[tuple[float, float, int, str]] = []
    rest: list[tuple[str, float]] = []
    for pos, (uid, score) in enumerate(hits):
        best = 0.0
        for e in strong:
            if e.kind == "symbol":
                sym = syms.get(uid)
                hit = uid in e.ids or (sym is not None and _symbol_matches(sym, e.value))
            else:
                path = paths.get(uid)
                hit = path is not None and _path_matches(path, e.value)
            if hit and e.confidence > best:
                best = e.confidence
        if best > 0.0:
            boosted.append((top + EXACT_MATCH_BONUS * best, score, pos, uid))
        else:
            rest.append((uid, score))
    boosted.sort(key=lambda b: (-b[0], -b[1], b[2]))
    return [(uid, new) for new, _, _, uid in boosted] + rest
