"""The learned stage, its features and its switches: features are computed per candidate with
file aggregates, the stage re-orders the head by the model's score keeping the scores' scale,
explain names the features that moved a hit, and +learned / +handset turn it on and off."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragloom
import ragloom.retrieve.stages.learned as learned_mod
from ragloom.embed.base import HashingEmbedder
from ragloom.errors import ConfigError
from ragloom.retrieve.history import CoChange, HistoryEvidence
from ragloom.retrieve.ranker import RankerModel
from ragloom.retrieve.stages.features import (
    BASE_FEATURE_NAMES,
    BASE_FEATURES_VERSION,
    FEATURE_NAMES,
    FEATURES_VERSION,
    TapStage,
    candidate_features,
    file_first_rows,
    tapped,
)
from ragloom.retrieve.stages.learned import (
    LEARNED_DEFAULT,
    LearnedStage,
    default_model,
    keep_file_order,
    keep_shape,
    keep_slots,
)
from ragloom.retrieve.stages.pipeline import build_stages, parse_search_spec
from tests.unit.stage_fixtures import FakeSource, FakeStore, row, state

ROWS = [row(1, "pkg/router.py"), row(2, "pkg/router.py"), row(3, "tests/test_app.py"),
        row(4, "docs/guide.md", kind="section")]  # fmt: skip
RANKED = [(3, 0.9), (1, 0.8), (4, 0.5), (2, 0.4)]
COL = {n: i for i, n in enumerate(FEATURE_NAMES)}


def _linear(weights: dict[str, float]) -> RankerModel:
    w = np.array([weights.get(n, 0.0) for n in FEATURE_NAMES])
    n = len(FEATURE_NAMES)
    return RankerModel.linear(FEATURES_VERSION, FEATURE_NAMES, {}, w, np.zeros(n), np.ones(n))


def _state(**kw: object):  # type: ignore[no-untyped-def]
    st = state(list(RANKED), ROWS, query="router matches the wrong route", **kw)
    st.modalities = {"bm25": [(1, 7.0), (3, 5.0)], "dense": [(3, 0.61), (2, 0.55), (4, 0.3)]}
    st.notes = {3: {"prior": 0.5}}
    return st


def test_features_of_each_candidate_and_its_file() -> None:
    rowids, x = candidate_features(_state())
    assert rowids == [3, 1, 4, 2]
    assert x.shape == (4, len(FEATURE_NAMES)) and x.dtype == np.float32
    r1 = x[1]  # pkg/router.py, rank 2: BM25's best, not in dense
    assert r1[COL["in_bm25"]] == 1 and r1[COL["bm25_ratio"]] == 1.0
    assert r1[COL["in_dense"]] == 0 and r1[COL["dense_gap"]] == 1.0
    assert r1[COL["role_implementation"]] == 1 and r1[COL["path_stem_in_query"]] == 1
    assert r1[COL["file_log_chunks"]] == pytest.approx(np.log1p(2))  # two router.py chunks
    assert r1[COL["file_first_chunk"]] == 1 and x[3][COL["file_first_chunk"]] == 0
    assert x[3][COL["file_log_best_rank"]] == pytest.approx(np.log1p(2))  # its file's best
    assert x[0][COL["role_test"]] == 1 and x[0][COL["note_prior"]] == pytest.approx(0.5)
    assert x[0][COL["dense_score"]] == pytest.approx(0.61) and x[0][COL["dense_gap"]] == 0.0
    assert (x[:, COL["query_issue"]] == 0).all()


def test_first_only_gives_each_files_first_row_and_zeros() -> None:
    """What a model of files scores: each file's first candidate's row as the full matrix has
    it, the other candidates' rows zeros (so :func:`file_first_rows` leaves them out)."""
    rowids, full = candidate_features(_state())
    same, firsts = candidate_features(_state(), first_only=True)
    assert same == rowids and firsts.shape == full.shape
    keep = file_first_rows(full)
    assert keep.tolist() == file_first_rows(firsts).tolist() == [0, 1, 2]
    assert np.array_equal(firsts[keep], full[keep])
    assert not firsts[3].any()


def test_history_features_per_file() -> None:
    """The history's rankings, kept apart per file; read by the features when no history
    stage ran before them, and only when the strategy has a history step."""
    ev = HistoryEvidence(
        similar={"pkg/router.py": 1, "tests/test_app.py": 2},
        churn={"tests/test_app.py": 1, "pkg/router.py": 3},
        recent={"pkg/router.py": 1},
        similar_share={"pkg/router.py": 1.0, "tests/test_app.py": 0.25},
    )
    table = CoChange({"pkg/router.py": 4, "tests/test_app.py": 2, "docs/guide.md": 2},
                     {"tests/test_app.py": {"pkg/router.py": 2}})  # fmt: skip
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}), evidence=(ev, table))
    _, x = candidate_features(_state(source=src, steps=frozenset({"history"})))
    router, test, guide = x[1], x[0], x[2]
    assert (x[:, COL["hist_known"]] == 1).all()
    assert router[COL["hist_similar"]] == pytest.approx(1 / 11)
    assert router[COL["hist_churn"]] == pytest.approx(1 / 13)
    assert router[COL["hist_recent"]] == pytest.approx(1 / 11)
    assert router[COL["hist_similar_share"]] == 1.0
    assert test[COL["hist_similar_share"]] == 0.25 and test[COL["hist_recent"]] == 0
    # router.py changed with test_app.py, the best file: it ranks first by co-change
    assert router[COL["hist_co_change"]] == pytest.approx(1 / 11)
    assert guide[COL["hist_similar"]] == 0 and guide[COL["hist_co_change"]] == 0
    assert x[3][COL["hist_similar"]] == router[COL["hist_similar"]]  # same file
    # no history step in the strategy: no history read, every column 0
    _, off = candidate_features(_state(source=src))
    assert (off[:, COL["hist_known"] : COL["hist_co_change"] + 1] == 0).all()


def test_whole_file_bm25_features_per_file() -> None:
    """Each file's whole-file BM25 score over the best candidate file's, its rank among the
    candidate files by that score (ties keep the candidates' order), and log1p of it."""
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}),
                     file_scores={"pkg/router.py": 4.0, "docs/guide.md": 1.0})  # fmt: skip
    _, x = candidate_features(_state(source=src))
    ratio, rank, log = (COL[f"file_bm25_{c}"] for c in ("ratio", "log_rank", "log"))
    router, test, guide = x[1], x[0], x[2]
    assert router[ratio] == 1.0 and guide[ratio] == pytest.approx(0.25) and test[ratio] == 0
    assert router[rank] == pytest.approx(np.log1p(1)) and guide[rank] == pytest.approx(np.log1p(2))
    assert test[rank] == pytest.approx(np.log1p(3))  # no score: after the files with one
    assert router[log] == pytest.approx(np.log1p(4.0)) and x[3][log] == router[log]
    # no file scores at all: zeros, the candidates' order
    _, none = candidate_features(_state())
    assert (none[:, ratio] == 0).all() and none[0][rank] == pytest.approx(np.log1p(1))


def test_without_a_whole_file_bm25_the_base_model_ranks(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index made before the file BM25 existed (or a PostgreSQL repository): the model would
    read made-up zeros, so the model that does not read those columns ranks instead (the one
    shipped before them), on the first columns of the same rows, and says so once."""
    monkeypatch.setattr(learned_mod, "_warned", threading.Event())
    base = learned_mod.default_model(
        learned_mod.BASE_MODEL, BASE_FEATURES_VERSION, BASE_FEATURE_NAMES
    )
    assert base.digest == "5a82a48d15f7" and base.names == FEATURE_NAMES[: len(base.names)]
    src = FakeSource(FakeStore({r.rowid: r for r in ROWS}), file_scores=None)
    st = _state(source=src)
    with caplog.at_level("WARNING", logger="ragloom.retrieve"):
        LearnedStage(_linear({"role_implementation": 1.0, "role_test": -1.0})).apply(st)
        LearnedStage(_linear({"role_implementation": 1.0})).apply(_state(source=src))
    assert caplog.text.count("no BM25 over whole files") == 1
    _, x = candidate_features(_state(source=src), first_only=True)
    expected = base.predict(x[[0, 1, 2]][:, : len(base.names)])
    assert st.notes[3]["learned"] == pytest.approx(float(expected[0]), abs=1e-6)
    assert st.notes[4]["learned"] == pytest.approx(float(expected[2]), abs=1e-6)
    # with file scores the given model ranks (the linear one puts the implementation first)
    with_files = _state()
    LearnedStage(_linear({"role_implementation": 1.0, "role_test": -1.0})).apply(with_files)
    assert with_files.ranked[0][0] == 1


def test_no_candidates_no_rows() -> None:
    rowids, x = candidate_features(state([], ROWS))
    assert rowids == [] and x.shape == (0, len(FEATURE_NAMES))


def test_stage_reorders_the_head_and_keeps_the_scores_scale() -> None:
    st = _state(explain=True)
    LearnedStage(_linear({"role_implementation": 1.0, "role_test": -1.0})).apply(st)
    # the files in the model's order (implementation, docs, test), laid out in the hand-set
    # shape (one chunk of each file, then a second chunk of the second file, which docs lacks)
    assert [r for r, _ in st.ranked] == [1, 4, 3, 2]
    assert [s for _, s in st.ranked] == [0.9, 0.8, 0.5, 0.4]  # the places' scores, best first
    assert st.notes[1]["learned"] == pytest.approx(1.0)
    shares = st.notes[3]["learned_features"]
    assert next(iter(shares)) == "role_test" and shares["role_test"] == pytest.approx(-1.0)


def test_tap_sees_what_the_stage_sees() -> None:
    seen: list[tuple[list[int], np.ndarray]] = []
    st = _state()
    TapStage(lambda s, r, x: seen.append((r, x))).apply(st)
    rowids, x = candidate_features(_state())
    assert seen[0][0] == rowids and np.array_equal(seen[0][1], x)
    assert st.ranked == RANKED  # the tap changes nothing


def test_switches() -> None:
    assert parse_search_spec("hybrid+learned").runs_learned()
    assert not parse_search_spec("hybrid+handset").runs_learned()
    assert parse_search_spec("hybrid").runs_learned() is (LEARNED_DEFAULT != "off")
    assert parse_search_spec("hybrid").learned_questions() == LEARNED_DEFAULT == "all"
    assert parse_search_spec("hybrid+learned").learned_questions() == "all"
    assert not parse_search_spec("sparse+learned").runs_learned()  # hybrid only
    assert not parse_search_spec("hybrid+seed+learned").runs_learned()  # tuned only
    with pytest.raises(ConfigError, match=r"\+learned, \+handset"):
        parse_search_spec("hybrid+learnt")
    spec = parse_search_spec("hybrid+handset")
    names = [s.name for s in build_stages(spec, spec.strategy)]
    assert "learned" not in names and "tap" not in names
    with tapped(lambda s, r, x: None):
        names = [s.name for s in build_stages(spec, spec.strategy)]
    assert names.index("tap") == names.index("exact") + 1


def test_the_shipped_model_loads_and_matches_the_features() -> None:
    model = default_model()
    assert model.features == FEATURES_VERSION and model.names == FEATURE_NAMES
    assert model.meta.get("repositories", 0) >= 30
    spec = parse_search_spec("hybrid+learned")
    names = [s.name for s in build_stages(spec, spec.strategy)]
    assert names.index("learned") == names.index("exact") + 1


def test_a_search_with_the_learned_stage_explains_it(tmp_path: Path) -> None:
    for name, body in {
        "router.py": "def match_route(path, routes):\n    return [r for r in routes if r == path]\n",
        "cookies.py": "def parse_cookie(header):\n    return dict(p.split('=') for p in header)\n",
        "tests/test_router.py": "def test_match_route():\n    assert match_route('/', ['/'])\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    index = ragloom.open(tmp_path, embedder=HashingEmbedder(64))
    try:
        index.index(history=False)
        ask = "Fix route matching for a trailing slash"  # a change request: the stage applies
        learned = index.search(ask, top_k=5, strategy="hybrid+learned", explain=True)
        handset = index.search(ask, top_k=5, strategy="hybrid+handset")
        lookup = index.search("where are routes matched", top_k=5, strategy="hybrid+learned",
                              explain=True)  # fmt: skip
    finally:
        index.close()
    assert {h.id for h in learned.hits} == {h.id for h in handset.hits}
    assert all("learned" in h.explain and "learned_features" in h.explain for h in learned.hits)
    assert any(s["stage"] == "learned" for h in learned.hits for s in h.stages) or [
        h.id for h in learned.hits
    ] == [h.id for h in handset.hits]
    # a look-up is re-ordered too (LEARNED_QUESTIONS = "all")
    assert all("learned" in h.explain for h in lookup.hits)


def test_the_stage_applies_to_every_question_or_to_issues_and_change_requests() -> None:
    assert LearnedStage(_linear({})).applies(state([], ROWS, query="where are routes matched"))
    stage = LearnedStage(_linear({}), "changes")
    assert stage.applies(state([], ROWS, query="Fix the router for trailing slashes"))
    assert not stage.applies(state([], ROWS, query="where are routes matched"))


def test_the_default_re_orders_issues_only() -> None:
    stage = LearnedStage(_linear({}), "issues")
    assert not stage.applies(state([], ROWS, query="Fix the router for trailing slashes"))
    assert not LearnedStage(_linear({}), "off").applies(state([], ROWS, query="anything"))
    assert LearnedStage(_linear({}), "all").applies(state([], ROWS, query="where is it"))
    with pytest.raises(ValueError, match="questions"):
        LearnedStage(_linear({}), "sometimes")


def test_a_file_keeps_its_own_chunk_order() -> None:
    # the model puts b's chunk first and a's second chunk before its first one: a keeps the
    # places the model gave its chunks, filled in the hand-set order
    assert keep_file_order([2, 1, 0, 3], ["a", "b", "a", "c"]) == [0, 1, 2, 3]
    assert keep_file_order([1, 0], ["a", "b"]) == [1, 0]
    assert keep_file_order([], []) == []


def test_the_model_orders_files_in_the_hand_set_shape() -> None:
    # hand-set: a a b c; the model prefers c, then b, then a: c takes a's first slot, b keeps
    # its slot, a takes c's; a's second chunk (no slot left for it) follows
    assert keep_shape([3, 2, 0, 1], ["a", "a", "b", "c"]) == [3, 2, 0, 1]
    # the model agrees on the files: the hand-set order stays, whatever it did to the chunks
    assert keep_shape([2, 0, 1, 3], ["a", "b", "a", "c"]) == [0, 1, 2, 3]
    assert keep_shape([], []) == []


def test_slots_move_files_and_leave_their_other_chunks_in_place() -> None:
    # hand-set: a a b c a d c; the model prefers c, b, a, d. c and b take the first two file
    # slots (0 and 2), a the third (3): its second and third chunks follow it. c's second chunk
    # (6) and d (5) stay where they were. keep_shape would pull c's second chunk up to 1.
    files = ["a", "a", "b", "c", "a", "d", "c"]
    order = [3, 6, 2, 0, 1, 4, 5]
    assert keep_slots(order, files) == [3, 2, 0, 1, 4, 5, 6]
    assert keep_shape(order, files) == [3, 6, 2, 0, 5, 1, 4]
    assert keep_slots([2, 0, 1, 3], ["a", "b", "a", "c"]) == [0, 1, 2, 3]
    assert keep_slots([], []) == []


def _laid_out(
    keep: Callable[[list[int], list[str]], list[int]], files: list[str], rnd: Any
) -> tuple[list[int], list[int]]:
    """A random model order of ``files``' candidates and ``keep``'s layout of it, checked to
    hold every candidate once and the files in the model's order."""
    order = list(range(len(files)))
    rnd.shuffle(order)
    out = keep(order, files)
    assert sorted(out) == list(range(len(files)))
    assert list(dict.fromkeys(files[i] for i in out)) == list(
        dict.fromkeys(files[i] for i in order)
    )
    return order, out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from("abcde"), min_size=1, max_size=14), st.randoms())
def test_slots_keep_the_model_file_order_and_move_no_chunk_up_but_a_files_first(
    files: list[str], rnd: Any
) -> None:
    order, out = _laid_out(keep_slots, files, rnd)
    firsts = {files.index(f) for f in set(files)}
    rank = {f: k for k, f in enumerate(dict.fromkeys(files[i] for i in order))}
    place = {i: p for p, i in enumerate(out)}
    others = [i for i in range(len(files)) if i not in firsts]
    for i in others:
        for j in others:
            if i < j and rank[files[i]] <= rank[files[j]]:
                # no candidate but a file's first passes one it followed, unless the model
                # put its file first
                assert place[i] < place[j]
    for f in set(files):
        own = [i for i in out if files[i] == f]
        assert own == sorted(own)  # each file's candidates keep the hand-set order


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("abcde"), min_size=1, max_size=12), st.randoms())
def test_shape_keeps_the_model_file_order_and_every_candidate(files: list[str], rnd: Any) -> None:
    _order, out = _laid_out(keep_shape, files, rnd)
    by_file = [i for i in out if files[i] == files[out[0]]]
    assert by_file == sorted(by_file)  # a file's own candidates keep the hand-set order
