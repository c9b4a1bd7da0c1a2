"""The evaluation runner, the runs file and the reports, on a fake index."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragloom.errors import ConfigError, SearchError
from ragloom.eval.dataset import EvalQuery
from ragloom.eval.report import render_markdown, write_report
from ragloom.eval.runner import percentile, run_eval, write_runs
from ragloom.types import Hit

QUERIES = [
    EvalQuery("q1", "alpha", ("a.py",), ("A.f",)),
    EvalQuery("q2", "beta", ("b.py", "c.py")),
    EvalQuery("q3", "boom", ("a.py",)),
]


def _hit(path: str, symbol: str, line: int) -> Hit:
    return Hit(
        id=f"{path}:{symbol}",
        path=path,
        start_line=line,
        end_line=line + 5,
        kind="function",
        symbol=symbol,
        language="python",
        score=1.0 / line,
        ranks={"bm25": line},
    )


RESULTS: dict[str, list[Hit]] = {
    "alpha": [_hit("x.py", "X.g", 1), _hit("a.py", "A.f", 10), _hit("a.py", "A.h", 12)],
    "beta": [_hit("c.py", "c", 1), _hit("d.py", "d", 1), _hit("b.py", "b", 1)],
}


@dataclass
class Part:
    file_path: str


@dataclass
class Ctx:
    parts: list[Part] = field(default_factory=list)


class FakeIndex:
    def __init__(self, with_assembly: bool) -> None:
        self.with_assembly = with_assembly
        self.calls: list[tuple[str, str]] = []

    def search(self, query: str, *, top_k: int = 10, strategy: str = "hybrid") -> Any:
        if strategy == "nope":
            raise ConfigError("unknown strategy 'nope'")
        if query == "boom":
            raise SearchError("bm25 index not ready")
        self.calls.append((query, strategy))
        hits = RESULTS.get(query, [])
        if strategy == "dense":
            hits = list(reversed(hits))
        notes = ["no vectors available"] if strategy == "dense" else []
        return type("R", (), {"hits": hits[:top_k], "notes": notes})()

    def get_context(
        self, query: str, *, top_k: int = 15, budget: Any = 8000, strategy: str = "hybrid"
    ) -> Any:
        if not self.with_assembly:
            raise AttributeError("module 'ragloom.assemble' has no attribute 'assemble_context'")
        files = [h.path for h in RESULTS.get(query, [])][: 1 if budget < 4000 else 3]
        return Ctx([Part(f) for f in files])


def test_run_eval_scores_each_strategy() -> None:
    rep = run_eval(FakeIndex(True), QUERIES, ["sparse", "dense", "nope"], top_k=5)
    assert not rep.summaries["nope"].available
    assert any("nope" in n for n in rep.notes)
    sparse = rep.summaries["sparse"].metrics
    # q1: a.py at rank 2; q2: c.py rank 1 (b.py rank 3); q3: search error -> zeros
    assert sparse["recall@1"] == pytest.approx((0 + 0.5 + 0) / 3)
    assert sparse["recall@5"] == pytest.approx((1 + 1 + 0) / 3)
    assert sparse["mrr@10"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert sparse["sym_mrr@10"] == pytest.approx(0.5)  # only q1 has gold symbols
    assert "recall@10" not in sparse  # k above top_k is not reported
    assert sparse["coverage@2000"] == pytest.approx((0 + 0.5) / 2)  # q3 failed: not counted
    assert sparse["coverage@8000"] == pytest.approx((1 + 1) / 2)
    assert rep.summaries["sparse"].errors == 1
    # dense reverses the lists: a.py and b.py come first
    assert rep.summaries["dense"].metrics["mrr@10"] == pytest.approx((1 + 1 + 0) / 3)
    assert rep.assembly_available is True
    assert rep.notes.count("dense: no vectors available") == 1
    assert set(rep.summaries["sparse"].latency_ms) == {"p50", "p95", "mean", "max"}


def test_every_strategy_against_a_reference_question_by_question(tmp_path: Path) -> None:
    """The first available strategy is the reference (the hand-set order when it was run);
    the differences cover every query, a failed search scoring as in the means."""
    rep = run_eval(FakeIndex(True), QUERIES, ["nope", "sparse", "dense"], top_k=10)
    assert rep.paired["reference"] == "sparse" and set(rep.paired["metrics"]) == {"dense"}
    mrr = rep.paired["metrics"]["dense"]["mrr@10"]
    # q1: dense 1 against sparse 0.5; q2: 1 against 1; q3 failed in both: 0 against 0
    assert mrr["n"] == 3 and mrr["mean"] == pytest.approx(0.5 / 3, abs=1e-6)
    assert (mrr["better"], mrr["worse"]) == (1, 0) and mrr["low"] <= mrr["mean"] <= mrr["high"]
    dense = rep.summaries["dense"].metrics["mrr@10"]
    sparse = rep.summaries["sparse"].metrics["mrr@10"]
    assert dense is not None and sparse is not None
    assert mrr["mean"] == pytest.approx(dense - sparse, abs=1e-6)  # the means' difference
    assert rep.paired["metrics"]["dense"]["sym_mrr@10"]["n"] == 1  # only q1 has symbols
    assert rep.to_dict()["paired"] == rep.paired
    md = render_markdown(rep)
    assert "Against `sparse`, question by question" in md
    assert "| dense | +0.1667 [" in md
    page = write_report(rep, tmp_path / "report").html.read_text()
    assert "<h2>Against sparse, question by question</h2>" in page and "+0.1667 [" in page
    handset = run_eval(FakeIndex(True), QUERIES, ["sparse", "hybrid+handset"], top_k=10)
    assert handset.paired["reference"] == "hybrid+handset"
    alone = run_eval(FakeIndex(True), QUERIES, ["sparse", "nope"], top_k=10)
    assert alone.paired == {} and "question by question" not in render_markdown(alone)


def test_missing_assembly_is_reported_not_fatal() -> None:
    rep = run_eval(FakeIndex(False), QUERIES[:2], ["sparse"], top_k=20)
    assert rep.assembly_available is False
    assert rep.summaries["sparse"].metrics["coverage@4000"] is None
    assert any("assembly" in n for n in rep.notes)
    assert "coverage@4000" not in rep.metric_names()


def test_runs_file_has_one_line_per_query_and_strategy(tmp_path: Path) -> None:
    rep = run_eval(FakeIndex(True), QUERIES, ["sparse", "dense"], top_k=3, assembly_budgets=())
    n = write_runs(rep, tmp_path / "runs.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert n == len(lines) == 6
    first = lines[0]
    assert first["id"] == "q1" and first["strategy"] == "sparse"
    assert first["files"] == ["x.py", "a.py"]
    assert first["hits"][1] == {
        "id": "a.py:A.f",
        "path": "a.py",
        "start_line": 10,
        "end_line": 15,
        "symbol": "A.f",
        "score": 0.1,
        "ranks": {"bm25": 10},
    }
    assert lines[2]["error"] == "bm25 index not ready"


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        run_eval(FakeIndex(True), QUERIES, ["sparse"], top_k=0)
    with pytest.raises(ConfigError):
        run_eval(FakeIndex(True), QUERIES, [])


def test_percentile_nearest_rank() -> None:
    sample = [float(i) for i in range(1, 21)]
    assert percentile(sample, 50) == 10.0
    assert percentile(sample, 95) == 19.0
    assert percentile(sample, 100) == 20.0
    assert percentile([3.0], 95) == 3.0


def test_report_with_and_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = run_eval(FakeIndex(True), QUERIES, ["sparse", "dense", "nope"], top_k=5)
    md = render_markdown(rep)
    assert "| metric | sparse | dense | nope |" in md
    assert "| recall@5 | 0.667 | 0.667 | unavailable |" in md
    pytest.importorskip("matplotlib")
    files = write_report(rep, tmp_path / "with")
    assert [p.name for p in files.charts] == ["metrics.png", "recall_at_k.png", "latency.png"]
    assert all(p.stat().st_size > 1000 for p in files.charts)
    page = files.html.read_text()
    assert '<img src="metrics.png"' in page
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    bare = write_report(rep, tmp_path / "without")
    assert bare.charts == [] and bare.markdown.exists()
    assert "Charts need matplotlib" in bare.html.read_text()


def test_eval_data_cli(tmp_path: Path) -> None:
    from ragloom.cli.eval import eval_data_cmd

    res = CliRunner().invoke(
        eval_data_cmd,
        ["--out", str(tmp_path), "--packages", "json", "--max-queries", "5", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["docstring_queries"] == 5
    assert (tmp_path / "corpus" / "json" / "decoder.py").is_file()
    bad = CliRunner().invoke(eval_data_cmd, ["--out", str(tmp_path), "--packages", "nosuchpkg"])
    assert bad.exit_code == 3
    assert "no package or module" in bad.output


def test_eval_cli_reports_bad_dataset(tmp_path: Path) -> None:
    from ragloom.cli.eval import eval_cmd

    (tmp_path / "d.jsonl").write_text('{"id": "x"}\n')
    res = CliRunner().invoke(eval_cmd, ["--dataset", str(tmp_path / "d.jsonl")])
    assert res.exit_code == 3
    assert "d.jsonl:1:" in res.output


def test_gold_files_the_index_lacks_and_a_short_top_k_are_noted() -> None:
    """A user trial: gold paths the index does not hold (a typo, a file since removed) gave
    MRR 0 with no word of why."""

    class Store:
        @staticmethod
        def files() -> dict[str, object]:
            return {"a.py": object(), "c.py": object()}

    index = FakeIndex(False)
    index.retriever = type("Rt", (), {"store": Store()})()  # type: ignore[attr-defined]
    rep = run_eval(index, QUERIES, ["sparse"], top_k=5, assembly_budgets=())
    (gold,) = [n for n in rep.notes if "not in the index" in n]
    assert gold.startswith("1 gold file of 1 question not in the index") and "b.py" in gold
    assert "--top-k 5: the @10 metrics see only 5 hits per question" in rep.notes
    rep = run_eval(FakeIndex(False), QUERIES, ["sparse"], top_k=10, assembly_budgets=())
    assert not any("not in the index" in n or "--top-k" in n for n in rep.notes)


def test_eval_cli_checks_its_output_paths_before_running(tmp_path: Path) -> None:
    from ragloom.cli.eval import eval_cmd, eval_data_cmd

    (tmp_path / "d.jsonl").write_text('{"id": "x", "query": "q", "gold_files": ["a.py"]}\n')
    res = CliRunner().invoke(
        eval_cmd,
        ["--dataset", str(tmp_path / "d.jsonl"), "--runs-out", str(tmp_path / "no" / "r.jsonl")],
    )
    assert res.exit_code == 3 and "does not exist" in res.output
    assert not (tmp_path / "no").exists()
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(
        eval_cmd, ["--dataset", str(tmp_path / "d.jsonl"), "--report", str(tmp_path / "file")]
    )
    assert res.exit_code == 2 and "is a file" in res.output
    bad = CliRunner().invoke(
        eval_data_cmd, ["--out", str(tmp_path / "out"), "--packages", "json,nosuchpkg"]
    )
    assert bad.exit_code == 3 and not (tmp_path / "out").exists()
