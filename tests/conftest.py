from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest_plugins = ["tests.pg_fixture"]
"""The PostgreSQL server fixtures (``pg_server``, ``pg_dsn``): registered once here so every
test module shares one server per session."""

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(autouse=True)
def _own_vector_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test gets an empty vector cache of its own (ragloom.embed.cache), never the user's:
    what one test embedded cannot change what another counts."""
    monkeypatch.setenv("RAGLOOM_VECTOR_CACHE", str(tmp_path_factory.mktemp("vcache") / "v.sqlite"))


@pytest.fixture(scope="session")
def stdlib() -> Path:
    return STDLIB


def copy_stdlib_packages(dest: Path, packages: list[str]) -> Path:
    """Copy some stdlib packages (sources only) into ``dest``: a small real corpus."""
    dest.mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        src = STDLIB / pkg
        if src.is_dir():
            shutil.copytree(
                src,
                dest / pkg,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests", "test"),
            )
        else:
            shutil.copy2(STDLIB / f"{pkg}.py", dest / f"{pkg}.py")
    return dest


def run_cli(
    *args: str, cwd: Path | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "ragloom.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"ragloom {' '.join(args)} failed: {proc.stderr}")
    return proc
