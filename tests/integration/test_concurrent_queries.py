"""Queries during an update (issue 10 item 4): processes query the index (CLI and Python API,
fresh and long-lived ``Index`` objects, hybrid with vectors and BM25 alone) while ``ragloom
index`` applies incremental updates. Every answer reports the index generation it came from and
every hit must belong to that generation: no half-applied update, no error.

Each update rewrites every file so that its symbols and texts carry the update number ``k``
(``marker_fn_<file>_g<k>``, ``"GEN_<k>"``); one function (``stable_<file>``) keeps its text but
moves down one line per update, so the store keeps its row and only its position changes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ragloom.index.lock import WriteLock
from ragloom.index.store import Store
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

FILES = [f"m{i}" for i in range(6)]
UPDATES = 5
NO_EMBED_UPDATES = {3}
"""Updates run with ``--no-embed``: the new generation is searched by BM25 (and the vectors
of texts embedded before) until the next update embeds it."""
QUERIES = [
    "marker fn return GEN",
    "helper value GEN",
    "Holder method",
    "stable function of the module",
    "marker_fn",
]
SEARCH = [sys.executable, "-m", "ragloom.cli", "search"]
_SUFFIX = re.compile(r"_g(\d+)$")


def source(name: str, k: int) -> str:
    """File ``name`` as of update ``k``: every chunk says ``k`` (in its symbol and text) except
    ``stable_<name>``, whose text never changes and which moves down one line per update."""
    pad = "\n" * k
    return (
        f"def marker_fn_{name}_g{k}():\n"
        f'    return "GEN_{k}"\n'
        f"\n\n{pad}"
        f"def stable_{name}():\n"
        f'    return "stable function of the module {name}"\n'
        "\n\n"
        f"def helper_{name}_g{k}(value):\n"
        f'    """Helper value at GEN_{k}."""\n'
        f"    return value + {k}\n"
        "\n\n"
        f"class Holder_{name}_g{k}:\n"
        f'    """GEN_{k} holder."""\n'
        "\n"
        f"    def method_{name}_g{k}(self):\n"
        f'        return "GEN_{k}"\n'
    )


def stable_line(k: int) -> int:
    return 5 + k


def write_all(root: Path, k: int) -> None:
    """Rewrite every file by rename, so a reader of the file system never sees half a file."""
    for name in FILES:
        tmp = root / f".{name}.tmp"
        tmp.write_text(source(name, k), encoding="utf-8")
        os.replace(tmp, root / f"{name}.py")


# -- querying workers -------------------------------------------------------------------------


def _api_worker(root: str, out: str, stop: str, mode: str, strategy: str) -> None:
    """Python API loop: a fresh ``ragloom.open`` per query, or one long-lived Index."""
    import ragloom

    long_lived = ragloom.open(root) if mode == "long" else None
    i = 0
    with open(out, "w", encoding="utf-8") as fh:
        while not os.path.exists(stop):
            query = QUERIES[i % len(QUERIES)]
            i += 1
            rec: dict[str, Any] = {"worker": f"api-{mode}-{strategy}", "query": query}
            try:
                if long_lived is None:
                    with ragloom.open(root) as idx:
                        res = idx.search(query, top_k=8, strategy=strategy)
                else:
                    res = long_lived.search(query, top_k=8, strategy=strategy)
                rec["generation"] = res.generation
                rec["dense"] = any("dense" in h.ranks for h in res.hits)
                rec["hits"] = [
                    {"symbol": h.symbol, "start_line": h.start_line, "text": h.text}
                    for h in res.hits
                ]
            except Exception as exc:  # every error is a failure of the test
                rec["error"] = f"{type(exc).__name__}: {exc}"
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            time.sleep(0.02)  # leave the 2 cores to the indexer too


def _cli_loop(index_dir: Path, records: list[dict[str, Any]], stop: threading.Event) -> None:
    """``ragloom search --json`` in a fresh process per query."""
    i = 0
    while not stop.is_set():
        query = QUERIES[i % len(QUERIES)]
        i += 1
        proc = subprocess.run(
            [*SEARCH, query, "--index-dir", str(index_dir), "--json", "-k", "8"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        rec: dict[str, Any] = {"worker": "cli", "query": query}
        if proc.returncode != 0:
            rec["error"] = f"exit {proc.returncode}: {proc.stderr.strip()}"
        else:
            hits = json.loads(proc.stdout)
            gens = {h.get("generation") for h in hits}
            if len(gens) > 1:
                rec["error"] = f"hits of one answer report generations {sorted(map(str, gens))}"
            rec["generation"] = gens.pop() if len(gens) == 1 else None
            rec["hits"] = [{"symbol": h["symbol"], "start_line": h["start_line"]} for h in hits]
        records.append(rec)


# -- checking ---------------------------------------------------------------------------------


def problem(rec: dict[str, Any], gen_to_k: dict[int, int]) -> str | None:
    """Why an answer is not a clean answer of one generation (None when it is)."""
    if "error" in rec:
        return str(rec["error"])
    gen = rec.get("generation")
    if gen not in gen_to_k:
        return f"unknown generation {gen!r}"
    k = gen_to_k[gen]
    hits = rec["hits"]
    if not hits:
        return f"no hits at generation {gen}"
    for h in hits:
        symbol = h["symbol"]
        m = _SUFFIX.search(symbol)
        if m:
            if int(m.group(1)) != k:
                return f"generation {gen} (update {k}) answered with {symbol}"
            if "text" in h and f"GEN_{k}" not in h["text"]:
                return f"generation {gen} (update {k}): text of {symbol} is {h['text']!r}"
        elif symbol.startswith("stable_"):
            if h["start_line"] != stable_line(k):
                return (
                    f"generation {gen} (update {k}): {symbol} at line {h['start_line']}, "
                    f"expected {stable_line(k)}"
                )
        else:
            return f"unexpected symbol {symbol}"
    return None


def _answers(out: Path) -> list[Any]:
    """Generations of the answers an API worker wrote so far (complete lines only)."""
    try:
        text = out.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line).get("generation") for line in text.split("\n")[:-1] if line]


def _wait_for(condition: Any, timeout: float) -> None:
    """Poll ``condition`` until it holds or ``timeout`` seconds passed (the assertions after
    say what was missing): the workers' pace is the machine's, so no fixed sleep."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def _generation(index_dir: Path) -> int:
    store = Store(index_dir / "index.sqlite", readonly=True)
    try:
        return store.generation()
    finally:
        store.close()


def test_queries_during_updates_see_one_generation(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    index_dir = root / ".ragloom"
    write_all(root, 0)
    run_cli("index", str(root), "--model", "hashing", "--json", check=True)
    gen0 = _generation(index_dir)
    gen_to_k = {gen0: 0}

    ctx = mp.get_context("spawn")
    stop_file = tmp_path / "stop"
    workers = [("fresh", "hybrid"), ("long", "hybrid"), ("long", "hybrid-mmr"), ("long", "sparse")]
    procs = []
    for i, (mode, strategy) in enumerate(workers):
        out = tmp_path / f"api{i}.jsonl"
        p = ctx.Process(
            target=_api_worker, args=(str(root), str(out), str(stop_file), mode, strategy)
        )
        p.start()
        procs.append((p, out))
    cli_records: list[dict[str, Any]] = []
    stop = threading.Event()
    cli = threading.Thread(target=_cli_loop, args=(index_dir, cli_records, stop))
    cli.start()
    lock_checks: list[tuple[int, str]] = []
    t0 = time.perf_counter()
    try:
        # the workers answer at the first generation too
        _wait_for(lambda: all(gen0 in _answers(out) for _, out in procs), 60)
        for k in range(1, UPDATES + 1):
            write_all(root, k)
            args = ["index", str(root), "--json"]
            if k in NO_EMBED_UPDATES:
                args.append("--no-embed")
            if k == 2:
                # a second indexer started at the same time: it either waits its turn (and finds
                # nothing left to do) or gets the clean "index locked" error, never a traceback
                cmd = [sys.executable, "-m", "ragloom.cli", *args]
                pair = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
                pair.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
                for p in pair:
                    _, err = p.communicate(timeout=120)
                    lock_checks.append((p.returncode, err.decode()))
            else:
                run_cli(*args, check=True)
            gen = _generation(index_dir)
            gen_to_k[gen] = k
            # every API worker answers at this generation before the next update
            _wait_for(lambda g=gen: all(g in _answers(out) for _, out in procs), 30)
        # a writer holds the lock: `ragloom index` exits 22 with one clean line
        with WriteLock(index_dir):
            locked = run_cli("index", str(root))
        _wait_for(
            lambda: len(cli_records) >= 3 and all(len(_answers(out)) >= 20 for _, out in procs),
            60,
        )
    finally:
        stop_file.touch()
        stop.set()
        cli.join(120)
        for p, _ in procs:
            p.join(60)
    elapsed = time.perf_counter() - t0

    assert locked.returncode == 22, locked.stderr
    assert locked.stderr.strip().startswith("error: index is locked"), locked.stderr
    assert "Traceback" not in locked.stderr
    assert all(rc in (0, 22) for rc, _ in lock_checks), lock_checks
    assert any(rc == 0 for rc, _ in lock_checks)
    for rc, err in lock_checks:
        if rc == 22:
            assert err.strip().startswith("error: index is locked") and "Traceback" not in err

    records = list(cli_records)
    for _, out in procs:
        records += [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    problems = [(r["worker"], p) for r in records if (p := problem(r, gen_to_k))]
    by_worker: dict[str, int] = {}
    for r in records:
        by_worker[r["worker"]] = by_worker.get(r["worker"], 0) + 1
    seen = sorted({r["generation"] for r in records if "generation" in r})
    dense = sum(1 for r in records if r.get("dense"))
    kinds = Counter(
        re.sub(r"[0-9]+|m[0-9]_g[0-9]+|'.*'", "#", p).split(":")[0] for _, p in problems
    )
    print(
        f"\n{len(records)} answers in {elapsed:.1f}s by {by_worker}; generations seen {seen} "
        f"of {sorted(gen_to_k)}; {dense} API answers with dense hits; "
        f"{len(problems)} problems {dict(kinds)}; second indexer exit codes {[rc for rc, _ in lock_checks]}"
    )
    assert not problems, problems[:10]
    assert by_worker.get("cli", 0) >= 3
    assert all(by_worker.get(f"api-{m}-{s}", 0) >= 20 for m, s in workers), by_worker
    assert len(seen) >= 4, seen
    assert dense > 0
