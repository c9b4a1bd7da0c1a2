"""What the code graph costs: cold indexing with and without it, and building it in memory.

    python scripts/bench_graph.py [ROOT ...] [--runs 3]

For each ROOT (default: this repository), a copy of its tracked files (``git ls-files``, or
every file when it is not a work tree) is indexed cold without embeddings, alternately with
reference extraction on and off (``parse_file(refs=False)``), ``--runs`` times each; the
medians and their ratio are printed (the goal of issue 24: at most 1.2). Then the graph of
the index is built (``load_graph``) and its size and build time printed. docs/graph.md records
the figures.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock


def copy_tree(src: Path, dst: Path) -> int:
    try:
        out = subprocess.run(
            ["git", "-C", str(src), "ls-files", "-z"], capture_output=True, check=True
        ).stdout
        files = [f for f in out.decode().split("\0") if f]
    except subprocess.CalledProcessError:
        files = [str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()]
    n = 0
    for rel in files:
        s = src / rel
        if not s.is_file() or ".ragloom" in Path(rel).parts:
            continue
        d = dst / rel
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(s, d)
        n += 1
    return n


def cold_index(root: Path, graph: bool, history: bool = False) -> float:
    import ragloom
    from ragloom.ingest import chunker

    shutil.rmtree(root / ".ragloom", ignore_errors=True)
    real = chunker.parse_file

    def no_refs(path: str, data: bytes, file_hash: str, *, refs: bool = True):  # type: ignore[no-untyped-def]
        return real(path, data, file_hash, refs=False)

    idx = ragloom.open(root, embedder="hashing")
    t = time.perf_counter()
    if graph:
        idx.index(embed=False, history=history)
    else:
        with mock.patch.object(chunker, "parse_file", no_refs):
            idx.index(embed=False, history=history)
    took = time.perf_counter() - t
    idx.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--history",
        action="store_true",
        help="index the commit history too (what `ragloom index --no-embed` does in a git "
        "work tree; the copy is then a clone, so it has the history)",
    )
    args = ap.parse_args()
    roots = args.roots or [Path(__file__).resolve().parents[1]]
    for src in roots:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / src.name
            if args.history:
                subprocess.run(["git", "clone", "-q", str(src.resolve()), str(root)], check=True)
                n = len(subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                                       text=True, check=True).stdout.split())  # fmt: skip
            else:
                n = copy_tree(src.resolve(), root)
            cold_index(root, True, args.history)  # warm the file cache and the parsers
            on: list[float] = []
            off: list[float] = []
            for _ in range(args.runs):
                off.append(cold_index(root, False, args.history))
                on.append(cold_index(root, True, args.history))
            m_on, m_off = statistics.median(on), statistics.median(off)
            import ragloom
            from ragloom.graph import load_graph
            from ragloom.index.store import Store

            idx = ragloom.open(root, embedder="hashing")
            idx.index(embed=False, history=False)
            idx.close()
            store = Store(root / ".ragloom" / "index.sqlite", readonly=True)
            builds = []
            for _ in range(3):
                t = time.perf_counter()
                g = load_graph(store)
                builds.append(time.perf_counter() - t)
            print(
                f"{src}: {n} files; cold index without embeddings"
                f"{' (with the commit history)' if args.history else ''}: graph on {m_on:.2f} s, "
                f"off {m_off:.2f} s (medians of {args.runs}), ratio {m_on / m_off:.3f}; "
                f"graph: {len(g)} nodes, {g.edge_count} edges, built in "
                f"{statistics.median(builds) * 1000:.0f} ms (median of 3)"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
