"""Repository map budget filling: never over budget (exactly counted), monotone, deterministic."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.assemble.repomap import (
    EMPTY_MAP_JSON,
    MAP_FORMATS,
    MapEntry,
    MapFormat,
    RepoMap,
    build_map,
)
from ragloom.assemble.tokens import TokenCounter, get_counter

CL100K = get_counter("cl100k")
APPROX = get_counter("approx")

PATHS = ["src/app/api.py", "src/app/models.py", "lib/parse.rs", "web/ui.tsx", "/abs/x.c", "README"]
_SIG_CHARS = st.sampled_from(
    [*"abcdefXYZ_(){}[]:;,.=<>-\"'`#@ \t\n", "def ", "self", "->", "│", "é", "日本", "```"]
)
SIGNATURES = st.lists(_SIG_CHARS, max_size=40).map("".join)
ENTRY = st.builds(
    MapEntry,
    path=st.sampled_from(PATHS),
    symbol=st.text(alphabet="abcXYZ._", max_size=8),
    kind=st.sampled_from(["function", "method", "class", "struct"]),
    line=st.integers(1, 20000),
    signature=SIGNATURES,
    score=st.floats(-5, 5, allow_nan=False) | st.sampled_from([0.0, 1.0, math.nan]),
)
ENTRIES = st.lists(ENTRY, max_size=30)
FILE_SCORES = st.dictionaries(st.sampled_from(PATHS), st.floats(-5, 5, allow_nan=False), max_size=4)
BUDGET = st.integers(0, 40000) | st.integers(0, 400)
FMT = st.sampled_from(MAP_FORMATS)
PROPS = settings(max_examples=60, deadline=None)


def _shown(m: RepoMap) -> Counter[MapEntry]:
    return Counter(e for f in m.files for e in f.entries)


def _check(m: RepoMap, entries: Sequence[MapEntry], budget: int, counter: TokenCounter) -> None:
    assert m.tokens <= max(budget, 0)
    assert m.tokens == counter.count(m.text)
    # an empty map is "", or in JSON the empty document when the budget holds it
    assert (m.text in ("", EMPTY_MAP_JSON)) == (m.entries_shown == 0)
    assert m.entries_total == len(entries)
    assert m.entries_shown == sum(len(f.entries) for f in m.files)
    assert m.truncated == (m.entries_shown < m.entries_total)
    assert not _shown(m) - Counter(entries)  # only given entries, each at most as often
    for f in m.files:
        assert f.entries and all(e.path == f.path for e in f.entries)
        assert [e.line for e in f.entries] == sorted(e.line for e in f.entries)


@PROPS
@given(entries=ENTRIES, scores=FILE_SCORES, budget=BUDGET, fmt=FMT, fill=st.booleans())
def test_within_budget_exact_cl100k(
    entries: list[MapEntry], scores: dict[str, float], budget: int, fmt: MapFormat, fill: bool
) -> None:
    m = build_map(entries, scores, budget, CL100K, fmt=fmt, fill=fill)
    _check(m, entries, budget, CL100K)


@PROPS
@given(entries=ENTRIES, scores=FILE_SCORES, budget=BUDGET, fmt=FMT, fill=st.booleans())
def test_within_budget_approx(
    entries: list[MapEntry], scores: dict[str, float], budget: int, fmt: MapFormat, fill: bool
) -> None:
    m = build_map(entries, scores, budget, APPROX, fmt=fmt, fill=fill)
    _check(m, entries, budget, APPROX)
    if fmt == "json" and m.text:
        doc = json.loads(m.text)
        assert [f["path"] for f in doc["files"]] == [f.path for f in m.files]
        assert sum(len(f["entries"]) for f in doc["files"]) == m.entries_shown


@PROPS
@given(entries=ENTRIES, scores=FILE_SCORES, budgets=st.lists(BUDGET, min_size=2, max_size=4))
def test_monotone_in_budget(
    entries: list[MapEntry], scores: dict[str, float], budgets: list[int]
) -> None:
    """``fill=False``: a larger budget never shows fewer entries (shown sets are nested).
    ``fill=True``: a larger budget keeps every entry of the smaller budget's prefix, and the
    greedy pass never shows fewer entries than the prefix at the same budget."""
    budgets.sort()
    prefix = [build_map(entries, scores, b, CL100K, fill=False) for b in budgets]
    filled = [build_map(entries, scores, b, CL100K) for b in budgets]
    for i in range(len(budgets) - 1):
        assert prefix[i].entries_shown <= prefix[i + 1].entries_shown
        assert not _shown(prefix[i]) - _shown(prefix[i + 1])
        assert not _shown(prefix[i]) - _shown(filled[i + 1])
    for p, f in zip(prefix, filled, strict=True):
        assert not _shown(p) - _shown(f)
        assert f.entries_shown >= p.entries_shown


@PROPS
@given(
    entries=ENTRIES,
    scores=FILE_SCORES,
    budget=BUDGET,
    fmt=FMT,
    data=st.randoms(use_true_random=False),
)
def test_deterministic(
    entries: list[MapEntry],
    scores: dict[str, float],
    budget: int,
    fmt: MapFormat,
    data: random.Random,
) -> None:
    a = build_map(entries, scores, budget, CL100K, fmt=fmt)
    b = build_map(list(entries), dict(scores), budget, CL100K, fmt=fmt)
    assert a == b
    shuffled = list(entries)
    data.shuffle(shuffled)
    c = build_map(shuffled, scores, budget, CL100K, fmt=fmt)
    assert c.text == a.text and c.tokens == a.tokens


ENTRIES_EXAMPLE = [
    MapEntry("src/http.py", "Client.send", "method", 12, "def send(self, request):", 0.9),
    MapEntry(
        "src/http.py",
        "Client",
        "class",
        3,
        '@dataclass\nclass Client(Base):\n    """An HTTP client."""',
        0.5,
    ),
    MapEntry(
        "src/util.py", "retry", "function", 140, "def retry(\n    fn,\n    n: int = 3,\n):", 0.7
    ),
    MapEntry("lib/parse.rs", "parse", "function", 7, "pub fn parse(s: &str) -> Result<T, E>", 0.2),
]


def test_rendering_text() -> None:
    m = build_map(ENTRIES_EXAMPLE, {"src/http.py": 2.0, "src/util.py": 1.0}, 10_000, CL100K)
    assert m.text == (
        "src/http.py:\n"
        "   3│ @dataclass\n"
        "      class Client(Base):\n"
        '          """An HTTP client."""\n'
        "  12│ def send(self, request):\n"
        "\n"
        "src/util.py:\n"
        "  140│ def retry(\n"
        "           fn,\n"
        "           n: int = 3,\n"
        "       ):\n"
        "\n"
        "lib/parse.rs:\n"
        "  7│ pub fn parse(s: &str) -> Result<T, E>"
    )
    assert (m.entries_total, m.entries_shown, m.truncated) == (4, 4, False)
    assert [f.path for f in m.files] == ["src/http.py", "src/util.py", "lib/parse.rs"]
    assert m.files[2].score == 0.2  # a file without a score takes its best entry's


def test_rendering_markdown_and_json() -> None:
    entries = [
        *ENTRIES_EXAMPLE[:1],
        MapEntry("src/http.py", "F", "class", 30, "class F:  # ```", 0.1),
    ]
    md = build_map(entries, {}, 10_000, CL100K, fmt="markdown")
    assert md.text == (
        "### src/http.py\n\n````python\n  12│ def send(self, request):\n  30│ class F:  # ```\n````"
    )
    js = build_map(ENTRIES_EXAMPLE[:2], {}, 10_000, CL100K, fmt="json")
    assert js.text.split("\n")[:2] == ['{"files":[', '{"path":"src/http.py","entries":[']
    assert json.loads(js.text) == {
        "files": [
            {
                "path": "src/http.py",
                "entries": [
                    {
                        "line": 3,
                        "kind": "class",
                        "symbol": "Client",
                        "signature": '@dataclass\nclass Client(Base):\n    """An HTTP client."""',
                    },
                    {
                        "line": 12,
                        "kind": "method",
                        "symbol": "Client.send",
                        "signature": "def send(self, request):",
                    },
                ],
            }
        ]
    }


def test_budget_edges() -> None:
    full = build_map(ENTRIES_EXAMPLE, {}, 10_000, CL100K)
    assert build_map(ENTRIES_EXAMPLE, {}, full.tokens, CL100K) == full
    assert build_map(ENTRIES_EXAMPLE, {}, full.tokens - 1, CL100K).truncated
    first = build_map(ENTRIES_EXAMPLE[:1], {}, 10_000, CL100K)
    assert first.text == "src/http.py:\n  12│ def send(self, request):"
    tiny = build_map(ENTRIES_EXAMPLE, {}, first.tokens - 1, CL100K, fill=False)
    assert (tiny.text, tiny.tokens, tiny.files, tiny.entries_shown) == ("", 0, [], 0)
    for budget in (0, -5):
        assert build_map(ENTRIES_EXAMPLE, {}, budget, CL100K).text == ""
    assert build_map([], {}, 100, CL100K).entries_total == 0
    with pytest.raises(ValueError, match="unknown map format"):
        build_map(ENTRIES_EXAMPLE, {}, 100, CL100K, fmt="xml")  # type: ignore[arg-type]


def test_greedy_fills_past_a_large_entry_and_the_price() -> None:
    """The greedy pass uses the room a too-large next entry leaves; at the budget where that
    entry fits, it takes the room back, so the filled map shows fewer entries (the reason
    ``fill=False`` exists)."""
    big = MapEntry(
        "a.py", "big", "function", 1, "def big(" + ", ".join(f"a{i}" for i in range(60)) + "):", 1.0
    )
    small = [MapEntry("a.py", f"s{i}", "function", 10 + i, f"def s{i}():", 0.5) for i in range(6)]
    alone = build_map([big], {}, 10_000, CL100K).tokens
    below = build_map([big, *small], {}, alone - 1, CL100K)
    at = build_map([big, *small], {}, alone, CL100K)
    assert big not in _shown(below) and below.entries_shown == 6
    assert _shown(at) == Counter([big])
    assert build_map([big, *small], {}, alone - 1, CL100K, fill=False).entries_shown == 0


class _Counting:
    """A counter that records how many whole texts were counted exactly."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.counts = 0

    def count(self, text: str) -> int:
        self.counts += 1
        return self.inner.count(text)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_batch(texts)


def test_few_exact_counts() -> None:
    entries = [
        MapEntry(
            f"pkg/m{i % 37}.py",
            f"f{i}",
            "function",
            i,
            f"def f{i}(a, b=({i}, 'x')) -> int:",
            (i * 7919) % 1000,
        )
        for i in range(2000)
    ]
    for budget in (64, 300, 2000, 8000, 30000):
        c = _Counting(CL100K)
        m = build_map(entries, {}, budget, c)
        assert m.tokens <= budget
        assert c.counts <= 2 * math.ceil(math.log2(len(entries) + 1)) + 3


def test_cl100k_loads_without_network() -> None:
    code = (
        "import socket\n"
        "def _no(*a, **k):\n    raise OSError('network disabled')\n"
        "socket.socket.connect = socket.socket.connect_ex = _no\n"
        "socket.create_connection = socket.getaddrinfo = _no\n"
        "from ragloom.assemble.tokens import get_counter\n"
        "print(get_counter('cl100k').count('def send(self, request):'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(CL100K.count("def send(self, request):"))
