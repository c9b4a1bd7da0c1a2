from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.pg_fixture"]
"""The PostgreSQL server fixtures (``pg_server``, ``pg_dsn``): registered once here so every
test module shares one server per session."""

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="session", autouse=True)
def _session_vector_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The vector cache of module- and session-scoped fixtures, which are set up before any
    test's own (below): an empty one for the run, never the user's. With the user's, a fixture
    that indexes stdlib code took vectors another tool had embedded in other batches (the
    packaged int8 model's vectors depend a little on their batch: cosine 0.991-0.998), and two
    backends indexed by one fixture no longer held the same vectors."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGLOOM_VECTOR_CACHE", str(tmp_path_factory.mktemp("vcache") / "v.sqlite"))
        yield


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
