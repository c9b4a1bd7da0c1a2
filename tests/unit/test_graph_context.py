"""The repository map and structural context on real code (issue 24): the budget always holds,
counted with assembly's exact tokenizer; structural parts are marked in every format."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragloom
from ragloom.assemble import get_counter

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SRC = Path(__file__).resolve().parents[2] / "src" / "ragloom"
REPOS = {"ragloom": SRC, "json": STDLIB / "json", "email": STDLIB / "email"}


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ragloom.Index]:
    out = {}
    for name, src in REPOS.items():
        root = tmp_path_factory.mktemp(name) / name
        shutil.copytree(src, root, ignore=shutil.ignore_patterns("__pycache__", ".ragloom"))
        idx = ragloom.open(root, embedder="hashing")
        idx.index(embed=False, history=False)
        out[name] = idx
    return out


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    repo=st.sampled_from(sorted(REPOS)),
    budget=st.integers(min_value=256, max_value=32_000),
    query=st.sampled_from([None, "parse a header value", "resolve references to definitions"]),
    fmt=st.sampled_from(["text", "markdown", "json"]),
)
def test_map_never_exceeds_its_budget(
    indexes: dict[str, ragloom.Index], repo: str, budget: int, query: str | None, fmt: str
) -> None:
    counter = get_counter("cl100k")
    m = indexes[repo].repo_map(query, budget=budget, format=fmt, counter=counter)
    assert m["tokens"] == counter.count(str(m["text"]))
    assert 0 < int(m["tokens"]) <= budget  # type: ignore[call-overload]
    assert m["entries_shown"] > 0


def test_map_is_personalised_and_deterministic(indexes: dict[str, ragloom.Index]) -> None:
    idx = indexes["ragloom"]
    a = idx.repo_map("resolve references to definitions by import", budget=1500)
    b = idx.repo_map("resolve references to definitions by import", budget=1500)
    assert a == b
    plain = idx.repo_map(None, budget=1500)
    top_files = [f["path"] for f in a["files"]][:5]  # type: ignore[index]
    assert any(p.startswith("graph/") for p in top_files), top_files
    assert a["text"] != plain["text"]


def test_map_rejects_bad_input(indexes: dict[str, ragloom.Index]) -> None:
    from ragloom.errors import InputError

    with pytest.raises(InputError):
        indexes["json"].repo_map(None, budget=0)
    with pytest.raises(InputError):
        indexes["json"].repo_map(None, format="yaml")


@pytest.mark.parametrize("fmt", ["xml", "markdown", "plain", "json"])
@pytest.mark.parametrize("mode", ["signatures", "bodies"])
def test_structural_context_fits_and_is_marked(
    indexes: dict[str, ragloom.Index], fmt: str, mode: str
) -> None:
    idx = indexes["email"]
    counter = get_counter("cl100k")
    for budget in (600, 3000):
        ctx = idx.get_context(
            "parse an address header",
            budget=budget,
            format=fmt,
            structure=mode,  # type: ignore[arg-type]
        )
        assert counter.count(ctx.text) == ctx.stats.tokens_total <= budget
        related = [p for p in ctx.parts if p.relation is not None]
        assert ctx.structure is not None and ctx.structure["related"] == len(related)
        if budget == 3000:
            assert related, "no callee or caller was added"
            p = related[0]
            assert p.relation in ("callee", "caller") and p.related_to
            if fmt == "xml":
                assert f'relation="{p.relation}"' in ctx.text
            elif fmt == "markdown":
                assert f"{p.relation} of `{p.related_to}`" in ctx.text
            elif fmt == "plain":
                assert f"{p.relation} of {p.related_to}" in ctx.text
            else:
                rows = json.loads(ctx.text)["context"]
                assert any(r.get("relation") == p.relation for r in rows)
            d = ctx.to_dict()
            assert d["structure"]["related"] == len(related)
            assert any(x.get("relation") for x in d["parts"])


def test_structure_off_is_unchanged(indexes: dict[str, ragloom.Index]) -> None:
    idx = indexes["email"]
    plain = idx.get_context("parse an address header", budget=2000)
    off = idx.get_context("parse an address header", budget=2000, structure="off")
    assert plain.text == off.text and off.structure is None
    assert "structure" not in off.to_dict()
    assert all("relation" not in p for p in off.to_dict()["parts"])


def test_nothing_related_leaves_no_budget_unused(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(12):
        body = "\n\n".join(
            f"Parsing note {i}.{k}: headers are parsed line by line." for k in range(8)
        )
        (root / f"note{i}.md").write_text(f"# Note {i}\n\n{body}\n")
    idx = ragloom.open(root, embedder="hashing")
    idx.index(embed=False, history=False)
    plain = idx.get_context("how are headers parsed", budget=300)
    assert plain.stats.truncated  # the budget is what limits it
    with_structure = idx.get_context("how are headers parsed", budget=300, structure="bodies")
    assert with_structure.structure is not None and with_structure.structure["related"] == 0
    assert with_structure.text == plain.text  # the held-back share went to the main parts


def test_the_map_shows_the_def_of_a_command_whose_decorators_fill_a_chunk(tmp_path: Path) -> None:
    """black's ``main``: its click options fill the symbol's first part, so the map showed
    ``@click.command(``; it shows the ``def`` from the second part."""
    opts = "\n".join(f'@click.option("--opt{i}", help="{"x" * 150}")' for i in range(60))
    body = "\n".join(f"    value_{i} = opt{i}" for i in range(40))
    (tmp_path / "cli.py").write_text(
        f"import click\n\n\n@click.command()\n{opts}\ndef main(opt0: str) -> None:\n{body}\n"
    )
    with ragloom.open(tmp_path, embedder="hashing:64") as idx:
        idx.index(history=False)
        m = idx.repo_map(None, budget=400)
    mains = [e for f in m["files"] for e in f["entries"] if e["symbol"] == "main"]
    assert mains and mains[0]["signature"].startswith("def main(opt0: str) -> None:")
