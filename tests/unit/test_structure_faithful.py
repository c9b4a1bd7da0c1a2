"""Structural context parts show the file's own lines (trial findings 4 and 5, 2026-11-28).

Before, a related definition's part claimed its lines but showed a synthesised text: methods
dedented, bodies elided by a bare ``...``, a docstring closed on a line where the file does not
close it; and ``bodies`` showed lines the context already had (a method's own class as its
"callee")."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
from ragloom.assemble.signature import signature
from ragloom.assemble.structure import Related, add_related, faithful_text, file_lines
from ragloom.ingest.ids import chunk_id, file_hash, text_hash
from ragloom.types import Hit

SRC = '''class HTTPException(Exception):
    pass


class LineTooLong(HTTPException):
    def __init__(self, line_type):
        HTTPException.__init__(self, "got more than %d bytes when reading %s"
                                     % (_MAXLINE, line_type))


def get_unstructured(value):
    """unstructured = (*([FWS] vchar) *WSP) / obs-unstruct
       obs-unstruct = *((*LF *CR *(obs-utext) *LF *CR)) / FWS)
    """
    return value
'''
MARK = re.compile(r"^\.\.\. \[lines? (\d+)(?:-(\d+))? trimmed\] \.\.\.$")


def check_faithful(text: str, ranges: tuple[tuple[int, int], ...], lines: list[str]) -> None:
    """Every shown line is the file's line at its claimed number; markers name the gaps."""
    expected: list[str] = []
    prev = None
    for a, b in ranges:
        if prev is not None:
            gap = f"{prev + 1}-{a - 1}" if a - 1 > prev + 1 else f"{prev + 1}"
            expected.append(f"... [line{'s' if '-' in gap else ''} {gap} trimmed] ...")
        expected.extend(lines[a - 1 : b])
        prev = b
    got = text.split("\n")
    if len(got) == len(expected) + 1:  # a trailing marker after the last range
        m = MARK.match(got[-1])
        assert m and int(m.group(1)) == prev + 1  # type: ignore[operator]
        got = got[:-1]
    assert got == expected


def test_class_skeleton_and_dedented_method_become_file_lines() -> None:
    lines = SRC.split("\n")
    skeleton = "class LineTooLong(HTTPException):\n    def __init__(self, line_type): ..."
    text, ranges = faithful_text(skeleton, lines, 5, 8, tail=True) or ("", ())
    assert text.split("\n") == [
        "class LineTooLong(HTTPException):",
        "    def __init__(self, line_type):",
        "... [lines 7-8 trimmed] ...",
    ]
    assert ranges == ((5, 6),)
    # a signature: the docstring's first line as the file has it (no added closing quotes)
    sig = signature("\n".join(lines[10:15]), "python", "function")
    text, ranges = faithful_text(sig, lines, 11, 15, tail=False) or ("", ())
    assert (
        text
        == 'def get_unstructured(value):\n    """unstructured = (*([FWS] vchar) *WSP) / obs-unstruct'
    )
    assert ranges == ((11, 12),)
    # a method shown dedented in the index is shown with its file indentation
    got = faithful_text("def __init__(self, line_type):", lines, 6, 8, tail=False)
    assert got == ("    def __init__(self, line_type):", ((6, 6),))
    # text not in the file (changed since indexing): nothing
    assert faithful_text("def gone(self):", lines, 6, 8, tail=False) is None


line_st = st.sampled_from(
    ["", "    x = 1", "def f(a):", "    return a", "    ...", "pass", "  # c"]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(line_st, min_size=1, max_size=30),
    st.lists(st.integers(0, 29), max_size=12),
    st.booleans(),
    st.data(),
)
def test_property_faithful_text_shows_only_file_lines(
    lines: list[str], picks: list[int], tail: bool, data: st.DataObject
) -> None:
    n = len(lines)
    start = data.draw(st.integers(1, n))
    end = data.draw(st.integers(start, n))
    # a "summary" made of some file lines, dedented, with stubs appended
    text = "\n".join(
        lines[start - 1 + p % (end - start + 1)].strip() + (" ..." if p % 3 == 0 else "")
        for p in sorted(picks)
    )
    got = faithful_text(text, lines, start, end, tail=tail)
    if got is None:
        return
    shown, ranges = got
    assert all(start <= a <= b <= end for a, b in ranges)
    assert all(b1 < a2 - 1 for (_, b1), (a2, _) in itertools.pairwise(ranges))
    check_faithful(shown, ranges, lines)


def _hit(root: Path, start: int, end: int, name: str) -> Hit:
    data = (root / "client.py").read_bytes()
    starts = [0]
    for line in data.split(b"\n"):
        starts.append(starts[-1] + len(line) + 1)
    sb, eb = starts[start - 1], starts[end] - 1
    return Hit(
        id=chunk_id("code", "client.py", name, "method"), path="client.py", start_line=start,
        end_line=end, kind="method", symbol=name, language="python", score=1.0,
        ranks={"bm25": 1}, node_hash=text_hash(data[sb:eb].decode()), file_hash=file_hash(data),
        start_byte=sb, end_byte=eb,
    )  # fmt: skip


def _related(name: str, start: int, end: int, score: float, root: Path) -> Related:
    lines = file_lines(root)("client.py")
    assert lines is not None
    text = "\n".join(lines[start - 1 : end])
    got = faithful_text(text, lines, start, end, tail=True)
    assert got is not None
    return Related("callee", name, "client.py", name, "class", "python", start, end, got[0],
                   score, "LineTooLong.__init__", got[1])  # fmt: skip


def test_related_definitions_overlapping_shown_lines_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(SRC)
    counter = get_counter("approx")
    policy = AssemblyPolicy(format="plain")
    budget = TokenBudget.for_total(4000)
    ctx = assemble_context(
        "q", [_hit(tmp_path, 6, 8, "LineTooLong.__init__")], root=tmp_path, budget=budget,
        policy=policy, counter=counter,
    )  # fmt: skip
    enclosing = _related("LineTooLong", 5, 8, 0.9, tmp_path)  # contains the shown method
    base = _related("HTTPException", 1, 2, 0.8, tmp_path)
    inner = _related("HTTPException.pass", 2, 2, 0.7, tmp_path)  # inside an added part
    out = add_related(ctx, [enclosing, base, inner], budget, policy, counter)
    assert [p.symbol for p in out.parts if p.relation] == ["HTTPException"]
    seen: dict[int, int] = {}
    for p in out.parts:
        for a, b in p.ranges:
            for i in range(a, b + 1):
                seen[i] = seen.get(i, 0) + 1
    assert max(seen.values()) == 1
