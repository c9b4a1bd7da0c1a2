"""bench.scale and bench.peers: statistics, target checks, ratios, quality, report, and a tiny end-to-end run."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from ragloom.bench import peers
from ragloom.bench import scale as bs
from ragloom.bench.corpus import load_corpus
from ragloom.cli.bench import bench_scale_cmd

# -- summarize / percentile -------------------------------------------------------------------


def test_summarize_known_sample() -> None:
    samples = [float(i) for i in range(1, 101)]  # 1..100 ms
    s = bs.summarize(samples)
    assert s["p50_ms"] == 50.5
    assert s["p95_ms"] == 95.0  # nearest rank: the 95th of 100 values
    assert s["mean_ms"] == 50.5
    assert s["n"] == 100.0


def test_percentile_nearest_rank() -> None:
    assert bs.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert bs.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0  # rank ceil(2.0) = 2
    assert bs.percentile([1.0, 2.0, 3.0, 4.0], 51) == 3.0
    assert bs.percentile([5.0], 0) == 5.0
    assert bs.percentile([1.0, 9.0], 100) == 9.0
    with pytest.raises(ValueError):
        bs.percentile([], 50)
    with pytest.raises(ValueError):
        bs.percentile([1.0], 101)


@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=100),
    st.floats(min_value=0, max_value=100),
)
def test_percentile_covers_q_percent(values: list[float], q: float) -> None:
    p = bs.percentile(values, q)
    assert p in values
    at_or_below = sum(v <= p for v in values)
    below = sum(v < p for v in values)
    assert at_or_below >= q * len(values) / 100  # at least q % at or below
    assert below < max(q * len(values) / 100, 1)  # and it is the smallest such sample


def test_summarize_rejects_empty() -> None:
    with pytest.raises(ValueError):
        bs.summarize([])


@given(st.lists(st.floats(min_value=0.0, max_value=1e4), min_size=1, max_size=200))
def test_summarize_orders_percentiles(samples: list[float]) -> None:
    s = bs.summarize(samples)
    # rounding to 2 decimals may move each value by at most 0.005
    assert min(samples) - 0.01 <= s["p50_ms"] <= s["p95_ms"] + 0.01
    assert s["p95_ms"] <= max(samples) + 0.01
    assert s["p95_ms"] in {round(v, 2) for v in samples}


# -- targets -----------------------------------------------------------------------------------


def _row(p50: float, p95: float) -> dict[str, float]:
    return {"p50_ms": p50, "p95_ms": p95, "mean_ms": p50, "n": 10.0}


def test_evaluate_targets_pass_fail_skip() -> None:
    latency = {"dense": _row(10.0, 40.0), "hybrid": _row(60.0, 260.0)}
    checks = {c.target.metric: c for c in bs.evaluate_targets(latency)}
    assert checks["dense"].passed is True
    assert checks["hybrid"].passed is False  # p50 within 70 but p95 over 250
    assert checks["context"].passed is None  # not measured
    assert checks["dense"].line().startswith("PASS dense retrieval at k=15: p50 10 ms <= 40 ms")
    assert "p95 260 ms > 250 ms" in checks["hybrid"].line()
    assert checks["hybrid"].line().startswith("FAIL")
    assert checks["context"].line().startswith("SKIP")


def test_evaluate_targets_bounds_are_inclusive() -> None:
    t = bs.Target("x", "m", 15.0, 40.0, "test")
    assert bs.evaluate_targets({"m": _row(15.0, 40.0)}, [t])[0].passed is True
    assert bs.evaluate_targets({"m": _row(15.01, 40.0)}, [t])[0].passed is False


def test_seed_targets_match_issue() -> None:
    got = {t.metric: (t.p50_ms, t.p95_ms) for t in bs.SEED_TARGETS}
    assert got == {
        "dense": (40.0, 150.0),
        "hybrid": (70.0, 250.0),
        "assembly": (30.0, 120.0),
        "context": (15.0, 40.0),
    }


def test_latency_ratios() -> None:
    mine = {"hybrid": _row(2.0, 5.0)}
    peers = {"lc": _row(20.0, 25.0), "slow": _row(6.0, 10.0)}
    r = bs.latency_ratios(mine, peers, [("lc", "hybrid"), ("slow", "hybrid"), ("x", "hybrid")])
    assert r["lc / ragloom hybrid"] == {"p50_ratio": 10.0, "p95_ratio": 5.0, "meets_5x": 1.0}
    assert r["slow / ragloom hybrid"]["meets_5x"] == 0.0
    assert "x / ragloom hybrid" not in r


def test_file_quality() -> None:
    ranked = [["a.py", "a.py", "b.py"], ["c.py", "d.py"], ["e.py"]]
    gold = [["b.py"], ["c.py", "z.py"], ["q.py"]]
    q = bs.file_quality(ranked, gold, k=10)
    # unique files: [a, b] -> rr 1/2; [c, d] -> rr 1, recall 1/2; [e] -> 0
    assert q["mrr@10"] == round((0.5 + 1.0 + 0.0) / 3, 4)
    assert q["recall@10"] == round((1.0 + 0.5 + 0.0) / 3, 4)
    assert q["queries"] == 3.0
    with pytest.raises(ValueError):
        bs.file_quality([["a.py"]], [])


# -- report ------------------------------------------------------------------------------------


def test_render_report() -> None:
    results = {
        "machine": "2 cores",
        "scales": {
            "10k real": {
                "chunks": 10000,
                "latency": {"dense": _row(5.0, 9.0), "context": _row(20.0, 50.0)},
                "concurrency": {
                    "p50_ms": 1.0,
                    "p95_ms": 2.0,
                    "queries_per_s": 300.0,
                    "wall_s": 0.3,
                },
            },
            "500k synthetic": {
                "chunks": 500000,
                "synthetic": "random unit vectors",
                "latency": {"dense": _row(1.0, 2.0)},
            },
        },
        "assembly_microbench": {"assembly": _row(3.0, 4.0)},
        "peers": {
            "chunks": 10000,
            "build_s": {"bm25s": 1.0},
            "latency": {"bm25s": _row(3.0, 4.0)},
            "ratios": {"bm25s / ragloom sparse": {"p50_ratio": 3.0, "p95_ratio": 2.0}},
            "quality": {"bm25s": {"mrr@10": 0.5, "recall@10": 0.6, "queries": 2.0}},
        },
    }
    md = bs.render_report(results, "ragloom bench-scale X", day="2026-01-01")
    assert "### bench-scale run (2026-01-01)" in md
    assert "Command: `ragloom bench-scale X`" in md
    assert "#### 10k real: 10000 chunks" in md
    assert "- PASS dense retrieval at k=15: p50 5 ms" in md
    assert "- FAIL ragloom: hybrid + MMR + assembly: p50 20 ms > 15 ms" in md
    assert "Synthetic: random unit vectors." in md
    assert "300.0 queries/s" in md
    assert "- PASS assembly, 15 parts from 4 files" in md
    assert "| bm25s | 0.5 | 2.0 | 0.6 |" in md  # quality columns sorted: mrr, queries, recall
    assert "bm25s / ragloom sparse" in md


# -- tiny end-to-end ---------------------------------------------------------------------------

_MODULE = '''
def {name}_parse(text):
    """Parse {name} text into tokens."""
    return [t for t in text.split() if t]


def {name}_encode(obj):
    """Encode a {name} object as a string."""
    return str(obj)


class {cls}Reader:
    """Read {name} records from a file."""

    def __init__(self, path):
        self.path = path

    def read(self):
        with open(self.path) as fh:
            return fh.read()
'''

_NAMES = ("json", "csv", "http", "smtp", "gzip", "socket", "pickle", "base64", "url", "regex")


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import ragloom

    root = tmp_path_factory.mktemp("tiny")
    for name in _NAMES:
        (root / f"{name}_mod.py").write_text(
            textwrap.dedent(_MODULE.format(name=name, cls=name.capitalize())), encoding="utf-8"
        )
    idx = ragloom.open(root, embedder="hashing")
    stats = idx.index()
    idx.close()
    assert 30 <= stats.chunks_total <= 80
    return root / ".ragloom"


QUERIES = ("parse json text", "read csv records from a file", "encode base64 object")


def test_bench_latency_end_to_end(tiny_index: Path) -> None:
    lat = bs.bench_latency(tiny_index, queries=QUERIES, runs=1)
    expected = {"sparse", "dense", "hybrid", "hybrid-mmr", "context", "assembly-real"}
    assert set(lat) == expected
    for row in lat.values():
        assert row["n"] == len(QUERIES)
        assert 0 < row["p50_ms"] <= row["p95_ms"]
    assert lat["assembly-real"]["parts_mean"] >= 1


def test_bench_concurrency_end_to_end(tiny_index: Path) -> None:
    c = bs.bench_concurrency(tiny_index, n=12, queries=QUERIES)
    assert c["n"] == 12
    assert c["queries_per_s"] > 0
    assert c["p50_ms"] <= c["p95_ms"] <= c["wall_s"] * 1000 + 1


def test_load_corpus_reads_texts_paths_and_vectors(tiny_index: Path) -> None:
    corpus = load_corpus(tiny_index)
    assert len(corpus) == len(corpus.texts) == len(corpus.paths) == corpus.vectors.shape[0]
    assert corpus.model_spec == "hashing:64"  # the manifest keeps the full spec
    assert all(float(abs(v).sum()) > 0 for v in corpus.vectors)  # stored embeddings reused
    assert {p.split("_")[0] for p in corpus.paths} == set(_NAMES)
    assert corpus.document(0).endswith(corpus.texts[0])
    bare = load_corpus(tiny_index, limit=5, with_vectors=False)
    assert len(bare) == 5 and bare.vectors.shape == (5, corpus.vectors.shape[1])
    assert not bare.vectors.any()
    assert bare.rowids == corpus.rowids[:5]


def test_bench_synthetic_small(tiny_index: Path, tmp_path: Path) -> None:
    r = bs.bench_synthetic(tiny_index, tmp_path, n=300, queries=QUERIES, runs=1)
    assert r["chunks"] == 300
    lat = r["latency"]
    assert isinstance(lat, dict)
    assert set(lat) == {"sparse", "dense", "hybrid", "hybrid-mmr"}


@pytest.mark.skipif(importlib.util.find_spec("bm25s") is None, reason="bench extra not installed")
@pytest.mark.parametrize("interleave", bs.INTERLEAVE_MODES)
def test_bench_peers_bm25s_with_quality(tiny_index: Path, tmp_path: Path, interleave: str) -> None:
    ds = tmp_path / "ds.jsonl"
    rows = [
        {"id": "1", "query": "parse json text into tokens", "gold_files": ["json_mod.py"]},
        {"id": "2", "query": "read smtp records", "gold_files": ["smtp_mod.py"]},
    ]
    ds.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    mine = {"sparse": _row(1.0, 2.0)}
    r = peers.bench_peers(
        tiny_index,
        mine,
        peers=["bm25s"],
        queries=QUERIES,
        runs=1,
        dataset=ds,
        interleave=interleave,
    )
    assert r["interleave"] == interleave
    quality = r["quality"]
    assert isinstance(quality, dict)
    assert set(quality) == {"bm25s", *(f"ragloom {s}" for s in bs.STRATEGIES)}
    assert quality["bm25s"]["mrr@10"] == 1.0  # distinctive words: the right file first
    assert quality["ragloom sparse"]["mrr@10"] == 1.0
    ratios = r["ratios"]
    assert isinstance(ratios, dict) and "bm25s / ragloom sparse" in ratios
    # ragloom was timed interleaved with the peer, query by query, as often as the peer
    mine_interleaved = r["ragloom_interleaved"]
    assert isinstance(mine_interleaved, dict)
    assert mine_interleaved["bm25s"]["sparse"]["n"] == r["latency"]["bm25s"]["n"] == len(QUERIES)
    separate = r["ratios_separate"]
    assert isinstance(separate, dict) and "bm25s / ragloom sparse" in separate
    with pytest.raises(ValueError, match="interleave"):
        peers.bench_peers(tiny_index, mine, peers=["bm25s"], queries=QUERIES, interleave="random")


def test_bench_scale_command(tiny_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    js = tmp_path / "bench.json"
    res = CliRunner().invoke(
        bench_scale_cmd,
        [str(tiny_index), "--runs", "1", "--out", str(out), "--json-out", str(js)],
    )
    assert res.exit_code == 0, res.output
    assert "bench-scale run" in out.read_text(encoding="utf-8")
    data = json.loads(js.read_text(encoding="utf-8"))
    (scale,) = data["scales"].values()
    assert scale["concurrency"]["n"] == bs.CONCURRENT_QUERIES
    assert "assembly" in data["assembly_microbench"]
