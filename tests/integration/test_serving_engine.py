"""The serving engine over a real index (issue 12): answers and their fields, the result cache
and its invalidation by a new generation, concurrent queries while a re-index job runs,
feedback round trips (surviving a rebuild), live settings and Prometheus metrics.

The tree is a few generated files whose every chunk names the version of the tree it comes
from (``marker_<file>_v<k>``), so a hit can be checked against the generation its answer
reports.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import ragloom
from ragloom.embed.base import Embedder
from ragloom.errors import IndexNotFoundError, InputError
from ragloom.server import ServingEngine
from ragloom.settings import Settings

pytestmark = pytest.mark.integration

FILES = ("alpha", "beta", "gamma", "delta")
QUERIES = (
    "marker function returns the version",
    "helper adds the value",
    "Holder class method",
    "stable function of the module",
    "marker_alpha",
)
_VERSION = re.compile(r"_v(\d+)\b")


def source(name: str, k: int) -> str:
    return (
        f"def marker_{name}_v{k}():\n"
        f'    """The marker function of {name}: returns the version {k}."""\n'
        f'    return "VERSION_{k}"\n\n\n'
        f"def stable_{name}():\n"
        f'    return "stable function of the module {name}"\n\n\n'
        f"def helper_{name}_v{k}(value):\n"
        f'    """Helper: adds the value {k}."""\n'
        f"    return value + {k}\n\n\n"
        f"class Holder_{name}_v{k}:\n"
        f'    """Holder class of {name}."""\n\n'
        f"    def method_{name}_v{k}(self):\n"
        f'        return "VERSION_{k}"\n'
    )


def write_tree(root: Path, k: int) -> None:
    for name in FILES:
        tmp = root / f".{name}.tmp"
        tmp.write_text(source(name, k), encoding="utf-8")
        tmp.replace(root / f"{name}.py")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedded index of version 0, copied by each test that changes it."""
    root = tmp_path_factory.mktemp("served") / "repo"
    root.mkdir()
    write_tree(root, 0)
    ragloom.open(root).index()
    return root


@pytest.fixture
def repo(built: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(built, dest)
    return dest


@pytest.fixture(scope="module")
def model() -> Embedder:
    """The shipped model, loaded once for the module (each engine would load its own)."""
    from ragloom.embed.registry import load_embedder

    return load_embedder("default")


@pytest.fixture
def engine(repo: Path, model: Embedder) -> Iterator[ServingEngine]:
    eng = ServingEngine.open(repo, Settings(), embedder=model)
    yield eng
    eng.close()


def versions(answer: dict[str, Any]) -> set[int]:
    """Tree versions the hits' symbols name (stable chunks name none)."""
    out: set[int] = set()
    for h in answer["hits"]:
        m = _VERSION.search(h["symbol"] or "")
        if m:
            out.add(int(m.group(1)))
    return out


def test_search_and_context_answers(engine: ServingEngine) -> None:
    a = engine.search("marker function returns the version", top_k=5)
    assert {"query_id", "latency_ms", "cache_hit", "generation", "query", "strategy", "hits"} <= (
        set(a)
    )
    assert len(a["query_id"]) == 32 and a["cache_hit"] is False and a["latency_ms"] > 0
    assert a["strategy"] == "hybrid" and 0 < len(a["hits"]) <= 5
    first = a["hits"][0]
    assert {"id", "path", "start_line", "end_line", "kind", "symbol", "score", "ranks"} <= set(
        first
    )
    assert first["generation"] == a["generation"] >= 1
    assert "dense" in first["ranks"] or "bm25" in first["ranks"]

    c = engine.context("helper adds the value", budget=300, format="markdown")
    assert c["format"] == "markdown" and c["generation"] == a["generation"]
    assert c["context"] and c["parts"] and c["stats"]["tokens_total"] <= 300
    part = c["parts"][0]
    assert {"chunk_id", "path", "start_line", "end_line", "tokens"} <= set(part)
    assert part["chunk_id"] in c["hit_ids"]

    with pytest.raises(InputError):
        engine.search("x", top_k=0)
    with pytest.raises(InputError):
        engine.search("x", strategy="telepathy")
    with pytest.raises(InputError):
        engine.context("x", format="pdf")


def test_cache_hit_on_repeat_and_miss_after_a_new_generation(
    engine: ServingEngine, repo: Path
) -> None:
    first = engine.search("Holder class method")
    again = engine.search("  Holder   class method ")  # whitespace normalised
    assert again["cache_hit"] is True and again["query_id"] != first["query_id"]
    assert again["hits"] == first["hits"]
    assert engine.search("holder class method")["cache_hit"] is False  # case is kept

    emb_hits = engine.status()["embedding_cache"]["hits"]
    write_tree(repo, 1)
    job = engine.start_reindex()
    assert engine.start_reindex() == job  # one job at a time (an update takes >100 ms)
    assert engine.status()["jobs"] == 1
    done = engine.wait_job(job, timeout=120)
    assert done is not None and done["state"] == "succeeded", done
    assert done["stats"]["generation"] == first["generation"] + 1
    after = engine.search("Holder class method")
    assert after["cache_hit"] is False
    # a new generation, the same text: the query embedding comes from its cache, not ONNX
    assert engine.status()["embedding_cache"]["hits"] > emb_hits
    assert after["generation"] == first["generation"] + 1
    assert versions(after) == {1}
    assert engine.search("Holder class method")["cache_hit"] is True
    st = engine.status()
    assert st["generation"] == after["generation"]
    assert st["cache"]["hits"] >= 2 and st["cache"]["misses"] >= 3
    assert engine.job("no-such-job") is None


def test_whitespace_variants_get_the_same_answer_uncached(repo: Path, model: Embedder) -> None:
    settings = Settings.model_validate({"cache": {"enabled": False}})
    eng = ServingEngine.open(repo, settings, embedder=model)
    try:
        for q in QUERIES:
            a = eng.search(q)
            b = eng.search(f"  {q.replace(' ', '   ')}\n")
            assert b["cache_hit"] is False
            assert [h["id"] for h in a["hits"]] == [h["id"] for h in b["hits"]], q
    finally:
        eng.close()


def test_concurrent_queries_while_reindexing(engine: ServingEngine, repo: Path) -> None:
    g0 = engine.status()["generation"]
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(17)
    reindexed = threading.Event()

    def wait_and_signal(job: str) -> None:
        engine.wait_job(job, 120)
        reindexed.set()

    def worker(i: int) -> None:
        barrier.wait()
        for j in range(20):
            if j == 14:  # the rest of the queries see the new generation for certain
                reindexed.wait(120)
            q = QUERIES[(i + j) % len(QUERIES)]
            try:
                a = (
                    engine.context(q, budget=400)
                    if j % 4 == 3
                    else engine.search(q, strategy="hybrid" if j % 3 else "sparse")
                )
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                continue
            with lock:
                answers.append(a)
            if j == 5 and i == 0:
                write_tree(repo, 1)
                job = engine.start_reindex()
                threading.Thread(target=wait_and_signal, args=(job,), daemon=True).start()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    barrier.wait()
    for t in threads:
        t.join()
    jobs = [j for j in engine._jobs]
    assert len(jobs) == 1
    final = engine.wait_job(jobs[0], timeout=120)
    assert final is not None and final["state"] == "succeeded", final
    g1 = final["stats"]["generation"]
    assert not errors, errors[:3]
    assert len(answers) == 16 * 20
    published = {g0, g1}
    version_of = {g0: 0, g1: 1}
    seen = {a["generation"] for a in answers}
    assert seen == published, seen
    for a in answers:
        assert a["generation"] in published
        if "hits" in a:
            assert all(h["generation"] == a["generation"] for h in a["hits"])
            assert versions(a) <= {version_of[a["generation"]]}, a
    late = engine.search("marker function returns the version")
    assert late["generation"] == g1 and versions(late) == {1}


def test_feedback_round_trip_and_rebuild(engine: ServingEngine, repo: Path) -> None:
    a = engine.search("helper adds the value")
    qid, chunk = a["query_id"], a["hits"][0]["id"]
    rec = engine.record_feedback(qid, chunk, "helpful", "exactly this")
    assert rec["query_id"] == qid and rec["chunk_id"] == chunk and rec["in_results"] is True
    engine.record_feedback(qid, a["hits"][1]["id"], "partially_helpful")
    engine.record_feedback(qid, "some-other-chunk", "not_helpful")
    used = engine.track_context_usage(qid, [chunk, a["hits"][1]["id"], chunk])
    assert used["used_chunk_ids"] == sorted([chunk, a["hits"][1]["id"]])
    stats = engine.feedback_stats(qid)
    assert stats == {
        "query_id": qid,
        "total": 3,
        "helpful_count": 1,
        "not_helpful_count": 1,
        "partially_helpful_count": 1,
        "avg_rating": pytest.approx(0.5),
        "used_chunk_ids": sorted([chunk, a["hits"][1]["id"]]),
    }
    with pytest.raises(InputError, match="unknown query_id"):
        engine.record_feedback("0" * 32, chunk, "helpful")
    with pytest.raises(InputError, match="rating"):
        engine.record_feedback(qid, chunk, "great")
    with pytest.raises(InputError):
        engine.track_context_usage(qid, "not-a-list")
    fresh = engine.search("stable function of the module")
    assert engine.feedback_stats(fresh["query_id"])["avg_rating"] is None

    # a rebuild is a new generation of the same database: the engine follows it, the
    # chunk ids are the same, feedback stays
    epoch, generation = engine.status()["epoch"], a["generation"]
    ragloom.open(repo).index(rebuild=True)
    b = engine.search("helper adds the value")
    assert engine.status()["epoch"] == epoch and b["generation"] > generation
    assert b["cache_hit"] is False and b["hits"] and b["hits"][0]["id"] == chunk
    assert engine.feedback_stats(qid)["total"] == 3
    engine.record_feedback(b["query_id"], b["hits"][0]["id"], "helpful")


def test_apply_settings_and_metrics(engine: ServingEngine) -> None:
    assert len(engine.search("marker function returns the version")["hits"]) > 3
    engine.apply_settings(Settings.model_validate({"ranking": {"top_k": 3}, "cache": {"ttl_s": 5}}))
    a = engine.search("marker function returns the version")
    assert len(a["hits"]) == 3 and a["cache_hit"] is False
    assert engine.status()["cache"]["ttl_s"] == 5
    engine.observe_request("/search", 200, 0.004)
    engine.observe_request("/search", 422, 0.001)
    families = {f.name: f for f in text_string_to_metric_families(engine.metrics_text())}
    requests = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["ragloom_requests"].samples
        if s.name == "ragloom_requests_total"
    }
    assert requests == {("/search", "200"): 1.0, ("/search", "422"): 1.0}
    hits = {s.labels["cache"]: s.value for s in families["ragloom_cache_hits"].samples}
    assert set(hits) == {"result", "embedding"}
    assert families["ragloom_index_generation"].samples[0].value >= 1
    status = {s.labels["status"]: s.value for s in families["ragloom_bm25_status"].samples}
    assert status["ready"] == 1.0
    for name in (
        "ragloom_request_duration_seconds",
        "ragloom_cache_hit_rate",
        "ragloom_fallbacks",
        "ragloom_jobs",
        "ragloom_embedding_batches",
    ):
        assert name in families, name


def test_status_reports_the_engine(engine: ServingEngine) -> None:
    t0 = time.perf_counter()
    st = engine.status()
    assert time.perf_counter() - t0 < 5
    for key in ("chunks", "files", "model", "bm25_status", "generation", "cache", "jobs"):
        assert key in st
    assert st["embedding_cache"]["max_entries"] == 1000
    assert st["cache"]["ttl_s"] == 300.0 and st["cache"]["max_entries"] == 1000
    assert st["jobs"] == 0


def test_cli_answers_carry_a_query_id_for_feedback(repo: Path) -> None:
    """Through the real command group (in-process: a subprocess per command costs seconds)."""
    import json

    from click.testing import CliRunner

    from ragloom.cli import cli

    runner = CliRunner()
    at = ["--index-dir", str(repo / ".ragloom")]
    out = runner.invoke(
        cli, ["search", "helper adds the value", "--strategy", "sparse", "--json", *at]
    )
    assert out.exit_code == 0, out.output
    hits = json.loads(out.stdout)
    qid = hits[0]["query_id"]
    assert {h["query_id"] for h in hits} == {qid} and "generation" in hits[0]
    added = runner.invoke(
        cli,
        ["feedback", "add", qid, hits[0]["id"], "--rating", "helpful", "--comment", "yes", "--json", *at],
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["in_results"] is True
    stats = runner.invoke(cli, ["feedback", "stats", qid, "--json", *at])
    assert json.loads(stats.stdout)["helpful_count"] == 1
    # without an answer: the whole store's figures
    whole = json.loads(runner.invoke(cli, ["feedback", "stats", "--json", *at]).stdout)
    assert whole["answers"] >= 1 and whole["rated_answers"] == 1 and whole["total"] == 1
    assert whole["helpful_count"] == 1 and whole["avg_rating"] == 1.0
    line = runner.invoke(cli, ["feedback", "stats", *at]).output
    assert f"{whole['answers']} answers logged, 1 rated or used; 1 ratings, 1 helpful" in line
    ctx = runner.invoke(
        cli, ["context", "helper adds the value", "--strategy", "sparse", "--json", *at]
    )
    assert ctx.exit_code == 0, ctx.output
    assert len(json.loads(ctx.stdout)["query_id"]) == 32
    unknown = runner.invoke(cli, ["feedback", "stats", "f" * 32, *at])
    assert unknown.exit_code == 4 and "unknown query_id" in unknown.stderr


def test_open_without_an_index_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="ragloom index"):
        ServingEngine.open(tmp_path, Settings())


@pytest.mark.parametrize("damaged", [False, True])
def test_queries_keep_answering_through_a_rebuild(
    engine: ServingEngine, repo: Path, monkeypatch: pytest.MonkeyPatch, damaged: bool
) -> None:
    """A rebuild is a new generation: the engine's reader answers from the old one until it
    is published. A rebuild of a database it cannot read (``damaged``: taken as such here)
    deletes it and writes a new one: the old reader answers until the new file has
    published a generation, then a new reader (epoch) takes over. Either way no request
    fails or comes back empty."""
    if damaged:
        monkeypatch.setattr(ragloom.Index, "_rebuildable", lambda self: False)
    epoch = engine.status()["epoch"]
    stop = threading.Event()
    errors: list[BaseException] = []
    empty: list[dict[str, Any]] = []
    count = [0]

    def worker(i: int) -> None:
        while not stop.is_set():
            try:
                a = engine.search(QUERIES[i % len(QUERIES)], strategy="sparse", top_k=3)
            except BaseException as exc:
                errors.append(exc)
                return
            count[0] += 1
            if not a["hits"]:
                empty.append(a)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        ragloom.open(repo).index(rebuild=True, embed=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            count[0] <= 20 or (damaged and engine.status()["epoch"] == epoch)
        ):
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert not empty, empty[:2]
    assert count[0] > 20
    assert engine.status()["epoch"] == epoch + (1 if damaged else 0)


def test_a_query_embedder_of_another_model_is_refused_at_open(repo: Path) -> None:
    from ragloom.embed.base import HashingEmbedder
    from ragloom.errors import IncompatibleIndexError

    with pytest.raises(IncompatibleIndexError, match=r"embedding\.model"):
        ServingEngine.open(repo, Settings(), embedder=HashingEmbedder(64))


def test_a_hit_in_a_file_changed_since_indexing_is_marked_stale(
    engine: ServingEngine, repo: Path
) -> None:
    """The server's hits carry ``stale`` as ``ragloom search --json`` does, checked on every
    answer (a cached one too), with a note naming the files."""
    first = engine.search("helper adds the value", top_k=5)
    assert first["hits"] and not any(h["stale"] for h in first["hits"])
    path = first["hits"][0]["path"]
    (repo / path).write_text("# moved down\n\n" + (repo / path).read_text())
    again = engine.search("helper adds the value", top_k=5)
    assert again["cache_hit"] is True
    assert {h["path"]: h["stale"] for h in again["hits"]}[path] is True
    assert any("changed since indexing" in n for n in again["notes"])
