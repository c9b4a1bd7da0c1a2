"""Run the fuzz targets as a long campaign and record the counts in docs/fuzzing.md.

    python scripts/fuzz_campaign.py [--examples 10000] [--out docs/fuzzing.md]

Every ``tests/**/test_*_fuzz.py`` target runs with ``RAGLOOM_FUZZ_EXAMPLES`` cases (the default
test run uses a few dozen). The script reads hypothesis' statistics (passing, failing and
invalid examples per target), counts tracebacks in the output, and rewrites the section of
``docs/fuzzing.md`` between the campaign markers. Exit status is pytest's.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- fuzz-campaign:begin -->"
END = "<!-- fuzz-campaign:end -->"
_TARGET = re.compile(r"^(tests/\S+::\S+?)(?:\[.*\])?:\s*$")
_COUNTS = re.compile(
    r"(\d+) passing(?: examples?)?, (\d+) failing(?: examples?)?,(?: and)? (\d+) invalid"
)


def parse_statistics(output: str) -> dict[str, tuple[int, int, int]]:
    """Per target: (passing, failing, invalid) examples summed over hypothesis phases."""
    stats: dict[str, tuple[int, int, int]] = {}
    target: str | None = None
    for line in output.splitlines():
        m = _TARGET.match(line.strip())
        if m:
            target = m.group(1)
            continue
        c = _COUNTS.search(line)
        if c and target is not None:
            old = stats.get(target, (0, 0, 0))
            stats[target] = (
                old[0] + int(c.group(1)),
                old[1] + int(c.group(2)),
                old[2] + int(c.group(3)),
            )
    return stats


def render(
    stats: dict[str, tuple[int, int, int]],
    examples: int,
    seconds: float,
    tracebacks: int,
    returncode: int,
) -> str:
    day = time.strftime("%Y-%m-%d")
    lines = [
        BEGIN,
        f"Last campaign: {day}, `make fuzz` (`RAGLOOM_FUZZ_EXAMPLES={examples}`), "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, {seconds / 60:.1f} minutes; pytest exit {returncode}, "
        f"{tracebacks} tracebacks in the output.",
        "",
        "| target | passing | failing | invalid |",
        "|---|---:|---:|---:|",
    ]
    for target, (ok, bad, invalid) in sorted(stats.items()):
        lines.append(f"| `{target}` | {ok:,} | {bad:,} | {invalid:,} |")
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "fuzzing.md")
    ap.add_argument("--log", type=Path, default=ROOT / "fuzz-out" / "campaign.log")
    args = ap.parse_args(argv)
    targets = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*_fuzz.py"))
    if not targets:
        print("no fuzz targets found", file=sys.stderr)
        return 2
    env = {**os.environ, "RAGLOOM_FUZZ_EXAMPLES": str(args.examples)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--timeout=0",
        "--hypothesis-show-statistics",
        *targets,
    ]
    print("running", " ".join(cmd), file=sys.stderr)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    output = proc.stdout + proc.stderr
    args.log.parent.mkdir(parents=True, exist_ok=True)
    args.log.write_text(output)
    stats = parse_statistics(output)
    tracebacks = output.count("Traceback (most recent call last)")
    section = render(stats, args.examples, seconds, tracebacks, proc.returncode)
    text = args.out.read_text() if args.out.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    args.out.write_text(text)
    print(section)
    print(f"log: {args.log}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
