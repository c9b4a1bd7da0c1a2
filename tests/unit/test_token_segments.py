"""The segmented exact count (``TiktokenCounter.count`` = sum over ``split_safe`` segments).

The shortcut is only worth having if it never changes a count: these tests compare it with the
encoder run on the whole text, on real source files of several languages, on rendered context
blocks, and on random text built from the characters that decide piece boundaries.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.assemble.tokens import TiktokenCounter, load_encoding, split_safe

STDLIB = Path(sysconfig.get_paths()["stdlib"])
REPO = Path(__file__).resolve().parents[2]

_EDGE_CASES = [
    "a\n/b",  # o200k: punctuation + newline + '/' is one piece
    ")\n//x",
    ")\n  //x",
    "x;\r\n}\r\n",
    "f(a)\n\n\n    return 1\n",
    "  \n  \n\tx\n",
    "abc  \nxyz",
    "a\n \u00a0b\n",
    "a\n\u00a0b",
    "'s\n's\n'll",
    "123\n456\n7890",
    "\n",
    "\n\n<chunk a='1'>\nx\n</chunk>\n<chunk>\n y\n</chunk>",
    "é\nü\n😀\n  😀\n",
    "<|endoftext|>\n<|endoftext|>",
    "\t\n\t\n\tz",
    "x\n \n y",
    "end with spaces \n   ",
    "end with newline\n",
]


def _real_texts() -> list[str]:
    out: list[str] = []
    for name in ("textwrap.py", "json/decoder.py", "csv.py", "argparse.py"):
        out.append((STDLIB / name).read_text(encoding="utf-8"))
    for rel in ("src/ragloom/assemble/context.py", "src/ragloom/assemble/render.py"):
        out.append((REPO / rel).read_text(encoding="utf-8"))
    for ext in ("*.go", "*.js", "*.ts", "*.rs", "*.java", "*.md"):
        for path in sorted((REPO / "tests").rglob(ext))[:3]:
            out.append(path.read_text(encoding="utf-8", errors="replace"))
    return out


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_segmented_count_equals_whole_text_encoding(name: str) -> None:
    enc = load_encoding(name)
    counter = TiktokenCounter(name)
    for text in [*_real_texts(), *_EDGE_CASES]:
        segs = split_safe(text)
        assert "".join(segs) == text
        whole = len(enc.encode_ordinary(text))
        assert sum(len(enc.encode_ordinary(s)) for s in segs) == whole
        assert counter.count(text) == whole
        assert counter.count(text) == whole  # second time from the memo


def test_real_code_is_cut_into_lines() -> None:
    """The segments are small (lines), so repeated lines hit the memo."""
    text = (STDLIB / "textwrap.py").read_text(encoding="utf-8")
    segs = split_safe(text)
    assert len(segs) > text.count("\n") // 2


_ALPHABET = st.sampled_from(
    [
        "\n",
        "\r",
        " ",
        "\t",
        "/",
        "a",
        "Z",
        "é",
        "1",
        "'",
        "s",
        "(",
        ")",
        "<",
        "\u00a0",
        "😀",
        "\x0b",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, min_size=0, max_size=60).map("".join))
def test_segmented_count_equals_encoding_on_random_text(text: str) -> None:
    for name in ("cl100k", "o200k"):
        enc = load_encoding(name)
        segs = split_safe(text)
        assert "".join(segs) == text
        assert sum(len(enc.encode_ordinary(s)) for s in segs) == len(enc.encode_ordinary(text))
        assert TiktokenCounter(name).count(text) == len(enc.encode_ordinary(text))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, min_size=300, max_size=500).map("".join))
def test_memoised_count_of_long_random_text_is_exact(text: str) -> None:
    """Long texts take the segmented path of ``count`` (short ones are encoded whole)."""
    for name in ("cl100k", "o200k"):
        counter = TiktokenCounter(name)
        want = len(load_encoding(name).encode_ordinary(text))
        assert counter.count(text) == want
        assert counter.count(text) == want
        assert counter.count(text + "\nx = 1\n" + text) == len(
            load_encoding(name).encode_ordinary(text + "\nx = 1\n" + text)
        )
