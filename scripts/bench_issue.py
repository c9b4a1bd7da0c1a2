"""What reading a question as a GitHub issue costs at 100k chunks (issue 21; docs/benchmarks.md
"Issue texts (issue 21)"). Bench-only, not part of the test suite.

    .venv/bin/python scripts/bench_issue.py [--index PATH] [--work DIR] [--rounds 20]
        [--json-out FILE] [--issues-out FILE] [--profile FILE] [--no-model]

Steps:

1. **Index** (skipped with ``--index PATH``, an indexed root or ``.ragloom`` folder): the c100k
   corpus of ``scripts/build_bench_corpora.py`` (the whole standard library + site-packages
   mypy, pip, rich, anyio; about 100k chunks), indexed with ``ragloom index --model hashing:384
   --no-history`` into ``--work``. The hashing embedder has MiniLM's dimension (384), so the HNSW
   graph and its search cost the same as with the real model, but indexing takes minutes
   instead of 30+. The chunk count comes from ``ragloom status --json``.
2. **Issues**: 40 synthetic GitHub-issue texts, invented here from the corpus itself (seeded,
   so every run writes the same texts): a title, template headings, prose, fenced repro code,
   Python tracebacks and pytest failures whose frames name files and functions that exist in
   the corpus (site-packages frames as a virtualenv prints them, stdlib frames under
   ``/usr/lib/python3.11``), doctest sessions, quoted replies, expected / actual output and an
   environment list. 34 are 1-6 kB, 6 are 10-25 kB (pasted debug logs, more prose). No text
   comes from a real issue tracker. Each is checked with ``looks_like_issue``; 16 plain
   questions (``looks_like_issue`` False) are the control. ``--issues-out`` writes them.
3. **Timing**, all in one process, interleaved: per round the questions are shuffled and each
   question runs ``Retriever.search(q, top_k=10, strategy="hybrid")`` and
   ``strategy="hybrid+no-issue"`` back to back, the order of the two flipping every question,
   after two warm-up passes (``--rounds`` rounds after them). The measurements:

   * ``search, embedding excluded`` (the headline): the query embedder is memoised, so after
     warm-up the query embedding costs a dict look-up in both arms; what remains is query
     processing, BM25, HNSW search, the ranking stages and hydration.
   * ``search, embedding excluded, no sub-queries``: the same with ``+no-decompose`` in both
     arms. A plain question is split into sub-queries (each searched too); an issue never is.
     Without sub-queries the plain arm searches the (truncated) issue once, so this pair gives
     the issue reading's own cost (parsing, more BM25 terms, the issue stage), not the
     sub-queries it saves.
   * ``search, hashing embedder``: the same with the hashing embedder embedding each time
     (it hashes every word of the embedding text: the plain arm embeds the whole issue, the
     issue arm a bounded ``dense_text``).
   * ``query embedding, MiniLM`` (unless ``--no-model``): the default model's ``embed_query``
     on each arm's embedding text (``ProcessedQuery.dense_text``), interleaved the same way.
     Add it to the first measurement for the latency with the real model.
   * ``search, embedding excluded (control)``: the 16 plain questions, for which both arms do
     the same work: the noise floor of the comparison.

   Also ``process_query`` alone with the issue reading on and off, and the issue reading alone
   (``looks_like_issue`` + ``parse_issue`` + ``issue_signals`` + ``bm25_terms`` +
   ``dense_text``). Each row gives p50 and p95 over every (question, round) sample, the p50
   difference and ratio, and the median of the per-question paired differences; then the p50
   of each ``SearchResult.timings_ms`` part.
   ``--profile FILE`` runs cProfile over the issue arm afterwards and prints the top entries.

The machine load (``os.getloadavg``) is printed before and after: on a shared machine the
comparison is only meaningful as the interleaved difference and ratio.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ragloom
from ragloom.embed.base import HashingEmbedder
from ragloom.retrieve.query import looks_like_issue
from ragloom.retrieve.query.issue import bm25_terms, dense_text, issue_signals, parse_issue
from ragloom.retrieve.query.pipeline import process_query
from ragloom.retrieve.stages.pipeline import parse_search_spec

HERE = Path(__file__).resolve().parent
ARMS = ("hybrid", "hybrid+no-issue")
SINGLE = ("hybrid+no-decompose", "hybrid+no-issue+no-decompose")
"""Both arms without sub-queries: the plain arm searches the issue as one question too, so the
difference is the issue reading itself, not the sub-queries the plain reading adds."""
SEED = 21

# -- the corpus -------------------------------------------------------------------------------


def ragloom_cli(*args: str) -> str:
    exe = Path(sys.executable).with_name("ragloom")
    done = subprocess.run([str(exe), *args], check=True, capture_output=True, text=True)
    return done.stdout


def build_index(work: Path) -> Path:
    root = work / "c100k"
    if not (root / ".ragloom").is_dir():
        subprocess.run(
            [
                sys.executable,
                str(HERE / "build_bench_corpora.py"),
                *("--out", str(work), "--only", "c100k", "--no-index"),
            ],
            check=True,
        )
        t0 = time.perf_counter()
        ragloom_cli("index", str(root), "--model", "hashing:384", "--no-history", "--no-progress")
        print(f"indexed {root} in {time.perf_counter() - t0:.0f} s", flush=True)
    return root


@dataclass(frozen=True)
class Def:
    """A function of the corpus: where a traceback would show it."""

    rel: str  # path under site-packages or the stdlib folder
    site: bool
    func: str
    cls: str
    line: int
    source: str  # the line a traceback quotes


PACKAGES = (
    ("site-packages/rich", True),
    ("site-packages/anyio", True),
    ("site-packages/pip/_internal", True),
    ("site-packages/mypy", True),
    ("json", False),
    ("email", False),
    ("logging", False),
    ("http", False),
    ("asyncio", False),
    ("concurrent", False),
    ("xml/etree", False),
    ("urllib", False),
    ("importlib", False),
)
MODULES = ("argparse.py", "configparser.py", "csv.py", "tarfile.py", "zipfile", "shutil.py")


def collect_defs(root: Path) -> dict[str, list[Def]]:
    """Functions per package (key: the package folder), with a quotable source line."""
    out: dict[str, list[Def]] = {}
    for folder, site in [*PACKAGES, *((m, False) for m in MODULES)]:
        base = root / folder
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        defs: list[Def] = []
        for f in files:
            if not f.is_file() or "test" in f.name or "/tests/" in f.as_posix():
                continue
            try:
                text = f.read_text(encoding="utf-8")
                tree = ast.parse(text)
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            lines = text.split("\n")
            top = (root / "site-packages") if site else root
            rel = f.relative_to(top).as_posix()
            for node in tree.body:
                items: list[tuple[str, ast.AST]] = [("", node)]
                if isinstance(node, ast.ClassDef):
                    items = [(node.name, n) for n in node.body]
                for cls, n in items:
                    if not isinstance(n, ast.FunctionDef) or n.name.startswith("__"):
                        continue
                    body_line = n.body[-1].lineno if n.body else n.lineno
                    src = lines[body_line - 1].strip() if body_line <= len(lines) else ""
                    if src and len(src) < 90:
                        defs.append(Def(rel, site, n.name, cls, body_line, src))
        if defs:
            out[folder] = defs
    return out


def collect_errors(root: Path, folder: str) -> list[str]:
    base = root / folder
    files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
    names: list[str] = []
    for f in files[:200]:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        names.extend(
            n.name
            for n in tree.body
            if isinstance(n, ast.ClassDef) and n.name.endswith(("Error", "Exception"))
        )
    return sorted(set(names))


# -- the issues (invented) --------------------------------------------------------------------

SITUATIONS = (
    "the input is empty",
    "a path contains spaces",
    "the terminal is 0 columns wide",
    "it runs under Windows",
    "the value has non-ASCII characters",
    "it is called from a worker thread",
    "the config file starts with a BOM",
    "nested options are combined",
    "the environment variable is unset",
    "the file is larger than 2 GiB",
    "two calls overlap",
    "a subclass overrides the default",
)
PROSE = (
    "After upgrading {pkg} last week, `{func}` started to fail in our nightly job.",
    "I traced it down to {file}, where `{func}` seems to assume the input is already normalised.",
    "The same call worked with the previous release, so this looks like a regression.",
    "We call `{qual}` from a small wrapper that only forwards the arguments.",
    "I am not sure whether this is intended, the documentation does not say.",
    "Our CI runs the same code on three platforms and only one of them shows the problem.",
    "Passing the value through `str()` first works around it, but that loses the type.",
    "It looks like `{func}` is reached twice and the second call sees stale state.",
    "The error only appears when {situation}; otherwise the output is correct.",
    "I searched the existing issues and found nothing about `{func}` in {module}.",
    "Happy to send a pull request if someone confirms the expected behaviour.",
    "The traceback below is from a clean virtual environment with only {pkg} installed.",
    "Setting the option explicitly does not change anything, which surprised me.",
    "Reading {file} suggests the branch for this case was removed at some point.",
    "This blocks our upgrade, so any workaround would be appreciated.",
    "The docs for {module} say `{func}` accepts any iterable, but a generator fails.",
    "With logging at DEBUG level nothing useful is printed before the failure.",
    "A colleague reproduced it on macOS as well, with the same traceback.",
)
CONTROL = (
    "parse an email address",
    "decode a JSON document",
    "HTTP cookie expiry date",
    "rotate log files by size",
    "format a log record with a timestamp",
    "thread pool executor shutdown",
    "encode a MIME header",
    "parse query string into a dict",
    "JSON encoder for custom objects",
    "render a table with a title in the terminal",
    "where does anyio open a TCP connection",
    "how does pip resolve dependency conflicts",
    "mypy checks the type of a call expression",
    "TarFile.extractall",
    "progress bar refresh rate",
    "read a zip archive member",
)


class IssueWriter:
    def __init__(self, root: Path, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.defs = collect_defs(root)
        self.errors = {k: collect_errors(root, k) for k in self.defs}
        site = [k for k in sorted(self.defs) if k.startswith("site-packages/")]
        self.keys = site + sorted(self.defs)  # the installed packages twice as often

    def _frame(self, d: Def) -> str:
        prefix = (
            "/home/dev/work/app/.venv/lib/python3.11/site-packages/"
            if d.site
            else "/usr/lib/python3.11/"
        )
        return f'  File "{prefix}{d.rel}", line {d.line}, in {d.func}\n    {d.source}\n'

    def _module(self, d: Def) -> str:
        return d.rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")

    def issue(self, i: int, target: int) -> str:
        rng = self.rng
        key = self.keys[i % len(self.keys)]
        defs = self.defs[key]
        chain = rng.sample(defs, min(len(defs), rng.randint(2, 5)))
        inner = chain[-1]
        mod = self._module(inner)
        pkg = mod.split(".")[0]
        qual = f"{inner.cls}.{inner.func}" if inner.cls else inner.func
        errors = self.errors.get(key) or []
        exc = rng.choice(errors) if errors and rng.random() < 0.5 else None
        exc = exc or rng.choice(("ValueError", "KeyError", "TypeError", "AttributeError"))
        situation = rng.choice(SITUATIONS)
        fill = {
            "pkg": pkg,
            "func": inner.func,
            "qual": qual,
            "file": inner.rel,
            "module": mod,
            "situation": situation,
        }
        shape = i % 5
        title = rng.choice(
            (
                f"`{qual}` raises {exc} when {situation}",
                f"{exc} from {inner.func}() when {situation}",
                f"{mod}: {inner.func} gives a wrong result when {situation}",
                f"Regression: {qual} fails when {situation}",
            )
        )
        parts = [f"### {title}\n", "**Describe the bug**\n"]
        parts.append(self._paragraph(fill, 2, 4))
        name = inner.cls or inner.func
        repro = [
            "```python",
            f"from {mod} import {name}",
            "",
            "data = {'name': 'widget', 'size': 3, 'tags': ['a', 'b']}",
        ]
        if inner.cls:
            repro += [f"obj = {inner.cls}()", f"result = obj.{inner.func}(data)"]
        else:
            repro += [f"result = {inner.func}(data)"]
        repro += ["print(result)", "```", ""]
        if shape == 3:  # a doctest session instead of a script
            repro = [
                f">>> from {mod} import {name}",
                f">>> {name}().{inner.func}([])" if inner.cls else f">>> {inner.func}([])",
                "Traceback (most recent call last):",
                "  ...",
                f"{exc}: unexpected empty input",
                "",
            ]
        parts.append("**To Reproduce**\n")
        parts.append("\n".join(repro))
        if shape in (0, 1, 4):
            tb = [
                "```",
                "Traceback (most recent call last):",
                '  File "repro.py", line 7, in <module>',
            ]
            tb.append(f"    result = {inner.func}(data)")
            tb.extend(self._frame(d).rstrip("\n") for d in chain)
            tb += [f"{exc}: cannot handle {situation.split()[-1]!r}", "```", ""]
            parts.append("**Traceback**\n")
            parts.append("\n".join(tb))
        elif shape == 2:  # pytest output
            test = f"test_{inner.func.strip('_')}_{situation.split()[-1].strip('.')}"
            py = [f"{'_' * 20} {test} {'_' * 20}", "", f"    def {test}():"]
            py.append(f">       {inner.func}(payload)")
            py.append("")
            for d in chain:
                site = ".venv/lib/python3.11/site-packages/" if d.site else "/usr/lib/python3.11/"
                py += [f"{site}{d.rel}:{d.line}: in {d.func}", f"    {d.source}"]
            py += [f"E   {exc}: {situation}", ""]
            parts.append("```\n" + "\n".join(py) + "\n```\n")
        parts.append("**Expected behavior**\n")
        parts.append(f"`{qual}` should return the same result as for a plain value.\n")
        parts.append("**Actual behavior**\n")
        parts.append(f"```text\n{exc}: {situation}\nexit status 1\n```\n")
        if shape == 4:  # a quoted reply
            parts.append(
                f"> I see the same with {pkg} on Linux.\n> Is `{inner.func}` public API?\n"
            )
        parts.append(
            "**Environment**\n\n- OS: Ubuntu 24.04\n- Python: 3.11.7\n"
            f"- {pkg}: {rng.randint(1, 14)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}\n"
        )
        text = "\n".join(parts)
        k = 0
        while len(text) < target and k < 200:
            k += 1
            if target > 8000 and k % 3 == 0:
                room = (target - len(text)) // 110 + 5
                text += "\n" + self._log(min(rng.randint(40, 80), room), fill)
            else:
                text += "\n" + self._paragraph(fill, 3, 6)
        return text

    def _paragraph(self, fill: dict[str, str], lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        return " ".join(s.format(**fill) for s in self.rng.sample(PROSE, n)) + "\n"

    def _log(self, lines: int, fill: dict[str, str]) -> str:
        rows = ["<details><summary>debug log</summary>", "", "```text"]
        for k in range(lines):
            ms = self.rng.randint(0, 999)
            rows.append(
                f"2026-11-{1 + k % 28:02d} 10:{k % 60:02d}:{ms % 60:02d},{ms:03d} DEBUG "
                f"{fill['module']}: {fill['func']} step {k} took {ms} ms (queue={k * 3})"
            )
        rows += ["```", "</details>", ""]
        return "\n".join(rows)

    def issues(self, n_short: int = 34, n_long: int = 6) -> list[str]:
        out = [self.issue(i, self.rng.randint(1000, 6000)) for i in range(n_short)]
        out += [self.issue(n_short + i, self.rng.randint(10_000, 25_000)) for i in range(n_long)]
        return out


# -- timing -------------------------------------------------------------------------------------


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


class MemoEmbedder:
    """Delegates to an embedder but remembers each query vector: query embedding excluded."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._memo: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed_query(self, text: str) -> Any:
        vec = self._memo.get(text)
        if vec is None:
            vec = self._memo[text] = self._inner.embed_query(text)
        return vec


def interleaved(
    questions: list[str],
    fns: dict[str, Callable[[str], Any]],
    rounds: int,
    warmup: int = 2,
) -> tuple[dict[str, list[float]], dict[str, dict[int, list[float]]], dict[str, list[Any]]]:
    """Samples (ms) per arm, per arm and question, and the return values of the last round."""
    names = list(fns)
    rng = random.Random(SEED)
    samples: dict[str, list[float]] = {a: [] for a in names}
    per_q: dict[str, dict[int, list[float]]] = {a: {} for a in names}
    last: dict[str, list[Any]] = {a: [None] * len(questions) for a in names}
    flip = 0
    for rnd in range(warmup + rounds):
        order = list(range(len(questions)))
        rng.shuffle(order)
        for qi in order:
            flip ^= 1
            for a in names if flip else reversed(names):
                t0 = time.perf_counter()
                out = fns[a](questions[qi])
                ms = (time.perf_counter() - t0) * 1000
                if rnd >= warmup:
                    samples[a].append(ms)
                    per_q[a].setdefault(qi, []).append(ms)
                    last[a][qi] = out
    return samples, per_q, last


def summary(
    label: str, samples: dict[str, list[float]], per_q: dict[str, dict[int, list[float]]]
) -> dict[str, Any]:
    a, b = list(samples)
    pa, pb = statistics.median(samples[a]), statistics.median(samples[b])
    paired = [statistics.median(per_q[a][q]) - statistics.median(per_q[b][q]) for q in per_q[a]]
    return {
        "measure": label,
        "on": {"arm": a, "p50": pa, "p95": pct(samples[a], 0.95), "n": len(samples[a])},
        "off": {"arm": b, "p50": pb, "p95": pct(samples[b], 0.95), "n": len(samples[b])},
        "p50_diff_ms": pa - pb,
        "p50_ratio": pa / pb if pb else float("nan"),
        "paired_median_diff_ms": statistics.median(paired),
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| measure | arms (on / off) | on: p50 / p95 ms | off: p50 / p95 ms | p50 diff ms "
        "| ratio | paired diff ms |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        a, b = r["on"], r["off"]
        out.append(
            f"| {r['measure']} | `{a['arm']}` / `{b['arm']}` | {a['p50']:.2f} / {a['p95']:.2f} | "
            f"{b['p50']:.2f} / {b['p95']:.2f} | {r['p50_diff_ms']:+.2f} | "
            f"{r['p50_ratio']:.3f} | {r['paired_median_diff_ms']:+.2f} |"
        )
    return "\n".join(out)


def parts_table(results: dict[str, list[Any]]) -> str:
    keys: list[str] = []
    for res in results.values():
        for r in res:
            keys.extend(k for k in r.timings_ms if k not in keys)
    out = ["| part | " + " | ".join(results) + " |", "|---|" + "---:|" * len(results)]
    for k in keys:
        cells = []
        for res in results.values():
            xs = [r.timings_ms[k] for r in res if k in r.timings_ms]
            cells.append(f"{statistics.median(xs):.3f}" if xs else "")
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def read_issue(text: str) -> Any:
    """What query processing adds for an issue (``process_query``'s ``issue`` step)."""
    if not looks_like_issue(text):
        return None
    read = parse_issue(text)
    signals = issue_signals(read)
    return bm25_terms(read, signals=signals), dense_text(read, signals=signals)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} CPUs)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="an indexed root (or .ragloom folder) to reuse")
    ap.add_argument("--work", type=Path, default=Path("bench-out/issue"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--issues-out", type=Path, help="write the synthetic issues (JSONL)")
    ap.add_argument("--profile", type=Path, help="cProfile the issue arm into this file")
    ap.add_argument("--no-model", action="store_true", help="skip the MiniLM query embedding")
    args = ap.parse_args()

    root = args.index if args.index is not None else build_index(args.work)
    index_dir = root if root.name == ".ragloom" else root / ".ragloom"
    status = json.loads(
        ragloom_cli("status", "--index-dir", str(index_dir), "--no-freshness", "--json")
    )
    chunks = status.get("chunks")
    print(f"index {root}: {chunks} chunks", flush=True)
    corpus = root.parent if root.name == ".ragloom" else root

    writer = IssueWriter(corpus)
    issues = writer.issues()
    bad = [i for i, t in enumerate(issues) if not looks_like_issue(t)]
    if bad:
        raise SystemExit(f"not read as issues: {bad}")
    if any(looks_like_issue(q) for q in CONTROL):
        raise SystemExit("a control question reads as an issue")
    sizes = sorted(len(t) for t in issues)
    print(
        f"{len(issues)} issues, {sizes[0]}-{sizes[-1]} characters (median "
        f"{statistics.median(sizes):.0f}); {sum(s > 8000 for s in sizes)} over 8 kB; "
        f"{len(CONTROL)} control questions",
        flush=True,
    )
    if args.issues_out:
        args.issues_out.parent.mkdir(parents=True, exist_ok=True)
        with args.issues_out.open("w", encoding="utf-8") as fh:
            for t in issues:
                fh.write(json.dumps({"query": t}) + "\n")

    index = ragloom.open(root, embedder=HashingEmbedder(384))
    retriever = index.retriever
    hashing = retriever.embedder
    memo = MemoEmbedder(hashing)

    def searcher(arm: str) -> Callable[[str], Any]:
        return lambda q: retriever.search(q, top_k=10, strategy=arm)

    searches = {a: searcher(a) for a in ARMS}
    report: dict[str, Any] = {"chunks": chunks, "load_before": load(), "rounds": args.rounds}
    print(report["load_before"], flush=True)
    rows: list[dict[str, Any]] = []
    parts: dict[str, dict[str, list[Any]]] = {}

    retriever._embedder = memo  # bench only: swap the query embedder in place
    s, pq_, last = interleaved(issues, searches, args.rounds)
    rows.append(summary("search, embedding excluded (issues)", s, pq_))
    parts["issues, embedding excluded"] = last
    same = sum(
        [h.id for h in x.hits] == [h.id for h in y.hits]
        for x, y in zip(last[ARMS[0]], last[ARMS[1]], strict=True)
    )
    report["same_top10"] = same
    s, pq_, last = interleaved(issues, {a: searcher(a) for a in SINGLE}, args.rounds)
    rows.append(summary("search, embedding excluded, no sub-queries (issues)", s, pq_))
    parts["issues, embedding excluded, no sub-queries"] = last
    s, pq_, last = interleaved(list(CONTROL), searches, args.rounds)
    rows.append(summary("search, embedding excluded (control)", s, pq_))
    retriever._embedder = hashing
    s, pq_, last = interleaved(issues, searches, args.rounds)
    rows.append(summary("search, hashing embedder (issues)", s, pq_))

    qcs = {a: parse_search_spec(a).query_config for a in ARMS}
    symbols = retriever.symbol_table()
    procs = {a: (lambda q, c=qcs[a]: process_query(q, c, symbols)) for a in ARMS}
    s, pq_, last = interleaved(issues, procs, args.rounds)
    rows.append(summary("process_query alone (issues)", s, pq_))
    dense_texts = {a: [p.dense_text for p in last[a]] for a in ARMS}
    reading = interleaved(issues, {"read": read_issue}, args.rounds)[0]["read"]
    report["issue_reading_alone"] = {"p50": statistics.median(reading), "p95": pct(reading, 0.95)}

    if not args.no_model:
        from ragloom.embed.registry import load_embedder

        model = load_embedder("default")
        model.embed_query("warm up")
        pos = {t: i for i, t in enumerate(issues)}
        embeds = {a: (lambda q, a=a: model.embed_query(dense_texts[a][pos[q]])) for a in ARMS}
        s, pq_, _ = interleaved(issues, embeds, max(5, args.rounds // 2))
        rows.append(summary("query embedding, MiniLM (issues)", s, pq_))

    report["load_after"] = load()
    report["rows"] = rows
    print(f"\n{chunks} chunks; top-10 identical in both arms for {same} of {len(issues)} issues")
    print(report["load_before"], "->", report["load_after"], "\n")
    print(table(rows))
    r = report["issue_reading_alone"]
    print(
        "\nissue reading alone (looks_like_issue + parse_issue + issue_signals + bm25_terms + "
        f"dense_text): p50 {r['p50']:.2f} ms, p95 {r['p95']:.2f} ms"
    )
    for label, res in parts.items():
        print(f"\np50 of SearchResult.timings_ms (ms), {label}:\n")
        print(parts_table(res))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    if args.profile:
        retriever._embedder = memo  # bench only: swap the query embedder in place
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(max(3, args.rounds // 4)):
            for q in issues:
                retriever.search(q, top_k=10, strategy=ARMS[0])
        prof.disable()
        prof.dump_stats(str(args.profile))
        print()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
