"""Build the real-code corpora that ``ragloom bench-scale`` measures (bench-only, reproducible).

    .venv/bin/python scripts/build_bench_corpora.py --out bench-out/corpora [--only c10k]

Two folders under ``--out``, each then indexed with ``ragloom index`` (embeddings included):

* ``c10k`` (about 10k chunks): the docstring-free corpus of ``ragloom eval-data`` (so the
  docstring dataset's gold files are in it and the peers' quality can be scored) plus
  ``extra/``: more standard-library packages and modules, without test folders.
* ``c100k`` (about 100k chunks): the whole standard library of the running Python (as
  ``ragloom bench`` copies it, its test suite included) plus
  ``site-packages/`` copies of packages installed next to ragloom (mypy, pip, rich, anyio), without
  test folders and without any copy of a package kept for an outside check (click, flask,
  requests, httpx: pip vendors requests; click was the fourth package until the eighth session).

Every chunk is real code with a real embedding; nothing is synthetic. The corpus sizes depend a
little on the Python version and on the installed packages, so ``bench-scale`` reports the exact
chunk count of every index it measures.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ragloom.eval.symbolset import RESERVED_PACKAGES

IGNORE = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "*.so", "site-packages", "test", "tests", "idle_test", "testing",
    *sorted(RESERVED_PACKAGES),
)  # fmt: skip
STDLIB_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "site-packages")

EXTRA_PACKAGES = (
    "multiprocessing", "re", "sqlite3", "tkinter", "ctypes", "wsgiref", "dbm", "tomllib",
    "zoneinfo",
)  # fmt: skip
EXTRA_MODULES = (
    "argparse", "pathlib", "shutil", "subprocess", "tempfile", "gzip", "socket", "pickle",
    "base64", "datetime", "smtplib", "zipfile", "tarfile", "typing", "pydoc", "inspect",
    "dataclasses", "functools", "enum", "ssl", "threading",
)  # fmt: skip
SITE_PACKAGES = ("mypy", "pip", "rich", "anyio")
"""Installed packages added to the standard library for the 100k corpus (in this order)."""


def stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def ragloom(*args: str) -> None:
    exe = Path(sys.executable).with_name("ragloom")
    subprocess.run([str(exe), *args], check=True)


def copy_named(source: Path, dest: Path, names: tuple[str, ...]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, dest / name, ignore=IGNORE, symlinks=True)
        elif (source / f"{name}.py").is_file():
            shutil.copy2(source / f"{name}.py", dest / f"{name}.py")
        else:
            print(f"skipped {name}: not in {source}", file=sys.stderr)


def build_c10k(out: Path) -> Path:
    dest = out / "c10k"
    data = out / "eval-data"
    if not (data / "docstring.jsonl").is_file():
        ragloom("eval-data", "--out", str(data))
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(data / "corpus", dest, ignore=shutil.ignore_patterns(".ragloom"))
    copy_named(stdlib(), dest / "extra", EXTRA_PACKAGES + EXTRA_MODULES)
    return dest


def build_c100k(out: Path) -> Path:
    dest = out / "c100k"
    if dest.exists():
        shutil.rmtree(dest)
    # The whole standard library as ``ragloom bench`` copies it (its test suite included).
    shutil.copytree(stdlib(), dest, ignore=STDLIB_IGNORE, symlinks=True)
    copy_named(site_packages(), dest / "site-packages", SITE_PACKAGES)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench-out/corpora"))
    ap.add_argument("--only", choices=("c10k", "c100k"), action="append")
    ap.add_argument("--no-index", action="store_true", help="copy the files only")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or ("c10k", "c100k"):
        dest = build_c10k(args.out) if name == "c10k" else build_c100k(args.out)
        print(f"{name}: {dest}", flush=True)
        if not args.no_index:
            ragloom("index", str(dest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
