"""scripts/train_ranker.py: the shipped model's command (``--level file --write trees --fit-on
all``) is reproducible and fits what it says it fits."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import ModuleType

import pytest

from ragloom.retrieve.ranker import load_model
from ragloom.retrieve.stages.features import FEATURE_NAMES, FEATURES_VERSION
from tests.unit.script_loader import load_script


def _script() -> ModuleType:
    return load_script("train_ranker")


def _groups(path: Path, n: int = 120) -> None:
    """Groups of 12 files, one chunk each, where the gold file has the best ``log_rank``
    most of the time: a signal a model can learn."""
    rnd = random.Random(7)
    first = FEATURE_NAMES.index("file_first_chunk")
    rank = FEATURE_NAMES.index("log_rank")
    lines = []
    for q in range(n):
        gold = rnd.randrange(12)
        xs, paths, labels = [], [], []
        for c in range(12):
            row = [round(rnd.random(), 6) for _ in FEATURE_NAMES]
            row[first] = 1.0
            row[rank] = round(rnd.random() * (0.5 if c == gold else 3.0), 6)
            xs.append(row)
            paths.append(f"f{c}.py")
            labels.append(int(c == gold))
        lines.append(
            json.dumps(
                {
                    "id": f"acme/web@{q:04d}",
                    "repo": "acme/web",
                    "language": "python",
                    "split": "train" if q < n // 2 else "test",
                    "query": f"change {q}",
                    "gold_files": [paths[gold]],
                    "features": FEATURES_VERSION,
                    "paths": paths,
                    "labels": labels,
                    "x": xs,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _fits(
    tr: ModuleType, tmp_path: Path, rounds: int, variants: dict[str, list[str]]
) -> tuple[Path, list[str], dict[str, Path]]:
    """Mined groups under ``tmp_path / "ltr"`` and one written tree model per variant (its
    extra arguments): (the data folder, the shared arguments, each variant's model file)."""
    data = tmp_path / "ltr"
    data.mkdir()
    _groups(data / "groups-acme+web.jsonl")
    base = ["--data", str(data), "--level", "file", "--write", "trees", "--rounds", str(rounds)]
    base += ["--min-data", "5"]
    paths = {}
    for name, extra in variants.items():
        paths[name] = tmp_path / f"{name}.json"
        assert tr.main([*base, "--out", str(paths[name]), *extra]) == 0
    return data, base, paths


def test_fit_on_all_is_reproducible_and_fits_every_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("lightgbm")
    tr = _script()
    data = tmp_path / "ltr"
    data.mkdir()
    _groups(data / "groups-acme+web.jsonl")
    outs = []
    for name, fit_on in (("a", "all"), ("b", "all"), ("c", "train")):
        out = tmp_path / f"{name}.json"
        argv = ["--data", str(data), "--out", str(out), "--level", "file", "--write", "trees"]
        argv += ["--fit-on", fit_on, "--rounds", "20", "--min-data", "5"]
        assert tr.main(argv) == 0
        outs.append(out)
    capsys.readouterr()
    a, _b, c = (json.loads(p.read_text(encoding="utf-8")) for p in outs)
    assert outs[0].read_bytes() == outs[1].read_bytes()  # the same groups, the same bytes
    assert a["meta"]["fit_on"] == "all" and a["meta"]["train_groups"] == 120
    assert c["meta"]["fit_on"] == "train" and c["meta"]["train_groups"] == 60
    assert a["meta"]["params"]["min_data_in_leaf"] == 5 and a["meta"]["rounds"] == 20
    model = load_model(outs[0], features=FEATURES_VERSION, names=FEATURE_NAMES)
    assert model.level == "file" and model.kind == "trees"


def test_kind_weight_weights_the_groups_of_a_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--kind-weight KIND=W`` weights the groups of one kind in the fit: a weight of 1 gives
    the unweighted model's bytes, another weight another model (named in its provenance), and a
    weight that is not a positive number is refused."""
    pytest.importorskip("lightgbm")
    tr = _script()
    variants = {"plain": [], "one": ["--kind-weight", "commit=1"],
                "three": ["--kind-weight", "commit=3"]}  # fmt: skip
    _, base, paths = _fits(tr, tmp_path, 20, variants)
    outs = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in paths.items()}
    capsys.readouterr()
    assert outs["one"]["trees"] == outs["plain"]["trees"]
    assert outs["three"]["trees"] != outs["plain"]["trees"]
    assert outs["three"]["meta"]["kind_weight"] == {"commit": 3.0}
    for bad in ("commit", "commit=x", "commit=0"):
        with pytest.raises(SystemExit):
            tr.main([*base, "--out", str(tmp_path / "bad.json"), "--kind-weight", bad])
    assert "--kind-weight takes KIND=W" in capsys.readouterr().err


def test_leave_out_fits_on_no_group_of_those_repositories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--leave-out`` keeps a repository's groups out of the fit (its test groups are still
    scored, as a repository the model never saw); ``evaluation`` names the repositories of
    ``ltr_repos.toml`` with a ``before``; a name with no groups is refused."""
    pytest.importorskip("lightgbm")
    tr = _script()
    data = tmp_path / "ltr"
    data.mkdir()
    _groups(data / "groups-acme+web.jsonl")
    other = (data / "groups-acme+web.jsonl").read_text(encoding="utf-8")
    (data / "groups-acme+api.jsonl").write_text(
        other.replace("acme/web", "acme/api"), encoding="utf-8"
    )
    out = tmp_path / "m.json"
    argv = ["--data", str(data), "--out", str(out), "--level", "file", "--write", "trees"]
    argv += ["--fit-on", "all", "--rounds", "5", "--min-data", "5"]
    assert tr.main([*argv, "--leave-out", "acme/api"]) == 0
    meta = json.loads(out.read_text(encoding="utf-8"))["meta"]
    assert meta["left_out"] == ["acme/api"] and meta["train_groups"] == 120
    assert "acme/api" in capsys.readouterr().out  # its test groups still scored
    with pytest.raises(SystemExit):
        tr.main([*argv, "--leave-out", "acme/nope"])
    assert "no groups: acme/nope" in capsys.readouterr().err
    toml = tmp_path / "repos.toml"
    toml.write_text(
        '[[repo]]\nrepo = "acme/web"\nlanguage = "python"\ngit_dir = "w"\ncommit = "c"\n'
        'before = "2024-01-01T00:00:00Z"\n\n'
        '[[repo]]\nrepo = "acme/api"\nlanguage = "python"\ngit_dir = "a"\ncommit = "c"\n',
        encoding="utf-8",
    )
    assert tr.leave_out("evaluation, x/y", toml) == {"acme/web", "x/y"}
    assert tr.leave_out("") == set()
    # the shipped recipe's seven: the commit evaluation's repositories
    assert len(tr.leave_out("evaluation")) == 7


def test_bag_is_the_mean_of_fits_with_other_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--bag K`` writes one model whose score is the mean of K fits whose seeds are the
    default's + 0 .. K-1; ``--bag 1`` is the plain fit, byte for byte."""
    pytest.importorskip("lightgbm")
    import numpy as np

    tr = _script()
    variants = {"plain": [], "one": ["--bag", "1"], "three": ["--bag", "3"]}
    data, _, paths = _fits(tr, tmp_path, 15, variants)
    capsys.readouterr()
    assert paths["one"].read_bytes() == paths["plain"].read_bytes()
    groups = [json.loads(ln) for ln in (data / "groups-acme+web.jsonl").read_text().splitlines()]
    rows = [tr.file_rows(g) for g in groups]
    singles = []
    for k in range(3):
        params = {"min_data_in_leaf": 5, "seed": tr.TREE_PARAMS["seed"] + k}
        singles.append(tr.fit_trees(rows[:60], 15, params))
    bagged = load_model(paths["three"], features=FEATURES_VERSION, names=FEATURE_NAMES)
    assert bagged.meta["bag"] == 3
    x = np.asarray([r for g in rows[60:] for r in g["x"]], dtype=np.float64)
    mean = sum(m.predict(x) for m in singles) / 3
    np.testing.assert_allclose(bagged.predict(x), mean, rtol=1e-9, atol=1e-9)
    assert not np.allclose(singles[0].predict(x), singles[1].predict(x))


def test_seed_names_the_fit_and_the_file_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seed S`` is the plain fit with ``seed`` S: the default seed gives the default
    fit's bytes, another seed another model, recorded in the file's parameters."""
    pytest.importorskip("lightgbm")
    tr = _script()
    variants = {
        "plain": [],
        "default": ["--seed", str(tr.SEED)],
        "other": ["--seed", str(tr.SEED + 101)],
    }
    _, _, paths = _fits(tr, tmp_path, 15, variants)
    capsys.readouterr()
    assert paths["default"].read_bytes() == paths["plain"].read_bytes()
    assert paths["other"].read_bytes() != paths["plain"].read_bytes()
    other = load_model(paths["other"], features=FEATURES_VERSION, names=FEATURE_NAMES)
    assert other.meta["params"]["seed"] == tr.SEED + 101
