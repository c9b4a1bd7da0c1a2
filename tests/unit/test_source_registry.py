"""The source registry and SourceSet plumbing: names, unknown sources, the saved configuration,
a failing source's sync reported without stopping the others, weights and settings checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragloom.errors import ConfigError
from ragloom.sources.base import DEFAULT_SETTINGS, SourceContext, SourceSettings
from ragloom.sources.multi import SourceSet
from ragloom.sources.registry import (
    create_source,
    load_config,
    parse_source_list,
    save_config,
)


def test_source_lists() -> None:
    assert parse_source_list("code, Docs,,commits,docs") == ["code", "docs", "commits"]
    with pytest.raises(ConfigError):
        parse_source_list(" , ")


def test_unknown_source_and_bad_settings(tmp_path: Path) -> None:
    ctx = SourceContext(tmp_path, tmp_path / ".ragloom")
    with pytest.raises(ConfigError, match="unknown source 'jira'"):
        create_source("jira", ctx)
    with pytest.raises(ConfigError):
        SourceSettings(weight=-1.0)
    with pytest.raises(ConfigError):
        SourceSettings(top_k=0)
    assert DEFAULT_SETTINGS["commits"].enabled is False and DEFAULT_SETTINGS["prs"].weight == 0.2


def test_config_round_trip(tmp_path: Path) -> None:
    assert load_config(tmp_path) == {}
    save_config(tmp_path, {"issues": {"github": "acme/widget"}, "docs": {}})
    assert load_config(tmp_path) == {"issues": {"github": "acme/widget"}, "docs": {}}
    (tmp_path / "sources" / "config.json").write_text("{not json")
    with pytest.raises(ConfigError):
        load_config(tmp_path)


def test_a_failing_sync_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    root = tmp_path / "plain"  # not a git repository
    root.mkdir()
    (root / "README.md").write_text("# Notes\n\nHow we release.\n")
    ss = SourceSet(root, root / ".ragloom", ["commits", "docs"], weights={"docs": 0.7})
    assert ss.settings["commits"].enabled is True, "naming a source turns it on"
    assert ss.settings["docs"].weight == 0.7
    reports = {r.source: r for r in ss.sync()}
    assert reports["commits"].status == "error" and "not a git work tree" in (
        reports["commits"].error or ""
    )
    assert reports["docs"].status == "ok" and reports["docs"].total == 1
    result = ss.search("how do we release")
    # the failed commits sync left nothing: the source says so instead of an empty "ok"
    assert {s.source: s.status for s in result.statuses} == {
        "commits": "not_indexed",
        "docs": "ok",
    }
    assert [h.source for h in result.hits] == ["docs"]
    # a source whose sync failed keeps its earlier saved options; one never synced is not saved
    assert set(load_config(root / ".ragloom")) == {"docs"}
    ss.close()


def test_a_second_sync_at_once_is_refused(tmp_path: Path) -> None:
    from ragloom.errors import IndexLockedError
    from ragloom.index.lock import WriteLock

    root = tmp_path / "plain"
    root.mkdir()
    (root / "NOTES.txt").write_text("release checklist\n")
    ss = SourceSet(root, root / ".ragloom", ["docs"])
    (root / ".ragloom" / "sources").mkdir(parents=True)
    with WriteLock(root / ".ragloom" / "sources"), pytest.raises(IndexLockedError):
        ss.sync()
    assert ss.sync()[0].total == 1, "free again once the other sync is done"
    ss.close()
