"""Selection under the budget: maximise total relevance within a token capacity.

:func:`greedy_select` takes items by relevance density (value / tokens), skipping those that
no longer fit the total or their file's cap, and returns the better of that set and the best
single item (the classic fix that bounds greedy at >= 1/2 of optimal for one knapsack).
:func:`knapsack_exact` is the exact 0/1 dynamic programme used to measure it (figures in
docs/assembly.md, from :func:`greedy_vs_exact`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Item", "greedy_select", "greedy_vs_exact", "knapsack_exact"]


@dataclass(frozen=True, slots=True)
class Item:
    """A candidate: its token weight, relevance value and group (file)."""

    weight: int
    value: float
    group: str = ""


def greedy_select(
    items: Sequence[Item],
    capacity: int,
    group_cap: int | None = None,
    first: int | None = None,
) -> list[int]:
    """Indices chosen by relevance density under ``capacity`` and a per-group cap (sorted).

    ``first`` (an index) is taken before any other when it fits on its own: the part that shows
    the best-ranked hit is never left out for parts of better density. The best-single-item
    guard then compares with ``first`` plus the best single item that fits beside it.
    """
    pinned: list[int] = []
    if first is not None and 0 <= first < len(items):
        it = items[first]
        if it.weight <= capacity and (group_cap is None or it.weight <= group_cap):
            pinned = [first]
    order = sorted(
        range(len(items)),
        key=lambda i: (-(items[i].value / max(items[i].weight, 1)), i),
    )
    chosen: list[int] = []
    used = 0
    per_group: dict[str, int] = {}
    for i in pinned + [i for i in order if i not in pinned]:
        it = items[i]
        g_used = per_group.get(it.group, 0)
        if used + it.weight > capacity:
            continue
        if group_cap is not None and g_used + it.weight > group_cap:
            continue
        chosen.append(i)
        used += it.weight
        per_group[it.group] = g_used + it.weight
    total = sum(items[i].value for i in chosen)
    base_w = sum(items[i].weight for i in pinned)
    base_v = sum(items[i].value for i in pinned)
    base_g = {items[i].group: items[i].weight for i in pinned}
    fits = [
        i
        for i in range(len(items))
        if i not in pinned
        and base_w + items[i].weight <= capacity
        and (group_cap is None or base_g.get(items[i].group, 0) + items[i].weight <= group_cap)
    ]
    if fits:
        best = min(fits, key=lambda i: (-items[i].value, i))
        if base_v + items[best].value > total:
            return sorted([*pinned, best])
    return sorted(chosen)


def knapsack_exact(weights: Sequence[int], values: Sequence[float], capacity: int) -> float:
    """Optimal total value of the 0/1 knapsack (O(n * capacity) dynamic programme)."""
    best = [0.0] * (capacity + 1)
    for w, v in zip(weights, values, strict=True):
        if w > capacity:
            continue
        for c in range(capacity, w - 1, -1):
            cand = best[c - w] + v
            if cand > best[c]:
                best[c] = cand
    return best[capacity]


def greedy_vs_exact(trials: int = 500, seed: int = 0) -> dict[str, float]:
    """Ratio greedy/optimal on random instances shaped like assembly (15-40 parts, 4k budget).

    Weights 40-900 tokens, values = fused-score-like numbers with a heavy head; capacity
    4000 tokens. Returns mean, p5 and min ratio and the share of instances solved optimally.
    """
    rng = random.Random(seed)
    ratios: list[float] = []
    for _ in range(trials):
        n = rng.randint(15, 40)
        weights = [rng.randint(40, 900) for _ in range(n)]
        values = [1.0 / (60 + rank) + rng.random() * 0.002 for rank in range(1, n + 1)]
        capacity = 4000
        items = [Item(w, v) for w, v in zip(weights, values, strict=True)]
        got = sum(values[i] for i in greedy_select(items, capacity))
        opt = knapsack_exact(weights, values, capacity)
        ratios.append(got / opt if opt > 0 else 1.0)
    ratios.sort()
    return {
        "trials": float(trials),
        "mean": sum(ratios) / len(ratios),
        "p5": ratios[int(0.05 * (len(ratios) - 1))],
        "min": ratios[0],
        "optimal_share": sum(1 for r in ratios if r >= 1.0 - 1e-12) / len(ratios),
    }
