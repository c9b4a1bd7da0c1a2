"""One contract for every registered retrieval source (built-in or installed through the entry
point group ``ragloom.sources``): the same checks, parametrised over the registry.

Each source is synced against the same small git repository (code, Markdown and rST docs, three
commits) and the ``gh`` exports of issues and pull requests, then queried for something it
holds. A source must: be a ``Source``; honour ``enabled``; sync idempotently (a second sync
leaves the item count unchanged); answer with SourceHits of its own name, unique ids, best
first, at most ``top_k``; honour a path filter; date every non-code item; report health and
freshness; survive ``dispose`` (and answer again after it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ragloom.sources.base import (
    RetrieveOptions,
    Source,
    SourceContext,
    SourceFilter,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)
from ragloom.sources.registry import BUILTIN_SOURCES, source_factories
from tests.sources_fixture import make_repo, write_exports

REGISTERED = sorted(source_factories())
QUERY = {
    "code": "parse header line",
    "docs": "install the package from source",
    "commits": "retry failed uploads backoff",
    "issues": "upload hangs flaky network",
    "prs": "retry uploads exponential backoff",
}
"""A question each built-in source holds the answer to (a plug-in gets the commit question)."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import ragloom

    root = make_repo(tmp_path_factory.mktemp("contract") / "repo")
    issues, prs = write_exports(root.parent / "exports")
    ragloom.Index(root, root / ".ragloom", embedder="hashing").index()
    return {"root": root, "issues_json": str(issues), "prs_json": str(prs)}


def _make(name: str, world: dict[str, Any], **settings: Any) -> Source:
    root: Path = world["root"]
    src = source_factories()[name](SourceContext(root, root / ".ragloom"))
    opts = {"issues_json": world["issues_json"], "prs_json": world["prs_json"]}
    src.initialize(SourceSettings(options=opts, **settings))
    return src


def test_the_builtins_are_registered_through_entry_points() -> None:
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group="ragloom.sources")}
    assert set(BUILTIN_SOURCES) <= names, "pip install -e . registers the built-in entry points"
    assert set(BUILTIN_SOURCES) <= set(REGISTERED)


@pytest.mark.parametrize("name", REGISTERED)
def test_source_contract(name: str, world: dict[str, Any]) -> None:
    src = _make(name, world)
    assert isinstance(src, Source)
    assert src.name == name
    assert src.enabled is True
    assert _make(name, world, enabled=False).enabled is False

    first = src.sync()
    assert isinstance(first, SyncReport) and first.status == "ok", first
    total = first.total
    assert total >= 1
    again = src.sync()
    assert again.status == "ok" and again.total == total, "a second sync changes nothing"

    question = QUERY.get(name, QUERY["commits"])
    hits = asyncio.run(src.retrieve(SourceQuery(question), RetrieveOptions(top_k=3)))
    assert hits, f"{name} found nothing for {question!r}"
    assert all(isinstance(h, SourceHit) and h.source == name for h in hits)
    assert len(hits) <= 3
    assert len({h.id for h in hits}) == len(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.title and h.text for h in hits)
    if name != "code":
        assert all(h.date is not None for h in hits), "every non-code item is dated"
        assert all(h.attribution for h in hits)

    one = asyncio.run(src.retrieve(SourceQuery(question), RetrieveOptions(top_k=1)))
    assert len(one) == 1 and one[0].id == hits[0].id
    nothing = SourceFilter(paths=("no/such/dir/*",))
    assert asyncio.run(src.retrieve(SourceQuery(question), RetrieveOptions(3, nothing))) == []
    if name != "code":  # dense code search always has a nearest neighbour
        assert asyncio.run(src.retrieve(SourceQuery("zzqqxxj"), RetrieveOptions(3))) == []

    assert asyncio.run(src.health_check()) is True
    fresh = src.freshness()
    assert isinstance(fresh, dict) and fresh.get("items") == total
    asyncio.run(src.dispose())
    after = asyncio.run(src.retrieve(SourceQuery(question), RetrieveOptions(top_k=3)))
    assert [h.id for h in after] == [h.id for h in hits], "usable again after dispose"
    asyncio.run(src.dispose())


def test_a_third_party_source_registers_through_an_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, world: dict[str, Any]
) -> None:
    """A package that declares ``[project.entry-points."ragloom.sources"]`` is found (here a
    real dist-info folder on sys.path) and runs through the orchestrator like a built-in."""
    pkg = tmp_path / "site"
    (pkg / "notes_source.py").parent.mkdir(parents=True)
    (pkg / "notes_source.py").write_text(
        "from ragloom.sources.base import SourceHit, SourceSettings, SyncReport\n"
        "class NotesSource:\n"
        "    name = 'notes'\n"
        "    def __init__(self, context):\n"
        "        self.settings = SourceSettings()\n"
        "    @property\n"
        "    def enabled(self):\n"
        "        return self.settings.enabled\n"
        "    def initialize(self, settings):\n"
        "        self.settings = settings\n"
        "    async def retrieve(self, query, options):\n"
        "        if 'meeting' not in query.text:\n"
        "            return []\n"
        "        return [SourceHit('notes', 'n1', 'Meeting notes', 'We chose tantivy.', 1.0,\n"
        "                          date=1.7e9, attribution={'note': 'n1'})]\n"
        "    async def health_check(self):\n"
        "        return True\n"
        "    async def dispose(self):\n"
        "        return None\n"
        "    def sync(self):\n"
        "        return SyncReport('notes', total=1)\n"
        "    def freshness(self):\n"
        "        return {'items': 1}\n",
        encoding="utf-8",
    )
    dist = pkg / "notes_source-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: notes-source\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ragloom.sources]\nnotes = notes_source:NotesSource\n")
    monkeypatch.syspath_prepend(str(pkg))
    assert "notes" in source_factories()

    from ragloom.sources.multi import SourceSet

    root: Path = world["root"]
    ss = SourceSet(root, root / ".ragloom", ["code", "notes"], weights={"notes": 0.5})
    result = ss.search("meeting decision about the search engine")
    ss.close()
    assert [s.status for s in result.statuses] == ["ok", "ok"]
    assert any(h.source == "notes" and h.id == "n1" for h in result.hits)
