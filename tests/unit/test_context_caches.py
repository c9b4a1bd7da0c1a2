"""The assembly read cache serves the current file, never a stale copy, and changes no output.

``fetch_snippets`` keeps recently read files keyed on their ``stat``; these tests edit, replace
and touch files between assemblies and check that the text served is the file's current text,
and that a cached assembly is identical to an uncached one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragloom.assemble import AssemblyPolicy, TokenBudget, assemble_context, get_counter
from ragloom.assemble import snippets as snippets_mod
from ragloom.assemble.snippets import FILE_CACHE, fetch_snippets
from ragloom.ingest.chunker import chunk_file
from ragloom.ingest.ids import file_hash
from ragloom.types import Hit

SRC = "def alpha(x):\n    return x + 1\n\n\ndef beta(y):\n    return y * 2\n"


def _hits(path: Path, rel: str) -> list[Hit]:
    data = path.read_bytes()
    out = []
    for i, c in enumerate(chunk_file(rel, data, file_hash(data))):
        out.append(
            Hit(
                id=c.id,
                path=rel,
                start_line=c.start_line,
                end_line=c.end_line,
                kind=c.kind,
                symbol=c.symbol,
                language="python",
                score=1.0 - i / 10,
                text=c.text,
                node_hash=c.node_hash,
                file_hash=c.file_hash,
                start_byte=c.start_byte,
                end_byte=c.end_byte,
            )
        )
    return out


def _age(path: Path, seconds: float) -> None:
    """Set the file's mtime ``seconds`` in the past (its ctime becomes now)."""
    t = path.stat().st_mtime_ns - int(seconds * 1e9)
    os.utime(path, ns=(t, t))


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    FILE_CACHE.clear()


def test_cached_file_is_reused_until_its_stat_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snippets_mod, "FILE_CACHE_RACY_S", 0.0)
    f = tmp_path / "m.py"
    f.write_text(SRC)
    _age(f, 100)
    hits = _hits(f, "m.py")
    _, files1, _ = fetch_snippets(hits, tmp_path)
    _, files2, _ = fetch_snippets(hits, tmp_path)
    assert files2["m.py"] is files1["m.py"]  # served from the cache

    # same size, new content, mtime moved: the edit is seen; the old hits are re-resolved
    f.write_text(SRC.replace("x + 1", "x - 1"))
    _age(f, 50)
    snips, files3, report = fetch_snippets(hits, tmp_path)
    assert "    return x - 1" in files3["m.py"]
    assert report.stale_reresolved == len(hits)
    assert all(s.reresolved for s in snips)

    # replaced by another file (new inode) with the same bytes and mtime as the cached one
    other = tmp_path / "other.py"
    other.write_text(SRC.replace("x + 1", "x * 7"))
    st = f.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, f)
    _, files4, _ = fetch_snippets(hits, tmp_path)
    assert "    return x * 7" in files4["m.py"]


def test_recently_changed_file_is_not_cached(tmp_path: Path) -> None:
    """Within the racy window an edit of the same size in the same timestamp tick would keep
    the stat: such files are read every time."""
    f = tmp_path / "m.py"
    f.write_text(SRC)
    hits = _hits(f, "m.py")
    _, files1, _ = fetch_snippets(hits, tmp_path)
    f.write_text(SRC.replace("y * 2", "y * 3"))  # same size, possibly the same mtime tick
    _, files2, _ = fetch_snippets(hits, tmp_path)
    assert files2["m.py"] is not files1["m.py"]
    assert "    return y * 3" in files2["m.py"]


def test_deleted_file_is_dropped_not_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snippets_mod, "FILE_CACHE_RACY_S", 0.0)
    f = tmp_path / "m.py"
    f.write_text(SRC)
    _age(f, 100)
    hits = _hits(f, "m.py")
    assert fetch_snippets(hits, tmp_path)[0]
    f.unlink()
    snips, files, report = fetch_snippets(hits, tmp_path)
    assert snips == [] and "m.py" not in files and report.stale_dropped == len(hits)


def test_symlink_escape_is_refused_even_when_the_target_was_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snippets_mod, "FILE_CACHE_RACY_S", 0.0)
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.py"
    outside.write_text(SRC)
    f = root / "m.py"
    f.write_text(SRC)
    _age(f, 100)
    hits = _hits(f, "m.py")
    assert fetch_snippets(hits, root)[0]
    f.unlink()
    f.symlink_to(outside)
    snips, _, report = fetch_snippets(hits, root)
    assert snips == [] and report.refused == len(hits)


def test_assembly_with_warm_caches_equals_cold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snippets_mod, "FILE_CACHE_RACY_S", 0.0)
    body = "".join(
        f"def f{i}(a, b):\n    '''Doc {i}.'''\n    return a + b * {i}\n\n\n" for i in range(60)
    )
    hits: list[Hit] = []
    for name in ("a.py", "b.py", "c.py"):
        p = tmp_path / name
        p.write_text(body.replace("Doc", f"Doc of {name}"))
        _age(p, 100)
        hits.extend(_hits(p, name))
    counter = get_counter("cl100k")
    budget = TokenBudget.for_total(1500)

    def run() -> tuple[str, list[dict[str, object]], int]:
        ctx = assemble_context(
            "add numbers",
            hits,
            root=tmp_path,
            budget=budget,
            policy=AssemblyPolicy(),
            counter=counter,
        )
        assert counter.count(ctx.text) == len(counter._enc.encode_ordinary(ctx.text))  # type: ignore[attr-defined]
        return ctx.text, [p.to_dict() for p in ctx.parts], ctx.stats.tokens_total

    FILE_CACHE.clear()
    counter._lines.clear()  # type: ignore[attr-defined]
    cold = run()
    warm = run()
    assert warm == cold
    assert cold[2] == len(counter._enc.encode_ordinary(cold[0]))  # type: ignore[attr-defined]
    assert cold[2] <= budget.available


def test_safe_path_follows_links_only_within_the_root(tmp_path: Path) -> None:
    """The component-wise resolution gives what ``Path.resolve(strict=True)`` gave."""
    from ragloom.assemble.snippets import safe_path

    root = (tmp_path / "root").resolve()
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "m.py").write_text(SRC)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m.py").write_text(SRC)
    (root / "inner").symlink_to(root / "pkg")
    (root / "outer").symlink_to(outside)
    (root / "pkg" / "link.py").symlink_to(root / "pkg" / "sub" / "m.py")
    cases = ["pkg/sub/m.py", "inner/sub/m.py", "pkg/link.py", "outer/m.py", "pkg/sub", "nope.py"]
    cases += ["pkg/sub/m.py/x", "./pkg/sub/m.py", "pkg//sub/m.py"]
    for rel in cases:
        try:
            real = (root / rel).resolve(strict=True)
            want = real if real.is_relative_to(root) and real.is_file() else None
        except OSError:
            want = None
        assert safe_path(root, rel) == want, rel
    assert safe_path(root, "inner/sub/m.py") == root / "pkg" / "sub" / "m.py"
    assert safe_path(root, "outer/m.py") is None


def _ctx_dict(idx: object, query: str) -> dict[str, object]:
    ctx = idx.get_context(query, top_k=8, budget=3000, strategy="hybrid-mmr")  # type: ignore[attr-defined]
    d = ctx.to_dict()
    d["stats"].pop("timings_ms")
    return d


def test_edit_and_reindex_serve_fresh_text_and_match_a_cold_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real index: cached reads and memoised counts never outlive an edit, and a
    warm process answers exactly like a cold one, before and after a re-index."""
    import ragloom

    monkeypatch.setattr(snippets_mod, "FILE_CACHE_RACY_S", 0.0)
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("json", "csv", "gzip"):
        (root / f"{name}_tools.py").write_text(
            "".join(
                f"def {name}_step_{i}(data):\n    '''Handle {name} data, step {i}.'''\n"
                f"    return data + {i}\n\n\n"
                for i in range(12)
            )
        )
        _age(root / f"{name}_tools.py", 100)
    idx = ragloom.open(root, embedder="hashing")
    try:
        idx.index()
        query = "handle json data step"
        first = _ctx_dict(idx, query)
        assert "return data + 3" in str(first["text"])
        gen1 = idx.search(query, top_k=3).generation
        assert _ctx_dict(idx, query) == first  # warm: file cache and token memo used

        # edit without re-indexing: the new text is served (re-resolved), not the cached one
        f = root / "json_tools.py"
        f.write_text(f.read_text().replace("return data + 3", "return data - 3"))
        _age(f, 50)
        edited = _ctx_dict(idx, query)
        assert "return data - 3" in str(edited["text"])
        assert "return data + 3" not in str(edited["text"])

        # re-index: a new generation, the same text as a process that never cached anything
        idx.index()
        assert idx.search(query, top_k=3).generation > gen1
        warm = _ctx_dict(idx, query)
        assert "return data - 3" in str(warm["text"])
        assert warm["stats"]["stale_reresolved"] == 0  # type: ignore[index]
    finally:
        idx.close()
    FILE_CACHE.clear()
    counter = get_counter("cl100k")
    counter._lines.clear()  # type: ignore[attr-defined]
    counter._segs.clear()  # type: ignore[attr-defined]
    cold_idx = ragloom.open(root, embedder="hashing")
    try:
        assert _ctx_dict(cold_idx, query) == warm
    finally:
        cold_idx.close()
