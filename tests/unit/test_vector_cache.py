"""The vector cache: vectors by (embedding key, text), least recently used out beyond the
bound, a clear message-free fallback when it cannot be used, and its own path settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.embed.cache import (
    CACHE_ENV,
    CACHE_MB_ENV,
    EVICT_TO,
    VectorCache,
    default_cache_path,
    open_default_cache,
)

DIM = 8


def _vec(i: int) -> np.ndarray:
    return np.full(DIM, float(i), dtype=np.float32)


def test_round_trip_and_keys(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    a, b = VectorCache.key("m1", "def f(): pass"), VectorCache.key("m2", "def f(): pass")
    assert a != b and a == VectorCache.key("m1", "def f(): pass")  # model and text both count
    cache.put([(a, _vec(1))])
    got = cache.get([a, b], DIM)
    assert list(got) == [a] and np.array_equal(got[a], _vec(1))
    assert cache.get([a], DIM + 1) == {}  # another dimension is never handed out
    assert cache.stats()["entries"] == 1 and cache.stats()["bytes"] == DIM * 4
    cache.put([(a, _vec(2))])  # a text's vector is kept once
    assert np.array_equal(cache.get([a], DIM)[a], _vec(1))
    assert cache.clear() == 1 and cache.stats()["bytes"] == 0
    cache.close()


def test_least_recently_used_go_first(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite", max_bytes=10 * DIM * 4)
    keys = [VectorCache.key("m", str(i)) for i in range(10)]
    for i, k in enumerate(keys):
        cache.put([(k, _vec(i))])
    cache.get([keys[0]], DIM)  # the oldest, used again
    cache.put([(VectorCache.key("m", "new"), _vec(99))])  # one over the bound
    left = cache.get(keys, DIM)
    assert keys[0] in left and keys[1] not in left
    assert int(cache.stats()["bytes"]) <= 10 * DIM * 4
    assert cache.prune(max_bytes=3 * DIM * 4) > 0 and int(cache.stats()["entries"]) == 3
    cache.close()


@settings(max_examples=25, deadline=None)
@given(bound=st.integers(1, 40), n=st.integers(0, 80))
def test_the_bound_holds(tmp_path_factory: pytest.TempPathFactory, bound: int, n: int) -> None:
    cache = VectorCache(tmp_path_factory.mktemp("c") / "v.sqlite", max_bytes=bound * DIM * 4)
    for start in range(0, n, 7):
        cache.put((VectorCache.key("m", str(i)), _vec(i)) for i in range(start, min(n, start + 7)))
    stats = cache.stats()
    assert int(stats["bytes"]) <= bound * DIM * 4
    assert int(stats["bytes"]) == int(stats["entries"]) * DIM * 4
    if n > bound:
        assert int(stats["entries"]) >= int(bound * EVICT_TO) - 1
    cache.close()


def test_where_it_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    assert default_cache_path() is None and open_default_cache() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "ragloom" / "vectors.sqlite"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine.sqlite"))
    monkeypatch.setenv(CACHE_MB_ENV, "1")
    cache = open_default_cache()
    assert cache is not None and cache.max_bytes == 1024 * 1024
    cache.close()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "not-a-dir" / "x.sqlite"))
    (tmp_path / "not-a-dir").write_text("a file where the folder should be")
    assert open_default_cache() is None  # unusable: indexing goes on without it


def test_cache_commands_do_not_create_a_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cache stats`` (and ``prune``, ``clear``) on a cache that does not exist report it
    empty; they used to create its folder and database."""
    import json

    from click.testing import CliRunner

    from ragloom.cli import cli

    where = tmp_path / "nowhere" / "dir" / "x.sqlite"
    monkeypatch.setenv(CACHE_ENV, str(where))
    for args in (["stats"], ["prune"], ["clear"]):
        res = CliRunner().invoke(cli, ["cache", *args, "--json"])
        assert res.exit_code == 0, res.output
        got = json.loads(res.output)
        assert got["path"] == str(where) and got["entries"] == 0
    assert not (tmp_path / "nowhere").exists()


def test_clear_and_prune_give_the_space_back(tmp_path: Path) -> None:
    """``cache prune`` and ``cache clear`` only deleted rows: the file kept its size (292 MB
    after clearing 60k vectors, a user trial). A new file's pages hold a 384-d row inline."""
    import sqlite3

    path = tmp_path / "v.sqlite"
    cache = VectorCache(path)
    rows = [(VectorCache.key("m", str(i)), np.full(384, i, dtype=np.float32)) for i in range(3000)]
    cache.put(rows)
    cache.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA page_size").fetchone()[0] == 8192
    db.close()
    full = path.stat().st_size
    assert full < 3000 * 384 * 4 * 1.5  # about the vectors' own size, not 4x
    cache = VectorCache(path)
    assert cache.prune(max_bytes=1000 * 384 * 4) == 2000
    pruned = path.stat().st_size
    assert pruned < full / 2
    assert cache.clear() == 1000 and path.stat().st_size < pruned / 2
    cache.close()
