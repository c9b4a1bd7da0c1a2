"""Live-index benchmark (issue 23): how soon an edit of the work tree is in the answers of a
warm ``ragloom serve http``.

    python scripts/bench_live.py ROOT [--edits 52] [--out docs/benchmarks.md] [--json-out F]

ROOT is a folder with an index (``ROOT/.ragloom``). The server is started on it with its
watcher on (the default), and once it is ready the benchmark edits files of its own, in a
folder ``_ragloom_live_bench/`` it creates under ROOT and removes at the end (nothing else of
ROOT is touched). Each cycle takes a copy of a real module of ROOT (made before the server
starts, so the copy is indexed already) and makes four edits, one at a time:

1. **add** a function with a new name to the module;
2. **body**: change that function's body (a new word in it);
3. **rename** the function;
4. **delete** the file.

For each edit the clock starts just before the file is written (an editor's atomic save:
a temporary file renamed over the module; the delete is an ``unlink``) and stops when the
first ``POST /context`` answer shows it: the new name or word in the context text, or, for the
delete, no part from that file any more. A question is sent 20 ms after the previous answer
(``--poll-ms``; 0 sends them back to back, which makes the questions compete with the update
for the two cores), so the figure includes up to one pause and one answer of waiting. Between edits the benchmark waits for the server to be idle again (``/status``:
``watch.pending`` false), so every edit is its own batch. Reported: p50, p95 and max per kind
and over all edits, the query time, and the watcher's own time per batch.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ragloom.bench.serving import _commit, running_server, write_section
from ragloom.errors import InputError

__all__ = ["main", "run_live_bench"]

PROBE_DIR = "_ragloom_live_bench"
KINDS = ("add", "body", "rename", "delete")
BEGIN = "<!-- live-bench:begin -->"
END = "<!-- live-bench:end -->"
POLL_DEADLINE_S = 30.0
DEFAULT_POLL_MS = 20.0
"""Pause between a question's answer and the next question: an agent asking again soon. With
0 the questions go back to back, and their own work (the GIL, two cores) slows the update they
wait for: at 100k chunks p50 480 ms against 340 ms with 20 ms pauses."""


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[i]


def _modules(root: Path, count: int) -> list[Path]:
    """``count`` real Python modules of 2-20 KB under ``root`` (deterministic choice)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != PROBE_DIR)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if name.endswith(".py") and 2_000 <= p.stat().st_size <= 20_000:
                found.append(p)
    if not found:
        raise InputError(f"no Python module of 2-20 KB under {root} to copy")
    step = max(1, len(found) // count)
    return [found[(i * step) % len(found)] for i in range(count)]


def _save(path: Path, text: str) -> None:
    """An editor's atomic save: write a temporary file beside, then rename it over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _context(client: httpx.Client, query: str) -> dict[str, Any]:
    r = client.post("/context", json={"query": query, "top_k": 10, "budget": 4000})
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    return body


def _idle(client: httpx.Client, timeout: float = POLL_DEADLINE_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        st: dict[str, Any] = client.get("/status").json()
        watch = st.get("watch") or {}
        if watch.get("ready") and not watch.get("pending"):
            return st
        if time.monotonic() > deadline:
            raise InputError(f"the server's watcher did not become idle: {watch}")
        time.sleep(0.05)


def _measure(
    client: httpx.Client, query: str, shown: Any, do_edit: Any, poll_s: float = 0.0
) -> tuple[float, int, float]:
    """(seconds from the write to the first answer that ``shown(answer)``, questions asked,
    mean answer time)."""
    t0 = time.perf_counter()
    do_edit()
    asked = 0
    spent = 0.0
    while True:
        q0 = time.perf_counter()
        ans = _context(client, query)
        spent += time.perf_counter() - q0
        asked += 1
        if shown(ans):
            return time.perf_counter() - t0, asked, spent / asked
        if poll_s:
            time.sleep(poll_s)
        if time.perf_counter() - t0 > POLL_DEADLINE_S:
            watch = client.get("/status").json().get("watch")
            parts = [(p.get("file_path"), p.get("ranges")) for p in ans.get("parts", [])[:3]]
            raise InputError(
                f"edit not visible after {POLL_DEADLINE_S:.0f}s: {query!r} (last answer: "
                f"generation {ans.get('generation')}, parts {parts}; watcher {watch})"
            )


def run_live_bench(
    root: Path, edits: int, work_dir: Path, poll_ms: float = DEFAULT_POLL_MS
) -> dict[str, Any]:
    root = root.resolve()
    if not (root / ".ragloom").is_dir():
        raise InputError(f"{root} has no index: run `ragloom index {root}` first")
    cycles = max(1, (edits + len(KINDS) - 1) // len(KINDS))
    probe = root / PROBE_DIR
    shutil.rmtree(probe, ignore_errors=True)
    probe.mkdir()
    files: list[tuple[Path, str]] = []
    for i, src in enumerate(_modules(root, cycles)):
        dst = probe / f"live_probe_{i}.py"
        text = src.read_text(encoding="utf-8", errors="replace")
        dst.write_text(text, encoding="utf-8")
        files.append((dst, text))
    work_dir.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list[float]] = {k: [] for k in KINDS}
    batch_s: list[float] = []
    query_s: list[float] = []
    asked: list[int] = []
    started = time.time()
    try:
        with (
            # one process: the watcher's state (/status "watch") lives in the primary worker
            running_server(root, work_dir / "server.log", extra=("--workers", "1")) as url,
            httpx.Client(base_url=url, timeout=60.0) as client,
        ):
            _idle(client, timeout=600.0)  # the update at start indexes the probe copies
            _context(client, "warm up")
            for i, (path, text) in enumerate(files):
                name, word, renamed = f"zqadd{i}fn", f"zqbody{i}word", f"zqrenamed{i}fn"
                added = f"{text}\n\ndef {name}(value):\n    return value\n"
                body = f"{text}\n\ndef {name}(value):\n    {word} = value\n    return {word}\n"
                moved = body.replace(f"def {name}(", f"def {renamed}(")
                rel = path.relative_to(root).as_posix()
                steps = [
                    ("add", name, lambda a, n=name: n in a["context"], lambda t=added: t),
                    ("body", word, lambda a, w=word: w in a["context"], lambda t=body: t),
                    ("rename", renamed, lambda a, r=renamed: r in a["context"], lambda t=moved: t),
                    (
                        "delete",
                        renamed,
                        lambda a, p=rel: all(x.get("file_path") != p for x in a["parts"]),
                        None,
                    ),
                ]
                for kind, query, shown, new_text in steps:
                    if sum(len(v) for v in samples.values()) >= edits:
                        break

                    def edit(p: Path = path, make: Any = new_text) -> None:
                        if make is None:
                            p.unlink()
                        else:
                            _save(p, make())

                    secs, n, per_q = _measure(client, query, shown, edit, poll_ms / 1000)
                    samples[kind].append(secs)
                    query_s.append(per_q)
                    asked.append(n)
                    st = _idle(client)
                    last = (st.get("watch") or {}).get("last_batch") or {}
                    if "seconds" in last:
                        batch_s.append(float(last["seconds"]))
            status = client.get("/status").json()
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    every = [s for k in KINDS for s in samples[k]]

    def summary(v: Sequence[float]) -> dict[str, float | int]:
        return {
            "n": len(v),
            "p50_ms": round(1000 * statistics.median(v), 1) if v else float("nan"),
            "p95_ms": round(1000 * _pct(v, 0.95), 1),
            "max_ms": round(1000 * max(v), 1) if v else float("nan"),
        }

    return {
        "root": str(root),
        "chunks": status.get("chunks"),
        "files": status.get("files"),
        "commit": _commit(),
        "started_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "edits": len(every),
        "poll_ms": poll_ms,
        "all": summary(every),
        "by_kind": {k: summary(samples[k]) for k in KINDS},
        "watcher_batch": summary(batch_s),
        "query": summary(query_s),
        "questions_per_edit_median": statistics.median(asked) if asked else 0,
    }


def render_markdown(results: Sequence[dict[str, Any]], command: str) -> str:
    lines = [
        BEGIN,
        f"Command: `{command}`  ",
        f"Commit {results[0].get('commit')}, {results[0].get('started_at')}, 2 cores, the "
        "shipped int8 MiniLM, `serve http` with its watcher on (debounce 200 ms; a batch of "
        f"at most three files closes after 20 ms of quiet); a question every "
        f"{results[0].get('poll_ms', 0):g} ms after the previous answer.",
        "",
        "| corpus | chunks | edits | kind | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        name = Path(r["root"]).name
        for kind in (*KINDS, "all"):
            s = r["all"] if kind == "all" else r["by_kind"][kind]
            label = f"**{kind}**" if kind == "all" else kind
            lines.append(
                f"| {name} | {r['chunks']} | {s['n']} | {label} | {s['p50_ms']} | "
                f"{s['p95_ms']} | {s['max_ms']} |"
            )
    lines += [
        "",
        "| corpus | watcher batch p50 / p95 ms | one `/context` answer p50 / p95 ms |",
        "|---|---:|---:|",
    ]
    for r in results:
        b, q = r["watcher_batch"], r["query"]
        lines.append(
            f"| {Path(r['root']).name} | {b['p50_ms']} / {b['p95_ms']} | "
            f"{q['p50_ms']} / {q['p95_ms']} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="bench_live", description="Time from a file write to the first answer showing it."
    )
    ap.add_argument("roots", nargs="+", type=Path, help="indexed folders (ROOT/.ragloom)")
    ap.add_argument("--edits", type=int, default=52, help="edits per folder (4 kinds in turn)")
    ap.add_argument(
        "--poll-ms",
        type=float,
        default=DEFAULT_POLL_MS,
        help="pause after each answer before asking again (0: back to back)",
    )
    ap.add_argument("--work-dir", type=Path, default=Path("bench-out/live"))
    ap.add_argument("--out", type=Path, help="markdown file to write the section into")
    ap.add_argument("--json-out", type=Path)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    results = [
        run_live_bench(root, args.edits, args.work_dir / root.resolve().name, args.poll_ms)
        for root in args.roots
    ]
    text = render_markdown(results, "python scripts/bench_live.py " + " ".join(argv))
    print(text)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    if args.out:
        write_section(args.out, text, "## Live index (issue 23)", begin=BEGIN, end=END)
    return 0
