"""Fuzz the HTTP API with schemathesis against its own OpenAPI schema; record the result.

    python scripts/apifuzz.py [--examples 200] [--seed 12] [--out docs/http-api.md]

What it does, end to end, with nothing mocked:

1. builds a small real index (two stdlib packages, embedded with the packaged model) in a
   temporary folder;
2. starts ``ragloom serve http`` on a free loopback port with a bearer token;
3. runs ``schemathesis run`` (4.x) on ``/openapi.json``: every phase (examples from the schema,
   coverage of the boundaries, random fuzzing, stateful sequences along the schema's links),
   positive and negative data, at most ``--examples`` cases per operation and phase, with the
   checks ``not_a_server_error`` (no 5xx), ``response_schema_conformance``,
   ``status_code_conformance`` and ``content_type_conformance``;
4. counts the server's logged internal errors (a 5xx the checks would also see, or a traceback
   behind a 4xx);
5. rewrites the section of ``--out`` between the apifuzz markers with the counts, the failures
   and schemathesis' own JSON report summary.

Exit status: 0 when schemathesis found nothing and the server logged no internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- apifuzz:begin -->"
END = "<!-- apifuzz:end -->"
CHECKS = (
    "not_a_server_error",
    "response_schema_conformance",
    "status_code_conformance",
    "content_type_conformance",
)
PACKAGES = ("json", "textwrap")


def build_index(work: Path) -> Path:
    """A small real repository and its index (embeddings included)."""
    import ragloom

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    repo = work / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    for pkg in PACKAGES:
        src = stdlib / pkg
        if src.is_dir():
            shutil.copytree(src, repo / pkg, ignore=shutil.ignore_patterns("__pycache__", "test*"))
        else:
            shutil.copy2(stdlib / f"{pkg}.py", repo / f"{pkg}.py")
    stats = ragloom.open(repo).index()
    print(f"apifuzz: indexed {stats.chunks_total} chunks of {', '.join(PACKAGES)}", flush=True)
    return repo


def start_server(repo: Path, token: str, log_path: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOM_")}
    env["RAGLOOM_API_TOKEN"] = token
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragloom.cli", "serve", "http", str(repo), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"on (http://\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"apifuzz: the server did not start: {line!r}; see {log_path}")
    print(f"apifuzz: server at {m.group(1)}", flush=True)
    return proc, m.group(1)


def run_schemathesis(
    url: str, token: str, examples: int, seed: int, report: Path, workers: str
) -> tuple[int, float]:
    exe = Path(sys.executable).with_name("schemathesis")
    cmd = [
        str(exe if exe.exists() else "schemathesis"),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--checks",
        ",".join(CHECKS),
        "--workers",
        workers,
        "--request-timeout",
        "30",
        "--report",
        "json,har",
        "--report-json-path",
        str(report),
        "--report-har-path",
        str(report.with_suffix(".har")),
        "--no-color",
    ]
    shown = [("Authorization: Bearer ***" if c.startswith("Authorization") else c) for c in cmd]
    print("apifuzz: " + " ".join(shown[1:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=report.parent, check=False)
    return proc.returncode, time.perf_counter() - t0


def stop_server(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The counts worth keeping from schemathesis' JSON run report."""
    warnings = {k: v for k, v in (report.get("warnings") or {}).items() if v}
    return {
        "version": report.get("schemathesis_version"),
        "complete": report.get("complete"),
        "exit_code": report.get("exit_code"),
        "running_time_s": report.get("running_time"),
        "operations": report.get("operations", {}),
        "phases": {k: v.get("status") for k, v in (report.get("phases") or {}).items()},
        "test_cases": report.get("test_cases", {}),
        "failures": report.get("failures", []),
        "errors": report.get("errors", []),
        "warnings": warnings,
    }


def statuses_by_operation(har_path: Path, schema: dict[str, Any]) -> dict[str, Counter[int]]:
    """Every request schemathesis sent (its HAR log), counted by operation and status; methods
    a path does not have (schemathesis probes them all) are counted in one row."""
    paths = list(schema["paths"])
    documented = {f"{m.upper()} {p}" for p, ops in schema["paths"].items() for m in ops}
    templates = [
        (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(p)) + "$"), p)
        for p in sorted(paths, key=lambda p: ("{" in p, p))  # literal paths match first
    ]
    out: dict[str, Counter[int]] = {}
    for entry in json.loads(har_path.read_text())["log"]["entries"]:
        method = entry["request"]["method"]
        path = urlsplit(entry["request"]["url"]).path
        name = f"{method} " + next((t for rx, t in templates if rx.match(path)), "(other paths)")
        if name not in documented:
            name = "(undocumented methods, all paths)"
        out.setdefault(name, Counter())[int(entry["response"]["status"])] += 1
    return dict(sorted(out.items(), key=lambda kv: (kv[0].startswith("("), kv[0])))


def internal_errors(log_path: Path) -> list[str]:
    text = log_path.read_text(errors="replace")
    return [
        line
        for line in text.splitlines()
        if "internal error on" in line or line.startswith("Traceback")
    ]


def render(
    s: dict[str, Any],
    statuses: dict[str, Counter[int]],
    examples: int,
    seed: int,
    seconds: float,
    server_errors: list[str],
    chunks: str,
) -> str:
    tc = s["test_cases"]
    ops = s["operations"]
    day = time.strftime("%Y-%m-%d")
    verdict = (
        "no failures"
        if not s["failures"] and not s["errors"] and not server_errors
        else "FAILURES (below)"
    )
    lines = [
        BEGIN,
        f"Last run {day}: `make apifuzz` (`python scripts/apifuzz.py --examples {examples} "
        f"--seed {seed}`), schemathesis {s['version']}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, against the real `ragloom serve http` (bearer token set) on "
        f"{chunks}. Checks: {', '.join(f'`{c}`' for c in CHECKS)}; phases: "
        + ", ".join(f"{k} ({v})" for k, v in s["phases"].items())
        + f"; positive and negative data; at most {examples} cases per operation and phase.",
        "",
        f"**Result: {verdict}.** {tc.get('generated', 0)} test cases generated over "
        f"{ops.get('tested', 0)}/{ops.get('total', 0)} operations in {seconds:.0f} s; "
        f"{tc.get('with_failures', 0)} with failures ({tc.get('unique_failures', 0)} unique), "
        f"{tc.get('errored', 0)} errored; {len(server_errors)} internal errors in the server "
        "log; schemathesis exit code "
        f"{s['exit_code']}.",
        "",
        "Responses by operation and status (every request schemathesis sent, from its HAR log):",
        "",
        "| operation | requests | 2xx | 4xx | 5xx | statuses |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for op, counts in statuses.items():
        by_class = Counter(code // 100 for code in counts.elements())
        detail = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items()))
        lines.append(
            f"| `{op}` | {sum(counts.values())} | {by_class[2]} | {by_class[4]} | "
            f"{by_class[5]} | {detail} |"
        )
    lines.append("")
    if s["failures"]:
        lines.append("Failures:")
        lines.append("")
        for f in s["failures"]:
            ops_txt = ", ".join(f"`{o}`" for o in f.get("operations", []))
            lines.append(
                f"- {f.get('code')} {f.get('title')}: {f.get('count')} ({ops_txt})".rstrip()
            )
        lines.append("")
    if s["errors"]:
        lines.append(f"Errors: {json.dumps(s['errors'])[:2000]}")
        lines.append("")
    if server_errors:
        lines.append("Server log (internal errors):")
        lines.append("")
        lines += [f"    {e}" for e in server_errors[:20]]
        lines.append("")
    if s["warnings"]:
        lines.append(
            "schemathesis warnings: "
            + "; ".join(
                f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in s["warnings"].items()
            )
        )
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_section(out: Path, section: str) -> None:
    text = out.read_text() if out.exists() else "# HTTP API\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n## Schemathesis run\n\n" + section + "\n"
    out.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--examples", type=int, default=200, help="max cases per operation/phase")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--workers", default="1", help="schemathesis workers (1..64 or auto)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "http-api.md")
    ap.add_argument("--work-dir", type=Path, help="keep the index, logs and report here")
    args = ap.parse_args(argv)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ragloom-apifuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    repo = build_index(work / "corpus") if not (work / "corpus" / "repo").exists() else None
    repo = repo or work / "corpus" / "repo"
    import ragloom

    chunks = ragloom.open(repo).status(freshness=False).chunks
    token = secrets.token_urlsafe(24)
    log_path = work / "server.log"
    report_path = work / "schemathesis-report.json"
    report_path.unlink(missing_ok=True)
    report_path.with_suffix(".har").unlink(missing_ok=True)
    server, url = start_server(repo, token, log_path)
    try:
        import httpx

        schema = httpx.get(
            f"{url}/openapi.json", headers={"Authorization": f"Bearer {token}"}, timeout=30
        ).json()
        code, seconds = run_schemathesis(
            url, token, args.examples, args.seed, report_path, args.workers
        )
    finally:
        server_rc = stop_server(server)
    if not report_path.exists():
        print(f"apifuzz: schemathesis wrote no report (exit {code})", file=sys.stderr)
        return code or 1
    summary = summarize(json.loads(report_path.read_text()))
    errors = internal_errors(log_path)
    har = report_path.with_suffix(".har")
    statuses = statuses_by_operation(har, schema) if har.exists() else {}
    section = render(
        summary,
        statuses,
        args.examples,
        args.seed,
        seconds,
        errors,
        f"a {chunks}-chunk index of {' and '.join(PACKAGES)}",
    )
    write_section(args.out, section)
    print(f"apifuzz: wrote {args.out} (server exit {server_rc}; report {report_path})")
    five_xx = sum(n for c in statuses.values() for code, n in c.items() if code >= 500)
    failed = bool(summary["failures"] or summary["errors"] or errors or code or five_xx)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
