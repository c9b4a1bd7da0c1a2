"""``ragloom config show`` and the configured defaults of ``search`` / ``context``, through the
real command line (a subprocess with its own environment), against a real ragloom.toml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "cli-s3cr3t-token"


def ragloom(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("RAGLOOM_")}
    return subprocess.run(
        [sys.executable, "-m", "ragloom.cli", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small indexed repository (hashing embedder: no model load)."""
    root = tmp_path_factory.mktemp("config-cli") / "repo"
    (root / "pkg").mkdir(parents=True)
    for i in range(5):
        (root / "pkg" / f"codec{i}.py").write_text(
            f'def decode_payload_{i}(raw):\n    """Decode payload number {i}."""\n'
            "    return raw.decode()\n",
            encoding="utf-8",
        )
    proc = ragloom("index", str(root), "--model", "hashing:32", "--no-progress", cwd=root)
    assert proc.returncode == 0, proc.stderr
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.ragloom.cache]\nmax_entries = 50\nttl_s = 1\n',
        encoding="utf-8",
    )
    (root / "ragloom.toml").write_text(
        '[ranking]\nstrategy = "sparse"\ntop_k = 2\n\n[assembly]\nformat = "markdown"\n'
        "context_top_k = 1\n\n[cache]\nttl_s = 42\n",
        encoding="utf-8",
    )
    return root


def test_config_show_json_reports_values_sources_and_files(repo: Path) -> None:
    env = {"RAGLOOM_SERVER__PORT": "9123", "RAGLOOM_API_TOKEN": SECRET}
    proc = ragloom("config", "show", "--json", cwd=repo / "pkg", env=env)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout
    out = json.loads(proc.stdout)
    assert set(out) >= {"settings", "sources", "files"}
    s, src = out["settings"], out["sources"]
    assert s["ranking"] == {"strategy": "sparse", "top_k": 2}
    assert s["cache"]["ttl_s"] == 42.0 and src["cache.ttl_s"] == "ragloom.toml"
    assert s["cache"]["max_entries"] == 50 and src["cache.max_entries"] == "pyproject.toml"
    assert s["server"]["port"] == 9123 and src["server.port"] == "env:RAGLOOM_SERVER__PORT"
    assert s["server"]["api_token"] == "**********"
    assert src["server.api_token"] == "env:RAGLOOM_API_TOKEN"
    assert src["assembly.budget"] == "default"
    assert len(src) == sum(len(section) for section in s.values())
    assert out["files"] == [str(repo / "pyproject.toml"), str(repo / "ragloom.toml")]


def test_config_show_table_and_an_index_folder_as_path(repo: Path) -> None:
    proc = ragloom(
        "config", "show", str(repo / ".ragloom"), cwd=repo.parent, env={"RAGLOOM_API_TOKEN": SECRET}
    )
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
        for line in proc.stdout.splitlines()
        if line.count("│") == 4
    }
    assert rows["ranking.strategy"] == ["sparse", "ragloom.toml"]
    assert rows["cache.max_entries"] == ["50", "pyproject.toml"]
    assert rows["server.api_token"] == ["**********", "env:RAGLOOM_API_TOKEN"]
    assert rows["assembly.budget"] == ["8000", "default"]


def test_a_bad_configuration_is_one_error_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "ragloom.toml").write_text("[cache]\nttl = 60\n", encoding="utf-8")
    proc = ragloom("config", "show", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: ragloom.toml: cache.ttl: unknown key (did you mean cache.ttl_s?)"
    ]
    proc = ragloom("config", "show", "--json", cwd=tmp_path, env={"RAGLOOM_RANKING__TOP_K": "0"})
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr == (  # first error in model order, the count of the others
        "error: env:RAGLOOM_RANKING__TOP_K: ranking.top_k: "
        "Input should be greater than or equal to 1 (+1 more)\n"
    )


def test_search_and_context_take_their_defaults_from_the_configuration(repo: Path) -> None:
    proc = ragloom("search", "decode payload", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 2  # ranking.top_k = 2
    proc = ragloom(
        "search",
        "decode payload",
        "--json",
        "-k",
        "4",
        cwd=repo,
        env={"RAGLOOM_RANKING__TOP_K": "3"},
    )
    assert len(json.loads(proc.stdout)) == 4  # an explicit flag beats file and environment
    proc = ragloom(
        "search", "decode payload", "--json", cwd=repo, env={"RAGLOOM_RANKING__TOP_K": "3"}
    )
    assert len(json.loads(proc.stdout)) == 3  # the environment beats the file

    proc = ragloom("context", "decode payload", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    ctx = json.loads(proc.stdout)
    assert ctx["format"] == "markdown" and len(ctx["parts"]) == 1
    proc = ragloom("context", "decode payload", "--json", "--format", "xml", "-k", "3", cwd=repo)
    ctx = json.loads(proc.stdout)
    assert ctx["format"] == "xml" and len(ctx["parts"]) >= 2

    proc = ragloom("search", "x", cwd=repo, env={"RAGLOOM_RANKING__STRATEGY": "nope"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: env:RAGLOOM_RANKING__STRATEGY: ranking.strategy: ")
    assert len(proc.stderr.splitlines()) == 1
