"""A symbol table derived from the previous generation's by the rows that changed answers
exactly like one rebuilt from the new rows, and leaves the previous table untouched."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.retrieve.query.entities import InMemorySymbolTable

NAMES = st.sampled_from(["a", "b", "a.b", "C.a", "C.b.a", "D", ""])
PATHS = st.sampled_from(["x.py", "p/x.py", "p/q/x.py", "p/y.py", "z.go", ""])
ROWS = st.lists(  # a chunk id names one row of a generation
    st.tuples(NAMES, PATHS, st.integers(0, 30).map(lambda i: f"id{i}")),
    max_size=40,
    unique_by=lambda r: r[2],
)
PROBES = ["a", "b", "a.b", "C.a", "C.b.a", "b.a", "D", "x.py", "q/x.py", "p/x.py", "y.py", "z.go"]


def _view(t: InMemorySymbolTable) -> tuple[dict[str, list[str]], dict[str, bool]]:
    return {n: sorted(t.lookup(n)) for n in PROBES}, {p: t.has_path(p) for p in PROBES}


@settings(max_examples=300, deadline=None)
@given(old=ROWS, new=ROWS)
def test_derived_equals_rebuilt(
    old: list[tuple[str, str, str]], new: list[tuple[str, str, str]]
) -> None:
    before = InMemorySymbolTable(old)
    snapshot = _view(before)
    keep = set(old) & set(new)
    derived = before.derived([r for r in old if r not in keep], [r for r in new if r not in keep])
    assert _view(derived) == _view(InMemorySymbolTable(new))
    assert _view(before) == snapshot, "the previous generation's table is not changed"
