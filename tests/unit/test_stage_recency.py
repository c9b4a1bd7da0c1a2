"""RecencyStage: normalised scores plus the recency boost by file mtime."""

from __future__ import annotations

import time

import pytest

from ragloom.retrieve.config import RecencyConfig
from ragloom.retrieve.stages.recency import RecencyStage
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "old.py"), row(2, "new.py")]


def test_newer_file_rises(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_700_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)
    store = FakeStore(
        {r.rowid: r for r in ROWS}, mtimes={"old.py": now - 365 * 86400, "new.py": now}
    )
    st = state([(1, 1.0), (2, 0.95), (3, 0.0)], ROWS, source=FakeSource(store))
    st.ranked = [(1, 1.0), (2, 0.95)]
    RecencyStage(RecencyConfig(boost=2.0)).apply(st)
    assert [r for r, _ in st.ranked] == [2, 1]
    assert st.ranked[0][1] == pytest.approx(2.0)
