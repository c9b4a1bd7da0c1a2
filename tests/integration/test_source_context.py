"""Context assembly over several sources: within the budget in every format, non-code items at
most half of it, each with its attribution line, code parts first, JSON blocks parseable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragloom.assemble import TokenBudget, get_counter
from ragloom.sources.context import NON_CODE_SHARE, assemble_sources, item_label
from ragloom.sources.multi import SourceSet
from tests.sources_fixture import commit, make_repo, write_exports


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import ragloom

    root = make_repo(tmp_path_factory.mktemp("ctx") / "repo")
    long_message = "Rework upload retries\n\n" + "\n".join(
        f"Detail {i}: the upload retry loop now waits {i} seconds." for i in range(80)
    )
    commit(root, {"pkg/upload.py": "def upload(blob):\n    return retry(blob)\n"}, long_message)
    issues, _ = write_exports(root.parent / "exports")
    idx = ragloom.Index(root, root / ".ragloom", embedder="hashing")
    idx.index()
    ss = SourceSet(
        root,
        root / ".ragloom",
        ["code", "docs", "commits", "issues"],
        options={"issues": {"issues_json": str(issues)}},
        index=idx,
    )
    ss.sync(skip=("code",))
    result = ss.search("upload retry backoff hangs")
    ss.close()
    return {"index": idx, "hits": result.hits}


@pytest.mark.parametrize("fmt", ["xml", "markdown", "plain", "json"])
@pytest.mark.parametrize("budget", [1, 10, 40, 120, 400, 1500, 6000])
def test_budget_and_attribution(world: dict[str, Any], fmt: str, budget: int) -> None:
    hits = world["hits"]
    assert {h.source for h in hits} >= {"code", "commits", "issues"}
    ctx = assemble_sources(world["index"], "q", hits, budget=budget, format=fmt)  # type: ignore[arg-type]
    tc = get_counter("cl100k")
    available = TokenBudget.for_total(budget).available
    assert tc.count(ctx.text) == ctx.stats.tokens_total <= available
    by_id = {f"{h.source}:{h.id}": h for h in hits if h.source != "code"}
    others = [p for p in ctx.parts if p.id in by_id]  # code parts keep the code index's ids
    assert sum(p.tokens for p in others) <= int(available * NON_CODE_SHARE)
    for p in others:
        assert p.text.startswith(item_label(by_id[p.id])), p.text[:80]
    kinds = [p.id in by_id for p in ctx.parts]
    assert kinds == sorted(kinds), "code parts first, then the other sources' items"
    if budget >= 1500:
        assert others and any(p.source == "commits" for p in others)
    if fmt == "json" and ctx.text:
        assert len(json.loads(ctx.text)["context"]) == len(ctx.parts)
    if budget == 1500:
        # the long commit message does not fit a part cap (375 tokens): cut at a line, marked
        cut = [p for p in others if p.trimmed]
        assert cut and all(p.text.rstrip().endswith("[...]") for p in cut)
        assert any("Rework upload retries" in p.text for p in cut)
