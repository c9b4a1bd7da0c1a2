"""Byte-identical ranking (issue 21): every strategy and modifier answers exactly as recorded.

``scripts/check_ranking_identity.py`` indexes a fixed corpus (chi's pinned tree with its
history, the language samples, a few generated files; the hashing embedder), runs every
strategy name and modifier, with and without ``explain``, on the chi golden questions and on
questions written to trigger each ranking stage, and compares every hit (path, symbol, lines,
``repr`` of the score, ranks, modality scores and the explain record) with the committed
snapshot ``tests/golden/ranking_identity.jsonl.gz``. A refactor of the ranking code must leave it
passing unchanged; an intended ranking change rewrites the snapshot
(``scripts/check_ranking_identity.py --update``) in the same commit, saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts.check_ranking_identity import (
    SNAPSHOT,
    differences,
    open_index,
    read_snapshot,
    record,
)

pytestmark = pytest.mark.integration


def test_every_strategy_answers_as_recorded(tmp_path: Path) -> None:
    idx = open_index(tmp_path)
    try:
        got = record(idx)
    finally:
        idx.close()
    want = read_snapshot(SNAPSHOT)
    assert len(got) == len(want) > 1000
    diffs = differences(got, want)
    assert not diffs, "ranking changed:\n" + "\n".join(diffs)


def test_the_check_can_fail() -> None:
    want = read_snapshot(SNAPSHOT)
    changed = [dict(r) for r in want]
    hit = list(changed[0]["hits"][0])
    hit[4] = repr(float(hit[4]) + 1e-12)
    changed[0]["hits"] = [hit, *changed[0]["hits"][1:]]
    assert differences(changed, want)
    assert differences(changed[:-1], want)
