"""Context assembly: budget, dedup, stitching, trimming, ordering, freshness, safety, formats."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragloom.assemble import (
    AssembledContext,
    AssemblyPolicy,
    TokenBudget,
    TokenCounter,
    assemble_context,
    get_counter,
)
from ragloom.assemble.render import BlockMeta, render_block
from ragloom.assemble.select import Item, greedy_select, greedy_vs_exact, knapsack_exact
from ragloom.assemble.snippets import safe_path
from ragloom.assemble.trim import signature_lines
from ragloom.bench.assembly import bench_assembly
from ragloom.errors import ConfigError
from ragloom.ingest.ids import chunk_id, file_hash, text_hash
from ragloom.types import Hit

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "assemble"
APPROX = get_counter("approx")
BIG = TokenBudget(max_total=100_000, per_file_max=100_000, per_part_max=100_000)

UTIL = '''"""Helpers."""


def parse_config(text):
    """Parse key=value lines into a dict."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def unused_helper():
    return 42


class Registry:
    """Holds named handlers."""

    def __init__(self):
        self.handlers = {}

    def register(self, name, fn):
        self.handlers[name] = fn
'''

APP = '''"""Application entry point."""

from util import Registry, parse_config


def main(path):
    """Load the config and run."""
    with open(path) as fh:
        cfg = parse_config(fh.read())
    reg = Registry()
    reg.register("default", cfg)
    return reg
'''


def make_hit(
    root: Path,
    rel: str,
    start: int,
    end: int,
    *,
    symbol: str = "",
    kind: str = "function",
    score: float = 1.0,
    hid: str | None = None,
    ranks: dict[str, int] | None = None,
) -> Hit:
    """A hit over lines ``start..end`` of ``root/rel`` with hashes and byte span as indexed."""
    data = (root / rel).read_bytes()
    starts = [0]
    for line in data.split(b"\n"):
        starts.append(starts[-1] + len(line) + 1)
    sb, eb = starts[start - 1], starts[end] - 1
    return Hit(
        id=hid or chunk_id("code", rel, symbol or f"{start}-{end}", kind),
        path=rel,
        start_line=start,
        end_line=end,
        kind=kind,
        symbol=symbol,
        language="python",
        score=score,
        ranks=ranks if ranks is not None else {"bm25": 1, "dense": 2},
        node_hash=text_hash(data[sb:eb].decode("utf-8")),
        file_hash=file_hash(data),
        start_byte=sb,
        end_byte=eb,
    )


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "util.py").write_text(UTIL)
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def run(
    root: Path,
    hits: list[Hit],
    *,
    budget: TokenBudget = BIG,
    policy: AssemblyPolicy | None = None,
    counter: TokenCounter = APPROX,
    embeddings: dict[str, np.ndarray] | None = None,
) -> AssembledContext:
    return assemble_context(
        "query",
        hits,
        root=root,
        budget=budget,
        policy=policy or AssemblyPolicy(),
        counter=counter,
        embeddings=embeddings,
    )


# --- budget and policy -------------------------------------------------------------------------


def test_budget_validation_and_defaults() -> None:
    b = TokenBudget.for_total(4000)
    assert (b.max_total, b.per_part_max, b.per_file_max, b.available) == (4000, 1000, 2000, 4000)
    r = TokenBudget(1000, 500, 200, {"system": 100, "answer": 300})
    assert r.available == 600
    assert TokenBudget.for_total(100).per_part_max == 64
    assert TokenBudget.for_total(10).per_part_max == 10
    for bad in (
        lambda: TokenBudget(0, 10, 10),
        lambda: TokenBudget(100, 0, 10),
        lambda: TokenBudget(100, 10, -1),
        lambda: TokenBudget(100, 10, 10, {"system": 100}),
        lambda: TokenBudget(100, 10, 10, {"system": -1}),
        lambda: TokenBudget.for_total(0),
        lambda: TokenBudget.for_total(100, {"answer": 100}),
        lambda: AssemblyPolicy(format="html"),  # type: ignore[arg-type]
        lambda: AssemblyPolicy(ordering="random"),  # type: ignore[arg-type]
        lambda: AssemblyPolicy(dedup_threshold=1.5),
        lambda: AssemblyPolicy(kinds=frozenset()),
        lambda: AssemblyPolicy(fill_gap_lines=-1),
    ):
        with pytest.raises(ConfigError):
            bad()
    assert json.dumps(r.to_dict()) and json.dumps(AssemblyPolicy().to_dict())


def test_bad_arguments_are_config_errors(repo: Path) -> None:
    with pytest.raises(ConfigError):
        assemble_context("q", [], root=repo, budget=4000, policy=AssemblyPolicy(), counter=APPROX)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        assemble_context("q", [], root=repo, budget=BIG, policy=AssemblyPolicy(), counter=object())  # type: ignore[arg-type]


def test_empty_hits_give_empty_context(repo: Path) -> None:
    ctx = run(repo, [])
    assert ctx.parts == [] and ctx.text == "" and ctx.stats.tokens_total == 0
    assert ctx.stats.coverage == 1.0


# --- dedup --------------------------------------------------------------------------------------


def test_exact_dedup(repo: Path) -> None:
    a = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.9)
    same_id = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.5)
    same_text = make_hit(repo, "util.py", 4, 10, symbol="alias", score=0.4, hid=str(uuid.uuid4()))
    ctx = run(repo, [a, same_id, same_text])
    assert len(ctx.parts) == 1
    assert ctx.parts[0].hit_ids == [a.id]
    assert ctx.stats.duplicates["exact"] == 2
    assert ctx.stats.duplication_ratio == pytest.approx(2 / 3)
    assert ctx.parts[0].text.count("def parse_config") == 1


def test_overlap_dedup_merges_ranges(repo: Path) -> None:
    cls = make_hit(repo, "util.py", 17, 24, symbol="Registry", kind="class", score=0.5)
    meth = make_hit(repo, "util.py", 22, 24, symbol="Registry.register", kind="method", score=0.9)
    tail = make_hit(repo, "util.py", 20, 24, symbol="x", kind="method", score=0.1)
    ctx = run(repo, [cls, meth, tail])
    assert len(ctx.parts) == 1
    part = ctx.parts[0]
    assert part.ranges == [(17, 24)]
    assert part.text.count("def register") == 1
    assert part.id == meth.id  # best-ranked member names the part
    assert ctx.stats.duplicates["overlap"] == 2


def test_near_duplicate_dedup_uses_embeddings(repo: Path) -> None:
    a = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.9)
    b = make_hit(repo, "app.py", 6, 12, symbol="main", score=0.8)
    c = make_hit(repo, "util.py", 13, 14, symbol="unused_helper", score=0.7)
    v = np.array([1.0, 0.0, 0.0])
    emb = {
        a.id: v,
        b.id: np.array([0.9, 0.3, 0.0]),  # cosine 0.949 with a: near duplicate
        c.id: np.array([0.8, 0.6, 0.0]),  # cosine 0.8 with a: kept
    }
    ctx = run(repo, [a, b, c], embeddings=emb)
    ids = {h for p in ctx.parts for h in p.hit_ids}
    assert ids == {a.id, c.id}
    assert ctx.stats.duplicates["near"] == 1
    # a higher threshold keeps it; no embeddings never dedups
    ctx2 = run(repo, [a, b, c], embeddings=emb, policy=AssemblyPolicy(dedup_threshold=0.95))
    assert {h for p in ctx2.parts for h in p.hit_ids} == {a.id, b.id, c.id}
    assert {h for p in run(repo, [a, b, c]).parts for h in p.hit_ids} == {a.id, b.id, c.id}


# --- stitching and trimming ---------------------------------------------------------------------


def test_stitching_with_gaps_shows_elision_marker(repo: Path) -> None:
    a = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.9)
    b = make_hit(repo, "util.py", 23, 24, symbol="Registry.register", kind="method", score=0.8)
    adjacent = make_hit(repo, "util.py", 11, 12, symbol="gap", score=0.1)
    ctx = run(repo, [a, b])
    assert len(ctx.parts) == 1
    part = ctx.parts[0]
    assert part.ranges == [(4, 10), (23, 24)]
    assert "... [lines 11-22 omitted] ..." in part.text
    assert part.text.index("def parse_config") < part.text.index("def register")
    # adjacent ranges merge without a marker
    ctx2 = run(repo, [a, adjacent])
    assert ctx2.parts[0].ranges == [(4, 12)] and "omitted" not in ctx2.parts[0].text


def test_trimming_keeps_signature_and_marks_cut(tmp_path: Path) -> None:
    body = "\n".join(
        f"    total += compute_value_{i}(items, weights, offset={i})" for i in range(200)
    )
    src = f"@decorator\ndef long_function(items,\n                  weights):\n    total = 0\n{body}\n    return total\n"
    (tmp_path / "long.py").write_text(src)
    n = src.count("\n")
    hit = make_hit(tmp_path, "long.py", 1, n, symbol="long_function")
    budget = TokenBudget(max_total=400, per_file_max=300, per_part_max=150)
    ctx = run(tmp_path, [hit], budget=budget)
    assert len(ctx.parts) == 1
    part = ctx.parts[0]
    assert part.text.startswith("@decorator\ndef long_function(items,\n                  weights):")
    assert part.trimmed and ctx.stats.truncated
    last = part.ranges[-1][1]
    assert part.text.rstrip().endswith(f"... [lines {last + 1}-{n} trimmed] ...")
    assert part.tokens <= 150
    assert signature_lines(src.split("\n"), 1, n) == 3


def test_trimming_keeps_inner_hit_visible(tmp_path: Path) -> None:
    methods = "\n\n".join(
        f"    def method_{i}(self, value):\n        return value * {i} + self.base_{i}"
        for i in range(60)
    )
    src = f"class Big:\n    base = 1\n\n{methods}\n"
    (tmp_path / "big.py").write_text(src)
    lines = src.split("\n")
    n = len(lines) - 1
    target = lines.index("    def method_50(self, value):") + 1
    cls = make_hit(tmp_path, "big.py", 1, n, symbol="Big", kind="class", score=0.9)
    meth = make_hit(
        tmp_path, "big.py", target, target + 1, symbol="Big.method_50", kind="method", score=0.5
    )
    ctx = run(tmp_path, [cls, meth], budget=TokenBudget(1000, 200, 200))
    text = ctx.parts[0].text
    assert text.startswith("class Big:") and "def method_50" in text and "trimmed" in text
    assert meth.id in ctx.parts[0].hit_ids


def test_part_with_unfittable_signature_is_dropped(repo: Path) -> None:
    hit = make_hit(repo, "util.py", 4, 10, symbol="parse_config")
    ctx = run(repo, [hit], budget=TokenBudget(5, 5, 5))
    assert ctx.parts == [] and ctx.text == "" and ctx.stats.truncated


def test_flexible_caps_give_one_large_part_rather_than_none(tmp_path: Path) -> None:
    """A block whose signature alone is over a quarter of a small budget: the derived caps
    (``for_total``) give way, caps set by hand hold and the left-out block is counted."""
    (tmp_path / "s.py").write_text(
        'SPECIAL = "<|endoftext|> and <|fim_prefix|> <|im_start|> and more words to make it long"\n'
        "def special_tokens_fn():\n    return SPECIAL\n"
    )
    hit = make_hit(tmp_path, "s.py", 1, 3, symbol="special_tokens_fn")
    flexible = TokenBudget.for_total(200)
    held = TokenBudget(200, flexible.per_file_max, flexible.per_part_max)
    assert run(tmp_path, [hit], budget=held).parts == []
    assert run(tmp_path, [hit], budget=held).stats.dropped_for_budget == 1
    ctx = run(tmp_path, [hit], budget=flexible)
    assert [p.hit_ids for p in ctx.parts] == [[hit.id]]
    assert flexible.per_part_max < ctx.parts[0].tokens <= ctx.stats.tokens_total <= 200
    assert ctx.stats.budget["caps_flexible"] is True
    # a budget too small for the block still gives nothing
    assert run(tmp_path, [hit], budget=TokenBudget.for_total(20)).parts == []


def test_an_empty_json_context_is_still_json(repo: Path) -> None:
    """A JSON context without parts is ``{"context": []}`` (it was ``""``, which no JSON
    reader takes), or ``""`` when even that is over the budget."""
    hit = make_hit(repo, "util.py", 4, 10, symbol="parse_config")
    policy = AssemblyPolicy(format="json")
    ctx = run(repo, [hit], budget=TokenBudget(12, 12, 12), policy=policy)
    assert ctx.parts == [] and json.loads(ctx.text) == {"context": []}
    assert ctx.stats.tokens_total == APPROX.count(ctx.text) <= 12
    assert run(repo, [hit], budget=TokenBudget(2, 2, 2), policy=policy).text == ""
    assert json.loads(run(repo, [], policy=policy).text) == {"context": []}


# --- ordering -----------------------------------------------------------------------------------


def test_definitions_before_references(repo: Path) -> None:
    main = make_hit(repo, "app.py", 6, 12, symbol="main", score=0.9)
    parse = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.2)
    ctx = run(repo, [main, parse])
    assert [p.file_path for p in ctx.parts] == ["util.py", "app.py"]
    by_score = run(repo, [main, parse], policy=AssemblyPolicy(ordering="score"))
    assert [p.file_path for p in by_score.parts] == ["app.py", "util.py"]
    # a file that defines nothing referenced keeps its score order
    helper = make_hit(repo, "util.py", 13, 14, symbol="unused_helper", score=0.2)
    ctx2 = run(repo, [main, helper])
    assert [p.file_path for p in ctx2.parts] == ["app.py", "util.py"]


def test_within_file_source_order_and_score_ties(repo: Path) -> None:
    late = make_hit(repo, "util.py", 22, 24, symbol="register", kind="method", score=0.9)
    early = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.1)
    ctx = run(repo, [late, early], budget=TokenBudget(2000, 2000, 60))
    assert len(ctx.parts) == 2
    assert [p.ranges[0][0] for p in ctx.parts] == [4, 22]
    a = make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.5)
    b = make_hit(repo, "app.py", 6, 12, symbol="main", score=0.5)
    tie = run(repo, [a, b], policy=AssemblyPolicy(ordering="score"))
    assert [p.file_path for p in tie.parts] == ["app.py", "util.py"]  # tie broken by path


# --- freshness ----------------------------------------------------------------------------------


def _chunker_hits(root: Path, rel: str) -> list[Hit]:
    chunker = pytest.importorskip("ragloom.ingest.chunker")
    data = (root / rel).read_bytes()
    return [
        Hit(
            id=c.id, path=c.path, start_line=c.start_line, end_line=c.end_line, kind=c.kind,
            symbol=c.symbol, language=c.language, score=1.0, node_hash=c.node_hash,
            file_hash=c.file_hash, start_byte=c.start_byte, end_byte=c.end_byte, source=c.source,
        )
        for c in chunker.chunk_file(rel, data, file_hash(data))
    ]  # fmt: skip


def test_stale_file_is_reresolved_by_chunk_id(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n")
    hits = {h.symbol.rsplit(".", 1)[-1]: h for h in _chunker_hits(tmp_path, "m.py")}
    beta = hits["beta"]
    assert (beta.start_line, beta.end_line) == (5, 6)
    (tmp_path / "m.py").write_text(
        "import os\n\n\ndef alpha():\n    return 1\n\n\ndef beta():\n    return 22\n"
    )
    ctx = run(tmp_path, [beta])
    assert ctx.stats.stale_reresolved == 1 and ctx.stats.stale_dropped == 0
    assert ctx.parts[0].ranges == [(8, 9)]
    assert "return 22" in ctx.parts[0].text and "return 2\n" not in ctx.parts[0].text


def test_stale_chunk_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n")
    hits = {h.symbol.rsplit(".", 1)[-1]: h for h in _chunker_hits(tmp_path, "m.py")}
    (tmp_path / "m.py").write_text("def alpha():\n    return 1\n\n\ndef gamma():\n    return 2\n")
    ctx = run(tmp_path, [hits["beta"], hits["alpha"]])
    assert ctx.stats.stale_dropped == 1 and ctx.stats.stale_reresolved == 1
    assert "beta" not in ctx.text and "def alpha" in ctx.text
    (tmp_path / "m.py").unlink()
    gone = run(tmp_path, [hits["alpha"]])
    assert gone.parts == [] and gone.stats.stale_dropped == 1


def test_stale_without_chunker_uses_resolver(repo: Path) -> None:
    hit = make_hit(repo, "util.py", 4, 10, symbol="parse_config")
    (repo / "util.py").write_text("\n\n" + UTIL)
    calls: list[str] = []

    def resolver(path: str, data: bytes, fh: str) -> list[Hit]:
        calls.append(path)
        assert fh == file_hash(data)
        return []  # the symbol is gone

    ctx = assemble_context(
        "q", [hit], root=repo, budget=BIG, policy=AssemblyPolicy(), counter=APPROX,
        resolver=resolver,
    )  # fmt: skip
    assert calls == ["util.py"] and ctx.parts == [] and ctx.stats.stale_dropped == 1


# --- path safety --------------------------------------------------------------------------------


def test_path_escape_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 'do not read'\n")
    (root / "ok.py").write_text("def ok():\n    return 1\n")
    (root / "link.py").symlink_to(secret)
    (root / "inner").symlink_to(tmp_path)
    real_root = root.resolve()
    for bad in ("../secret.py", str(secret), "link.py", "inner/secret.py", "a/../../secret.py", ""):
        assert safe_path(real_root, bad) is None, bad
    assert safe_path(real_root, "ok.py") == real_root / "ok.py"
    base = make_hit(root, "ok.py", 1, 2, symbol="ok")
    hits = [base]
    for i, bad in enumerate(["../secret.py", str(secret), "link.py", "inner/secret.py"]):
        hits.append(
            Hit(id=f"bad{i}", path=bad, start_line=1, end_line=1, kind="function", symbol="s",
                language="python", score=2.0, file_hash=file_hash(secret.read_bytes()))
        )  # fmt: skip
    ctx = run(root, hits)
    assert "SECRET" not in ctx.text
    assert ctx.stats.refused == 4
    assert [p.file_path for p in ctx.parts] == ["ok.py"]


def test_escape_check_happens_before_any_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "out.py"
    outside.write_text("x = 1\n")
    (root / "link.py").symlink_to(outside)
    opened: list[str] = []
    real_read = Path.read_bytes

    def spy(self: Path) -> bytes:
        opened.append(str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    hit = Hit(id="x", path="link.py", start_line=1, end_line=1, kind="function", symbol="x",
              language="python", score=1.0)  # fmt: skip
    ctx = run(root, [hit])
    assert ctx.stats.refused == 1
    assert not any(p.endswith("out.py") for p in opened)


# --- formats (golden) ---------------------------------------------------------------------------


def _golden_hits(repo: Path) -> list[Hit]:
    return [
        make_hit(repo, "app.py", 6, 12, symbol="main", score=0.0328, ranks={"bm25": 1, "dense": 1}),
        make_hit(repo, "util.py", 4, 10, symbol="parse_config", score=0.0161, ranks={"bm25": 2}),
        make_hit(repo, "util.py", 23, 24, symbol="Registry.register", kind="method", score=0.0159,
                 ranks={"dense": 3}),
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["xml", "markdown", "plain", "json"])
@pytest.mark.parametrize("scores", [False, True])
def test_format_golden(repo: Path, fmt: str, scores: bool) -> None:
    policy = AssemblyPolicy(format=fmt, include_scores=scores)  # type: ignore[arg-type]
    ctx = run(repo, _golden_hits(repo), policy=policy)
    name = f"{fmt}{'_scores' if scores else ''}.txt"
    golden = GOLDEN / name
    if os.environ.get("RAGLOOM_REGEN_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(ctx.text + "\n", encoding="utf-8")
    assert ctx.text + "\n" == golden.read_text(encoding="utf-8")
    assert ("0.0328" in ctx.text) is scores
    lines = ("[4, 10]", "[23, 24]") if fmt == "json" else ("4-10", "23-24")
    for attribution in ("util.py", *lines, "parse_config", "main", "code"):
        assert attribution in ctx.text
    if fmt == "json":
        doc = json.loads(ctx.text)
        assert [c["path"] for c in doc["context"]] == ["util.py", "app.py"]
        assert doc["context"][0]["ranges"] == [[4, 10], [23, 24]]
    json.dumps(ctx.to_dict())  # everything is JSON-ready
    assert ctx.parts[1].modality == "hybrid" and ctx.parts[0].modality == "hybrid"


# --- selection ----------------------------------------------------------------------------------


def test_greedy_selection_against_exact_knapsack() -> None:
    items = [Item(60, 1.0), Item(50, 0.9), Item(50, 0.9)]
    assert greedy_select(items, 100) == [1, 2]
    assert knapsack_exact([60, 50, 50], [1.0, 0.9, 0.9], 100) == pytest.approx(1.8)
    # the best-single-item guard: one big valuable item beats many small ones
    assert greedy_select([Item(1, 0.02), Item(100, 1.0)], 100) == [1]
    # group (file) cap
    assert greedy_select([Item(40, 1, "a"), Item(40, 1, "a"), Item(40, 0.5, "b")], 200, 60) == [
        0,
        2,
    ]
    stats = greedy_vs_exact(trials=60, seed=1)
    assert stats["mean"] > 0.95 and stats["min"] >= 0.5


# --- the acceptance property --------------------------------------------------------------------

WORDS = ["def", "return", "self", "value", "x", "(", ")", ":", "=", "+", "'s", "    ", "#", "ünï",
         "\t", "```", "</chunk>", "<|endoftext|>", "{", "}", "0", "123456"]  # fmt: skip
line_st = st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join)
file_st = st.lists(line_st, min_size=1, max_size=40)


@st.composite
def scenario(
    draw: st.DrawFn,
) -> tuple[
    list[list[str]], list[tuple[int, int, int, float, str, int]], TokenBudget, AssemblyPolicy
]:
    files = draw(st.lists(file_st, min_size=1, max_size=3))
    n_hits = draw(st.integers(0, 12))
    hits = []
    for _ in range(n_hits):
        f = draw(st.integers(0, len(files) - 1))
        n = len(files[f])
        a = draw(st.integers(1, n))
        b = draw(st.integers(a, n))
        score = draw(st.floats(-5, 5, allow_nan=False))
        kind = draw(st.sampled_from(["function", "class", "method", "module"]))
        ident = draw(st.integers(0, 20))
        hits.append((f, a, b, score, kind, ident))
    max_total = draw(st.integers(1, 1500))
    reserve = draw(st.integers(0, max_total - 1))
    per_part = draw(st.integers(1, 800))
    per_file = draw(st.integers(1, 1200))
    budget = TokenBudget(max_total, per_file, per_part, {"system": reserve})
    policy = AssemblyPolicy(
        format=draw(st.sampled_from(["xml", "markdown", "plain", "json"])),
        include_scores=draw(st.booleans()),
        ordering=draw(st.sampled_from(["definitions_first", "score", "source"])),
        fill_gap_lines=draw(st.integers(0, 2)),
    )
    return files, hits, budget, policy


def _check_property(
    counter: TokenCounter,
    data: tuple[
        list[list[str]], list[tuple[int, int, int, float, str, int]], TokenBudget, AssemblyPolicy
    ],
) -> None:
    files, raw_hits, budget, policy = data
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, lines in enumerate(files):
            (root / f"f{i}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
        hits = [
            make_hit(root, f"f{f}.py", a, b, symbol=f"sym{ident}", kind=kind, score=score,
                     hid=f"id{ident}-{f}-{a}")
            for f, a, b, score, kind, ident in raw_hits
        ]  # fmt: skip
        emb = {h.id: np.array([1.0, (hash(h.id) % 7) / 3.0]) for h in hits[::2]}
        ctx = assemble_context(
            "q", hits, root=root, budget=budget, policy=policy, counter=counter, embeddings=emb
        )
        again = assemble_context(
            "q", hits, root=root, budget=budget, policy=policy, counter=counter, embeddings=emb
        )
    assert counter.count(ctx.text) <= budget.available
    assert ctx.stats.tokens_total == counter.count(ctx.text)
    per_file: dict[str, int] = defaultdict(int)
    for p in ctx.parts:
        meta = BlockMeta(p.source, p.file_path, p.ranges, p.symbol, p.kind, p.language, p.score)
        block = render_block(policy.format, meta, p.text, policy.include_scores)
        assert block in ctx.text
        assert counter.count(block) == p.tokens <= budget.per_part_max
        per_file[p.file_path] += p.tokens
    assert all(v <= budget.per_file_max for v in per_file.values())
    assert ctx.text == again.text
    assert [p.to_dict() for p in ctx.parts] == [p.to_dict() for p in again.parts]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_property_budget_caps_determinism_approx(
    data: tuple[
        list[list[str]], list[tuple[int, int, int, float, str, int]], TokenBudget, AssemblyPolicy
    ],
) -> None:
    _check_property(APPROX, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_property_budget_caps_determinism_cl100k(
    data: tuple[
        list[list[str]], list[tuple[int, int, int, float, str, int]], TokenBudget, AssemblyPolicy
    ],
) -> None:
    _check_property(get_counter("cl100k"), data)


class SuperadditiveCounter:
    """Adversarial counter: the whole costs more than the sum of its parts, so only the final
    check of the rendered text (drop from the tail) can keep the budget."""

    def count(self, text: str) -> int:
        return len(text.split()) + (len(text) // 100) ** 2

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [self.count(t) for t in texts]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_property_holds_for_superadditive_counter(
    data: tuple[
        list[list[str]], list[tuple[int, int, int, float, str, int]], TokenBudget, AssemblyPolicy
    ],
) -> None:
    _check_property(SuperadditiveCounter(), data)


def test_final_check_drops_from_the_tail(repo: Path) -> None:
    hits = _golden_hits(repo)
    counter = SuperadditiveCounter()
    whole = run(repo, hits, counter=counter)
    budget = TokenBudget(whole.stats.tokens_total - 1, 10_000, 10_000)
    ctx = run(repo, hits, counter=counter, budget=budget)
    assert counter.count(ctx.text) <= budget.available
    assert ctx.stats.dropped_for_budget >= 1 and ctx.stats.truncated
    assert 0 < len(ctx.parts) < len(whole.parts)


# --- benchmark ----------------------------------------------------------------------------------


def test_bench_assembly_runs_and_meets_seed_target() -> None:
    out = bench_assembly(n_parts=15, n_files=4, runs=15)
    assert out["n_hits"] == 15 and out["parts"] >= 4 and out["tokens"] <= 4000
    assert 0 < out["p50_ms"] <= out["p95_ms"]
    # seed target (ploke section 6) is p50 <= 30 ms; 2x headroom for the shared 2-core machine
    assert out["p50_ms"] <= 60.0


def test_module_hit_shows_its_header_not_the_whole_file(tmp_path: Path) -> None:
    """A module (remainder) chunk spans the file; assembly shows its first contiguous block."""
    from ragloom.assemble.snippets import fetch_snippets
    from ragloom.ingest.chunker import chunk_file
    from ragloom.ingest.ids import file_hash

    src = (
        '"""Tools."""\nimport os\n\nLIMIT = 3\n\n\n'
        "def big(x):\n" + "".join(f"    y{i} = x + {i}\n" for i in range(30)) + "    return x\n"
        "\n\nTAIL = 1\n"
    )
    (tmp_path / "tools.py").write_text(src)
    data = src.encode()
    chunks = chunk_file("tools.py", data, file_hash(data))
    module = next(c for c in chunks if c.kind == "module")
    assert module.end_line > 30  # the remainder chunk spans the whole file
    hit = Hit(
        id=module.id,
        path="tools.py",
        start_line=module.start_line,
        end_line=module.end_line,
        kind="module",
        symbol=module.symbol,
        language="python",
        score=1.0,
        text=module.text,
        node_hash=module.node_hash,
        file_hash=module.file_hash,
        start_byte=module.start_byte,
        end_byte=module.end_byte,
    )
    snippets, _, _ = fetch_snippets([hit], tmp_path)
    assert snippets[0].start_line == 1
    assert snippets[0].end_line < 7  # stops before `def big`


def test_a_byte_order_mark_is_not_shown(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_bytes(b'\xef\xbb\xbfdef bom_function():\n    return "bom"\n')
    hit = make_hit(tmp_path, "b.py", 1, 2, symbol="bom_function")
    ctx = run(tmp_path, [hit])
    assert ctx.parts and ctx.parts[0].text.startswith("def bom_function():")
    assert "\ufeff" not in ctx.text
