"""Lone carriage returns end lines at chunking and assembly alike (trial finding 7,
2026-11-28: a file with classic Mac line endings was one line, ``1-1``, its text shown with raw
``\\r``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
from ragloom.assemble.snippets import split_lines
from ragloom.ingest.chunker import _Text, chunk_file
from ragloom.ingest.ids import file_hash
from ragloom.types import Hit

CR_ONLY = b'def classic_mac_line_endings():\r    return "cr only"\r\r\rdef second_cr_function():\r    return 2\r'


def test_cr_only_file_is_chunked_and_shown_line_by_line(tmp_path: Path) -> None:
    chunks = chunk_file("cr_only.py", CR_ONLY, file_hash(CR_ONLY))
    spans = {c.symbol: (c.start_line, c.end_line) for c in chunks if c.symbol}
    assert spans["classic_mac_line_endings"] == (1, 2)
    assert spans["second_cr_function"] == (5, 6)
    (tmp_path / "cr_only.py").write_bytes(CR_ONLY)
    second = next(c for c in chunks if c.symbol == "second_cr_function")
    hit = Hit(
        id=second.id, path="cr_only.py", start_line=5, end_line=6, kind=second.kind,
        symbol=second.symbol, language="python", score=1.0, ranks={"bm25": 1},
        node_hash=second.node_hash, file_hash=file_hash(CR_ONLY), start_byte=second.start_byte,
        end_byte=second.end_byte, text=second.text,
    )  # fmt: skip
    ctx = assemble_context(
        "q", [hit], root=tmp_path, budget=TokenBudget.for_total(1000),
        policy=AssemblyPolicy(format="json"), counter=get_counter("approx"),
    )  # fmt: skip
    assert ctx.parts[0].ranges == [(5, 6)]
    assert ctx.parts[0].text == "def second_cr_function():\n    return 2"
    assert "\r" not in ctx.text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=12, max_size=12),
)
def test_property_lines_numbered_alike_for_any_endings(lines: list[str], ends: list[str]) -> None:
    data = "".join(ln + e for ln, e in zip(lines, ends, strict=False)).encode()
    got = split_lines(data)
    assert got[: len(lines)] == lines and got[len(lines) :] == [""]
    assert _Text(data).n_lines == len(lines)
