"""The paired bootstrap of two rankings' per-question scores, and the git evaluation's table of
every method against the hand-set order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.eval.stats import format_difference, paired_bootstrap, paired_by_id
from tests.unit.script_loader import load_script

scores = st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(scores, st.data())
def test_the_interval_holds_the_mean_and_is_seeded(a: list[float], data: st.DataObject) -> None:
    b = data.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=len(a), max_size=len(a)))
    d = paired_bootstrap(a, b, rounds=300)
    assert d.low <= d.mean <= d.high
    assert d.mean == pytest.approx(sum(x - y for x, y in zip(a, b, strict=True)) / len(a))
    assert d.better + d.worse <= d.n == len(a)
    assert paired_bootstrap(a, b, rounds=300) == d  # same seed, same interval
    # swapping the two sides mirrors everything
    m = paired_bootstrap(b, a, rounds=300)
    assert m.mean == pytest.approx(-d.mean) and (m.better, m.worse) == (d.worse, d.better)


def test_no_difference_no_width_and_a_clear_one_excludes_zero() -> None:
    same = paired_bootstrap([0.5, 1.0, 0.2], [0.5, 1.0, 0.2])
    assert (same.mean, same.low, same.high, same.better, same.worse) == (0.0, 0.0, 0.0, 0, 0)
    # 200 questions, the first method better on 150 by 0.5, equal on the rest
    a = [1.0] * 150 + [0.3] * 50
    b = [0.5] * 150 + [0.3] * 50
    d = paired_bootstrap(a, b)
    assert d.mean == pytest.approx(0.375) and 0.3 < d.low < d.mean < d.high < 0.45
    # one question better, 199 equal: the interval reaches zero
    lone = paired_bootstrap([1.0] + [0.0] * 199, [0.0] * 200)
    assert lone.low == 0.0 and lone.high > 0


def test_a_wider_level_gives_a_wider_interval_and_bad_input_is_refused() -> None:
    a = [float(i % 3) / 2 for i in range(90)]
    b = [float(i % 5) / 4 for i in range(90)]
    narrow, wide = paired_bootstrap(a, b, level=0.5), paired_bootstrap(a, b, level=0.99)
    assert wide.low <= narrow.low and wide.high >= narrow.high
    assert paired_bootstrap([], []).n == 0
    with pytest.raises(ValueError, match="same questions"):
        paired_bootstrap([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap([1.0], [0.0], level=1.0)
    with pytest.raises(ValueError, match="rounds"):
        paired_bootstrap([1.0], [0.0], rounds=0)


def test_the_git_evaluation_compares_every_method_with_the_hand_set_order() -> None:
    eg = load_script("eval_git")

    def row(repo: str, qid: str, method: str, mrr: float, split: str = "test") -> dict[str, object]:
        return {"repo": repo, "id": qid, "split": split, "method": method,
                "metrics": {"MRR@10": mrr, "R@10": 1.0 if mrr else 0.0}}  # fmt: skip

    rows = [
        row("a", "q1", "hybrid", 1.0), row("a", "q1", "hybrid+handset", 0.5),
        row("b", "q1", "hybrid", 0.5), row("b", "q1", "hybrid+handset", 0.5),
        row("b", "q2", "hybrid", 0.0), row("b", "q2", "hybrid+handset", 1.0),
        row("b", "q3", "hybrid", 1.0),  # the hand-set order has no answer: left out
        row("a", "q1", "bm25", 0.1), row("a", "q1", "hybrid", 1.0, "tune"),
    ]  # fmt: skip
    out = eg.paired(rows, ["bm25", "hybrid", "hybrid+handset"])
    assert set(out) == {"test"}  # the tune split has no hand-set order to compare with
    test = out["test"]
    assert test["reference"] == "hybrid+handset" and set(test) == {"reference", "bm25", "hybrid"}
    hyb = test["hybrid"]["MRR@10"]
    assert hyb["n"] == 3 and (hyb["better"], hyb["worse"]) == (1, 1)
    assert hyb["mean"] == pytest.approx((0.5 + 0.0 - 1.0) / 3, abs=1e-6)  # rounded to 6
    assert test["bm25"]["MRR@10"]["n"] == 1
    text = eg.paired_lines(out)
    assert "against hybrid+handset" in text and "| hybrid | 3 | -0.1667 [" in text
    # without the hand-set order the baseline is the reference; with neither, nothing
    assert eg.paired(rows, ["bm25", "hybrid"])["test"]["reference"] == "bm25"
    assert eg.paired(rows, ["hybrid"]) == {}


def test_the_swebench_report_pairs_each_default_with_its_hand_set_order() -> None:
    mod = load_script("eval_swebench")

    def row(qid: str, method: str, acc1: float, protocol: str = "papers") -> dict[str, object]:
        return {"id": qid, "method": method, "protocol": protocol,
                "metrics": {"file_acc@1": acc1, "file_mrr@10": acc1, "fn_acc@5": None}}  # fmt: skip

    rows = [row(f"q{i}", "hybrid", 1.0) for i in range(4)]
    rows += [row(f"q{i}", "hybrid+handset", 1.0 if i < 2 else 0.0) for i in range(4)]
    rows += [row("q0", "hybrid", 0.0, "product")]
    text = mod._paired_table(rows, "papers")
    assert "| hybrid - hybrid+handset | 4 | +50.0 [" in text
    assert "no-history" not in text  # that pair was not run
    assert mod._paired_table(rows, "product") == ""  # no reference on that protocol


def test_the_adaptation_evaluation_pairs_each_arm_with_the_one_before() -> None:
    mod = load_script("eval_adapt")
    scores = {
        "global": {"q1": 0.5, "q2": 1.0, "q3": 0.0},
        "auto": {"q1": 1.0, "q2": 1.0, "q3": 0.0},
        "feedback": {"q1": 1.0, "q2": 0.5},  # q3 not asked: left out of its pairs
    }
    out = mod._paired(scores)
    assert set(out) == {"auto - global", "feedback - auto", "feedback - global"}
    assert out["auto - global"]["mean"] == pytest.approx(0.5 / 3, abs=1e-6)
    assert out["feedback - auto"]["n"] == 2 and out["feedback - auto"]["worse"] == 1
    assert mod._paired({"global": {"q1": 1.0}}) == {}


def test_the_production_protocol_scores_mined_questions_and_its_bed_reads_no_test_one(
    tmp_path: Path,
) -> None:
    """``eval_adapt.py --scored mined``: the mined test questions, oldest first; the bed
    (``--mined-split train``) the newest train questions, as many as the test ones; each scored
    by the files of its stored rows in the model's order."""
    import json

    from ragloom.retrieve.stages.features import FEATURES_VERSION

    mod = load_script("eval_adapt")
    groups, questions = [], []
    for i, split in enumerate(["train"] * 5 + ["test"] * 2):
        gid = f"o/r@{i}"
        groups.append({"id": gid, "repo": "o/r", "split": split, "kind": "commit",
                       "language": "py", "query": f"q{i}", "gold_files": ["b.py"],
                       "paths": ["a.py", "a.py", "b.py"], "labels": [0, 0, 1],
                       "x": [[1.0], [0.5], [0.0]], "features": FEATURES_VERSION})  # fmt: skip
        questions.append({"id": gid, "timestamp": 100 + (7 - i)})  # newer first in the file
    (tmp_path / "groups-o+r.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))
    (tmp_path / "questions-o+r.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    test = mod._mined_groups(tmp_path, "r")
    assert [g["id"] for g in test] == ["o/r@6", "o/r@5"]  # oldest first
    bed = mod._mined_groups(tmp_path, "r", "train")
    assert [g["id"] for g in bed] == ["o/r@1", "o/r@0"]  # the two newest train questions
    assert all(g["split"] == "train" for g in bed)

    class ByFirstColumn:
        def __init__(self, sign: float) -> None:
            self.sign = sign

        def predict(self, x: np.ndarray) -> np.ndarray:
            return self.sign * x[:, 0]

    # a.py's rows first: b.py is the second file (1/2); reversed, it is first
    assert mod._scored(test, ByFirstColumn(1.0), "p/") == {"p/o/r@6": 0.5, "p/o/r@5": 0.5}
    assert set(mod._scored(test, ByFirstColumn(-1.0), "").values()) == {1.0}
    with pytest.raises(SystemExit, match="one mined groups file"):
        mod._mined_groups(tmp_path, "missing")


def test_a_difference_is_written_with_its_interval() -> None:
    d = paired_bootstrap([1.0, 0.5, 0.0], [0.5, 0.5, 0.5], rounds=200).as_dict()
    text = format_difference(d)
    assert text.startswith("+0.0000 [") and text.count("[") == 1 and text.endswith("]")
    assert format_difference({"mean": 0.084, "low": 0.024, "high": 0.145}, scale=100,
                             digits=1) == "+8.4 [+2.4, +14.5]"  # fmt: skip
    assert "\n[" in format_difference(d, sep="\n")


def test_scores_are_paired_by_question_id_and_a_missing_value_is_left_out() -> None:
    a = {"q1": 1.0, "q2": None, "q3": 0.5, "q4": 1.0}
    b = {"q1": 0.5, "q2": 1.0, "q3": 0.5}
    d = paired_by_id(a, b)
    assert d is not None and d.n == 2 and d.mean == pytest.approx(0.25)
    assert paired_by_id({"q1": None}, b) is None
