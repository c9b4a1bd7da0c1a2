"""Item-store search is the same whichever of equal scores the BM25 engine returns first
(which depends on its segments' layout, so on merge timing): the cut is made after every item
that ties with the last one is in (``BaseItemStore._ranked_through_ties``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ragloom.sources.base import SourceFilter
from ragloom.sources.itemstore import Item, ItemStore


def _commit(i: int) -> Item:
    # 40 identical messages (equal BM25 scores) and a few others, dated one second apart
    same = i < 40
    return Item(
        id=f"c{i:03d}",
        kind="commit",
        title="Update README" if same else f"Fix header parsing {i}",
        text="Update README" if same else f"Fix header parsing in module {i}",
        date=1.7e9 + i,
        paths=(f"pkg/f{i % 7}.py",),
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ties_at_the_cut_do_not_depend_on_the_engine_order(tmp_path: Path, seed: int) -> None:
    store = ItemStore(tmp_path, "commits")
    try:
        store.upsert([_commit(i) for i in range(60)])
        flt = SourceFilter(until=1.7e9 + 30)  # a filter: the search over-fetches, then cuts
        want = [h.id for h in store.search("update readme", 5, flt)]
        engine = store._bm25_ranked
        rng = random.Random(seed)

        def shuffled(text: str, k: int) -> list[tuple[int, float]]:
            # every hit, ties in another order, then the engine's cut at k
            every = engine(text, 1000)
            rng.shuffle(every)
            every.sort(key=lambda r: -r[1])
            return every[:k]

        store._bm25_ranked = shuffled  # type: ignore[method-assign]
        got = [h.id for h in store.search("update readme", 5, flt)]
        assert got == want
        # the answer: the tied items of the window, by id, all dated within the filter
        assert want == [f"c{i:03d}" for i in range(5)]
        assert store.search("update readme", 0, flt) == []
    finally:
        store.close()
