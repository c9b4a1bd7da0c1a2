"""The per-repository correction of the learned ranking model: the fit moves the ranking
towards the labelled pairs, stays within its length cap, fits nothing below the minimum, is
deterministic, and a model fitted over another global model is refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.learn.adapt import feedback_cap, fit_adapted
from ragloom.retrieve.adapt import (
    FEEDBACK_MAX_NORM,
    MIN_EXAMPLES,
    MIN_FEEDBACK,
    PAIR_WEIGHTINGS,
    AdaptedModel,
    Example,
    adapted_from_dict,
    describe,
    example_losses,
    fit_aged_correction,
    fit_correction,
    fit_rows,
    pairwise_mrr,
    trimmed,
)
from ragloom.retrieve.ranker import RankerModel, RankerModelError

NAMES = ("a", "b", "c")


def _base(weight: tuple[float, ...] = (1.0, 0.0, 0.0)) -> RankerModel:
    n = len(NAMES)
    return RankerModel.linear("f-test", NAMES, {}, np.array(weight), np.zeros(n), np.ones(n))


def _examples(n: int, seed: int = 0, good: int = 1) -> list[Example]:
    """Groups where feature ``good`` marks the right answer and feature 0 (what the base model
    ranks by) is noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = rng.normal(size=(10, 3))
        labels = np.zeros(10, dtype=int)
        labels[3] = 1
        x[3, good] += 3.0
        out.append(Example(x, labels, 1.0, f"q{i}"))
    return out


def test_the_correction_learns_what_the_base_misses() -> None:
    base = _base()
    ex = _examples(MIN_EXAMPLES + 10)
    model = fit_adapted(base, ex)
    assert model is not None
    assert model.history[1] > 0.1  # the feature that marks the answer gains weight
    assert not model.feedback.any()
    before = pairwise_mrr(ex, [base.predict(e.x) for e in ex])
    after = pairwise_mrr(ex, [model.predict(e.x) for e in ex])
    assert after > before


def test_nothing_is_fitted_below_the_minimum() -> None:
    assert fit_adapted(_base(), _examples(MIN_EXAMPLES - 1)) is None
    model = fit_adapted(_base(), _examples(MIN_EXAMPLES), _examples(MIN_FEEDBACK - 1, seed=1))
    assert model is not None and not model.feedback.any()


@settings(max_examples=25, deadline=None)
@given(cap=st.floats(0.01, 3.0), l2=st.floats(0.0, 5.0), seed=st.integers(0, 50))
def test_the_correction_never_exceeds_its_cap(cap: float, l2: float, seed: int) -> None:
    ex = _examples(12, seed)
    scores = [np.zeros(10) for _ in ex]
    delta = fit_correction(ex, scores, np.zeros(3), np.ones(3), l2=l2, max_norm=cap, steps=50)
    assert np.linalg.norm(delta) <= cap + 1e-9


def test_feedback_is_bounded_and_labels_order_pairs() -> None:
    # rated not helpful (-1) below unrated (0) below helpful (1)
    x = np.eye(3)
    ex = [Example(x, np.array([1, 0, -1]))] * MIN_FEEDBACK
    model = fit_adapted(_base((0.0, 0.0, 0.0)), [], ex)
    assert model is not None
    assert np.linalg.norm(model.feedback) <= FEEDBACK_MAX_NORM + 1e-9
    s = model.predict(x)
    assert s[0] > s[1] > s[2]
    assert model.feedback_changes()[0][0] in ("a", "c")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 50), frozen=st.lists(st.integers(0, 2), max_size=3, unique=True))
def test_frozen_columns_stay_zero(seed: int, frozen: list[int]) -> None:
    """The history correction leaves the whole-file BM25 columns alone (HISTORY_FROZEN): a
    frozen column gets no weight, whatever the examples say of it."""
    ex = _examples(12, seed)
    scores = [np.zeros(10) for _ in ex]
    free = fit_correction(ex, scores, np.zeros(3), np.ones(3), l2=0.1, max_norm=1.0, steps=50)
    delta = fit_correction(
        ex, scores, np.zeros(3), np.ones(3), l2=0.1, max_norm=1.0, steps=50, frozen=frozen
    )
    assert not delta[frozen].any()
    if not frozen:
        assert np.array_equal(delta, free)


@settings(max_examples=25, deadline=None)
@given(
    cap=st.floats(0.01, 3.0),
    seed=st.integers(0, 50),
    pairs=st.sampled_from(PAIR_WEIGHTINGS),
    frozen=st.lists(st.integers(0, 2), max_size=2, unique=True),
)
def test_every_pair_weighting_is_capped_frozen_and_deterministic(
    cap: float, seed: int, pairs: str, frozen: list[int]
) -> None:
    ex = _examples(12, seed)
    scores = [np.random.default_rng(seed).normal(size=10) for _ in ex]
    kw = {"l2": 0.1, "max_norm": cap, "steps": 40, "pairs": pairs, "frozen": frozen}
    delta = fit_correction(ex, scores, np.zeros(3), np.ones(3), **kw)  # type: ignore[arg-type]
    again = fit_correction(ex, scores, np.zeros(3), np.ones(3), **kw)  # type: ignore[arg-type]
    assert np.linalg.norm(delta) <= cap + 1e-9
    assert not delta[frozen].any()
    assert np.array_equal(delta, again)


@settings(max_examples=20, deadline=None)
@given(
    cap=st.floats(0.01, 3.0),
    at=st.floats(0.0, 1.0),
    seed=st.integers(0, 50),
    frozen=st.lists(st.integers(0, 2), max_size=2, unique=True),
)
def test_the_aged_correction_is_capped_frozen_and_deterministic(
    cap: float, at: float, seed: int, frozen: list[int]
) -> None:
    ex = _examples(12, seed)
    scores = [np.zeros(10) for _ in ex]
    kw = {"at": at, "l2": 0.1, "max_norm": cap, "frozen": frozen}
    delta = fit_aged_correction(ex, scores, np.zeros(3), np.ones(3), **kw)  # type: ignore[arg-type]
    again = fit_aged_correction(ex, scores, np.zeros(3), np.ones(3), **kw)  # type: ignore[arg-type]
    assert len(delta) == 3
    assert np.linalg.norm(delta) <= cap + 1e-9
    assert not delta[frozen].any()
    assert np.array_equal(delta, again)


def test_the_aged_correction_follows_the_newest_questions() -> None:
    """The newer half of the history marks its answers by feature 2, the older half by feature
    1: taken at the newest age the correction weighs feature 2 above feature 1, taken at the
    oldest the other way round; the single correction sits between."""
    n = MIN_EXAMPLES + 20
    history = _examples(n // 2, seed=1, good=2) + _examples(n // 2, seed=2, good=1)  # newest first
    single = fit_adapted(_base(), history)
    newest = fit_adapted(_base(), history, history_age=0.0)
    oldest = fit_adapted(_base(), history, history_age=1.0)
    assert single is not None and newest is not None and oldest is not None
    assert newest.history[2] > newest.history[1]
    assert oldest.history[1] > oldest.history[2]
    gap = [m.history[2] - m.history[1] for m in (newest, single, oldest)]
    assert gap[0] > gap[1] > gap[2]
    assert fit_adapted(_base(), history, history_age=None).digest == single.digest
    # ages from the tree's log: the same order here, so the same correction as by rank when
    # the commits are evenly spaced, and another when they are not
    even = [dataclasses.replace(e, since=3 * i) for i, e in enumerate(history)]
    assert np.allclose(fit_adapted(_base(), even, history_age=0.0).history, newest.history)
    by_rank = fit_adapted(_base(), even, history_age=0.0, history_ages="rank")
    assert by_rank is not None and np.allclose(by_rank.history, newest.history)
    bunched = [dataclasses.replace(e, since=i + (100 if i >= n // 2 else 0))
               for i, e in enumerate(history)]  # fmt: skip
    far = fit_adapted(_base(), bunched, history_age=0.0)
    assert far is not None and not np.allclose(far.history, newest.history)


def test_losses_say_how_strongly_a_ranking_disagrees_and_trimming_drops_the_worst() -> None:
    ex = _examples(10, seed=3)
    agree = [e.x[:, 1] * 5.0 for e in ex]  # feature 1 marks the answer: ranked first
    losses = example_losses(ex, agree)
    assert (losses < 0.25).all()
    flipped = [*agree[:7], *(-a for a in agree[7:])]  # the last three ranked against
    losses = example_losses(ex, flipped)
    assert losses[7:].min() > losses[:7].max()
    kept, scores = trimmed(ex, flipped, 0.3)
    assert [e.id for e in kept] == [e.id for e in ex[:7]] and len(scores) == 7
    assert trimmed(ex, flipped, 0.0)[0] == list(ex)
    assert trimmed(ex, flipped, 0.3)[0] == kept  # deterministic
    with pytest.raises(ValueError, match="set aside"):
        trimmed(ex, flipped, 1.0)
    with pytest.raises(ValueError, match="unknown ages"):
        fit_aged_correction(ex, flipped, np.zeros(3), np.ones(3), at=0.0, l2=1.0, max_norm=1.0,
                            ages="days")  # fmt: skip


def test_trimmed_feedback_sets_aside_ratings_against_the_history() -> None:
    """Feedback that says what the history says, and a few ratings that say the opposite: with
    the trim the adversarial ones are set aside, and the feedback correction is the one the
    legit ratings alone give."""
    history = _examples(MIN_EXAMPLES + 10, seed=4)
    legit = _examples(MIN_FEEDBACK + 6, seed=5)
    adversarial = []
    for e in _examples(10, seed=6):
        labels = np.zeros(10, dtype=int)
        labels[3], labels[7] = -1, 1  # the right answer rated not helpful, another helpful
        adversarial.append(Example(e.x, labels, 1.0, "adv-" + e.id))
    base = _base((0.0, 1.0, 0.0))  # ranks by the feature that marks the answer
    alone = fit_adapted(base, history, legit)
    both = fit_adapted(base, history, [*legit, *adversarial])
    kept = fit_adapted(base, history, [*legit, *adversarial], feedback_trim=10 / 36)
    assert alone is not None and both is not None and kept is not None
    assert not np.allclose(both.feedback, alone.feedback)
    assert np.allclose(kept.feedback, alone.feedback)
    assert fit_adapted(base, history, legit, feedback_trim=0.0).digest == alone.digest


def test_rank_weighted_pairs_ignore_what_cannot_move_a_reciprocal_rank_at_10() -> None:
    """``static``: a pair weighs what swapping it would move 1/rank (ranks past 10 worth 0), so
    a right answer already first and far ahead, or two candidates both past 10, teach nothing;
    ``all`` learns from every pair alike."""
    n = 30
    # candidate i is ranked i + 1 by the base scores; feature 1 marks the right answer (rank 25),
    # feature 2 marks ranks 21-30 (the answer among them). Against the top ten, both features
    # tell the answer apart alike; against ranks 21-30 only feature 1 does, and those pairs
    # count under ``all`` alone
    x = np.zeros((n, 3))
    x[24, 1] = 1.0
    x[20:, 2] = 1.0
    labels = np.zeros(n, dtype=int)
    labels[24] = 1
    ex = [Example(x, labels)]
    scores = [np.linspace(1.0, 0.0, n)]
    mean, scale = np.zeros(3), np.ones(3)
    kw = {"l2": 1.0, "max_norm": 10.0, "steps": 200}
    every = fit_correction(ex, scores, mean, scale, pairs="all", **kw)  # type: ignore[arg-type]
    top = fit_correction(ex, scores, mean, scale, pairs="static", **kw)  # type: ignore[arg-type]
    assert every[2] > 1e-6 and top[2] > 1e-6
    assert top[2] / top[1] == pytest.approx(1.0)
    assert every[2] / every[1] < 1.0
    with pytest.raises(ValueError, match="pair weighting"):
        fit_correction(ex, scores, mean, scale, pairs="nope", **kw)  # type: ignore[arg-type]


def test_lambda_pairs_lift_a_right_answer_into_the_top() -> None:
    base = _base()
    ex = _examples(MIN_EXAMPLES + 10)
    model = fit_adapted(base, ex, history_pairs="lambda")
    assert model is not None and model.history[1] > 0.1
    after = pairwise_mrr(ex, [model.predict(e.x) for e in ex])
    assert after > pairwise_mrr(ex, [base.predict(e.x) for e in ex])


def test_the_feedback_step_grows_with_the_rated_answers() -> None:
    """``feedback_full``: below it the feedback's cap shrinks in proportion; 0 keeps it."""
    assert feedback_cap(0.1, 50, 0) == 0.1
    assert feedback_cap(0.1, 50, 200) == pytest.approx(0.025)
    assert feedback_cap(0.1, 400, 200) == 0.1
    x = np.eye(3)
    ex = [Example(x, np.array([1, 0, -1]))] * MIN_FEEDBACK
    whole = fit_adapted(_base((0.0, 0.0, 0.0)), [], ex, feedback_full=0)
    part = fit_adapted(_base((0.0, 0.0, 0.0)), [], ex, feedback_full=4 * MIN_FEEDBACK)
    assert whole is not None and part is not None
    assert np.linalg.norm(part.feedback) <= FEEDBACK_MAX_NORM / 4 + 1e-9
    assert np.linalg.norm(part.feedback) < np.linalg.norm(whole.feedback)


def test_no_pairs_no_correction() -> None:
    ex = [Example(np.ones((4, 3)), np.zeros(4, dtype=int))]
    d = fit_correction(ex, [np.zeros(4)], np.zeros(3), np.ones(3), l2=1.0, max_norm=1.0)
    assert not d.any()


def test_same_examples_same_bytes_and_a_reload_keeps_the_digest() -> None:
    base = _base()
    a = fit_adapted(base, _examples(30), meta={"examples": 30})
    b = fit_adapted(base, _examples(30), meta={"examples": 30})
    assert a is not None and b is not None
    assert a.to_json() == b.to_json()
    again = adapted_from_dict(json.loads(a.to_json()), base)
    assert again.digest == a.digest
    np.testing.assert_allclose(again.predict(np.eye(3)), a.predict(np.eye(3)))
    assert describe(again)["model"] == "repository" and describe(None) == {"model": "global"}


def test_a_model_over_another_global_model_is_refused() -> None:
    model = fit_adapted(_base(), _examples(30))
    assert model is not None
    with pytest.raises(RankerModelError, match="ragloom adapt"):
        adapted_from_dict(json.loads(model.to_json()), _base((0.5, 0.0, 0.0)))
    data = json.loads(model.to_json())
    data["history"] = data["history"][:2]
    with pytest.raises(RankerModelError, match="damaged"):
        adapted_from_dict(data, _base())


def test_contributions_sum_to_the_score_change() -> None:
    model = fit_adapted(_base(), _examples(30))
    assert isinstance(model, AdaptedModel)
    x = np.random.default_rng(3).normal(size=(5, 3))
    np.testing.assert_allclose(model.contributions(x).sum(axis=1), model.predict(x), atol=1e-9)
    cleared = model.without_feedback()
    np.testing.assert_allclose(cleared.history, model.history)


def test_a_file_level_base_is_corrected_on_each_files_first_candidate() -> None:
    names = ("a", "file_first_chunk")
    w, n = np.array([1.0, 0.0]), 2
    chunk = RankerModel.linear("f-test", names, {}, w, np.zeros(n), np.ones(n))
    files = RankerModel.linear("f-test", names, {"level": "file"}, w, np.zeros(n), np.ones(n))
    x = np.array([[0.5, 1.0], [0.2, 0.0], [0.9, 1.0], [0.1, 1.0]])
    ex = Example(x, np.array([0, 0, 1, 0]), 1.0, "q", ("a.py", "a.py", "b.py", "c.py"))
    assert fit_rows(chunk, [ex]) == [ex]
    (kept,) = fit_rows(files, [ex])
    assert kept.paths == ("a.py", "b.py", "c.py") and kept.labels.tolist() == [0, 1, 0]
    assert kept.x[:, 1].tolist() == [1.0, 1.0, 1.0] and kept.id == "q"


def test_ratings_below_the_minimum_change_nothing_not_even_the_standardisation() -> None:
    # a tree base: the correction works in the examples' own standardisation
    stump = ([[0, -1, -1]], [[0.0, 0.0, 0.0]], [[1, -1, -1]], [[2, -1, -1]], [[0.0, -1.0, 1.0]])
    base = RankerModel.trees("f-test", NAMES, {}, stump, 1)
    history = _examples(MIN_EXAMPLES + 5)
    few = [Example(e.x * 5.0 + 3.0, -e.labels, 1.0, e.id) for e in _examples(MIN_FEEDBACK - 1, 7)]
    alone = fit_adapted(base, history)
    with_few = fit_adapted(base, history, few)
    assert alone is not None and with_few is not None
    assert alone.digest == with_few.digest
    assert np.array_equal(alone.mean, with_few.mean) and np.array_equal(
        alone.history, with_few.history
    )


def test_the_summary_line_shows_the_held_out_check() -> None:
    from ragloom.cli.adapt import _validation_text

    text = _validation_text({"global": 0.8733, "1.0/1.0": 0.8553})
    assert text == ", on the newest (held out) 0.873 -> 0.855"
    assert _validation_text({}) == "" and _validation_text({"global": 0.5}) == ""


class _MemoryStore:
    """A :class:`~ragloom.retrieve.adapt.ModelStore` in memory that counts its stamp reads
    and can be made unreachable (a database that went away)."""

    where = "memory"

    def __init__(self, recheck_s: float) -> None:
        self.recheck_s = recheck_s
        self.text: str | None = None
        self.version = 0
        self.stamps = 0
        self.down = False

    def stamp(self) -> object | None:
        self.stamps += 1
        if self.down:
            raise OSError("the database went away")
        return self.version if self.text is not None else None

    def read(self) -> str | None:
        return self.text

    def write(self, model: AdaptedModel) -> None:
        self.text, self.version = model.to_json(), self.version + 1

    def remove(self) -> bool:
        had, self.text = self.text is not None, None
        return had


def _shipped_adaptation() -> AdaptedModel:
    from ragloom.retrieve.stages.learned import default_model

    base = default_model()
    rng = np.random.default_rng(0)
    examples = []
    for i in range(MIN_EXAMPLES):
        x = rng.normal(size=(8, len(base.names)))
        x[:, base.names.index("file_first_chunk")] = 1.0  # each row its file's first
        labels = np.zeros(8, dtype=int)
        labels[i % 8] = 1
        paths = tuple(f"f{j}.py" for j in range(8))
        examples.append(Example(x, labels, 1.0, f"q{i}", paths))
    model = fit_adapted(base, examples)
    assert model is not None
    return model


def test_a_ranker_asks_its_store_at_most_every_recheck_and_survives_it_going_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ragloom.retrieve.adapt import RepositoryRanker, load_stored
    from ragloom.retrieve.stages.learned import default_model

    model = _shipped_adaptation()
    slow = _MemoryStore(recheck_s=3600.0)
    ranker = RepositoryRanker(slow)
    assert ranker.current() is default_model() and slow.stamps == 1
    slow.write(model)
    for _ in range(5):  # within the recheck: the model it read, no more questions
        assert ranker.current() is default_model()
    assert slow.stamps == 1
    eager = _MemoryStore(recheck_s=0.0)
    ranker = RepositoryRanker(eager)
    eager.write(model)
    assert ranker.digest == model.digest and eager.stamps == 1
    loaded = load_stored(eager, default_model())
    assert loaded is not None and loaded.digest == model.digest
    eager.down = True  # the model in use goes on while the store cannot answer
    assert ranker.digest == model.digest and "cannot check" in caplog.text
    eager.down = False
    assert eager.remove() and ranker.current() is default_model()
