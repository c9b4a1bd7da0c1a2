"""Fuzz the command line: argv drawn from the real commands and options plus garbage values.

Every run must end with exit code 0 or one of the documented codes (``ragloom.errors`` and 2
for usage errors), never the internal-error code 70, never a traceback; and a failure prints
exactly one ``error: ...`` line on stderr. The command set and each option's type come from
the click group itself, so a new command or option is fuzzed without touching this file.

Commands that would run for minutes on valid input (``bench``, ``bench-scale``, ``eval-data``;
``watch`` runs until stopped)
are fuzzed with at least one value click rejects before the command body runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import ragloom.cli as cli_module
from ragloom import errors
from tests.fuzzing import fuzz_settings

GROUP = cli_module.cli
COMMANDS = GROUP.all_commands()
SLOW_COMMANDS = frozenset({"bench", "bench-scale", "eval-data", "watch"})
"""Commands whose body takes minutes (or, for ``watch``, runs until stopped): only argv that
fails in parsing is generated."""

DOCUMENTED_EXIT_CODES = frozenset(
    {0, 2, 130}
    | {
        getattr(errors, name).exit_code
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
    }
)

GARBAGE = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "-1",
            "0",
            "99999999999999999999",
            "nan",
            "--",
            "-",
            "--json",
            "$(rm -rf /)",
            "`id`",
            "; ls",
            "a\x00b",
            "\n",
            "é" * 300,
            "../../..",
            "hybrid+no-nothing",
            "hybrid+raw+seed",
            "dense",
            "xml",
            "o200k",
            "hashing:0",
            "hashing:-3",
            "hashing:abc",
        ]
    ),
)


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny indexed repository (hashing embedder: no model load) and a work folder."""
    home = tmp_path_factory.mktemp("cli-fuzz")
    repo = home / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "codec.py").write_text(
        'def decode_payload(raw):\n    """Decode a payload."""\n    return raw.decode()\n'
    )
    (repo / "pkg" / "server.go").write_text(
        "package pkg\n\nfunc ServeHTTP() int {\n\treturn 200\n}\n"
    )
    (repo / "README.md").write_text("# Demo\n\nHow payloads are decoded.\n")
    dataset = home / "questions.jsonl"
    dataset.write_text(
        '{"id": "q1", "query": "decode a payload", "gold_files": ["pkg/codec.py"]}\nnot json\n'
    )
    runner = CliRunner()
    result = runner.invoke(
        GROUP, ["index", str(repo), "--model", "hashing:32", "--json", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    yield home
    shutil.rmtree(home, ignore_errors=True)


def _value_for(param: click.Parameter, home: Path) -> st.SearchStrategy[str]:
    """Plausible values for one option or argument, mixed with garbage."""
    repo = str(home / "repo")
    index = str(home / "repo" / ".ragloom")
    typ = param.type
    plausible: st.SearchStrategy[str]
    if isinstance(typ, click.Choice):
        plausible = st.sampled_from([str(c) for c in typ.choices])
    elif isinstance(typ, click.types.IntParamType):
        plausible = st.integers(min_value=-5, max_value=50_000).map(str)
    elif isinstance(typ, click.types.FloatParamType):
        plausible = st.floats(allow_nan=True, allow_infinity=True).map(str)
    elif isinstance(typ, click.Path) or (param.name or "").endswith(("dir", "path", "dataset")):
        plausible = st.sampled_from(
            [
                repo,
                index,
                str(home / "questions.jsonl"),
                str(home / "missing"),
                str(home / "repo" / "pkg" / "codec.py"),
                "missing-relative",
                ".",
            ]
        )
    else:
        plausible = st.sampled_from(["decode payload", "ServeHTTP", "hybrid", "sparse", "x"])
    return st.one_of(plausible, plausible, GARBAGE)


def _safe_path_value(value: str, home: Path) -> str:
    """Keep fuzzed paths inside the fuzz folder: nothing outside it is indexed or written.

    Commands run in ``home/work``; a relative value such as ``../../..`` would climb out of
    the sandbox (and once indexed the whole pytest temp folder), so every path is checked
    after normalisation against ``home``.
    """
    if "\x00" in value:
        return value  # refused before any file system access
    if value.startswith("~"):
        return str(home / "outside" / value.lstrip("~/"))
    where = os.path.normpath(os.path.join(home / "work", value))
    if where == str(home) or where.startswith(str(home) + os.sep):
        return value
    return str(home / "outside" / value.strip("/").replace("..", "up"))


@st.composite
def argv_for(draw: st.DrawFn, home: Path) -> list[str]:
    name = draw(st.sampled_from(sorted(COMMANDS)))
    command = COMMANDS[name]
    argv: list[str] = [name]
    options = [p for p in command.params if isinstance(p, click.Option)]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    for opt in draw(st.lists(st.sampled_from(options), max_size=4)) if options else []:
        flag = draw(st.sampled_from(opt.opts))
        if opt.is_flag or opt.count:
            argv.append(flag)
            continue
        value = draw(_value_for(opt, home))
        argv += [flag, value]
    for arg in arguments:
        if draw(st.booleans()) or arg.required:
            argv.append(draw(_value_for(arg, home)))
    if draw(st.integers(0, 5)) == 0:  # stray extra tokens
        argv.append(draw(GARBAGE))
    if name in SLOW_COMMANDS:
        # Right after the name, before any "--": parsing fails and the body never runs.
        argv.insert(1, "--no-such-option-fuzz")
    # Any token may end up as a path (a stray token becomes `index`'s PATH): check them all.
    argv = [
        a if i == 0 or a.startswith("-") else _safe_path_value(a, home) for i, a in enumerate(argv)
    ]
    if name == "index" and not any(a.startswith("--model") for a in argv):
        argv += ["--model", "hashing:32"]  # fast embedder for fuzzed index runs
    return argv


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _check(argv: list[str], home: Path) -> None:
    runner = CliRunner()
    work = home / "work"
    work.mkdir(exist_ok=True)
    with _cwd(work):
        result = runner.invoke(GROUP, argv, catch_exceptions=True)
    where = f"ragloom {argv!r}: exit {result.exit_code}\nstderr: {result.stderr!r}"
    # An exception other than SystemExit escaped the command: a traceback for the user.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{where}\nuncaught {result.exception!r}") from result.exception
    assert "Traceback" not in result.output + result.stderr, where
    assert result.exit_code != cli_module.INTERNAL_ERROR_EXIT, where
    assert result.exit_code in DOCUMENTED_EXIT_CODES, where
    if result.exit_code != 0:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        errors_lines = [ln for ln in lines if ln.lower().startswith("error:")]
        assert len(errors_lines) == 1, where


@fuzz_settings(40)
@given(data=st.data())
def test_cli_fuzz(fuzz_home: Path, data: st.DataObject) -> None:
    _check(data.draw(argv_for(fuzz_home), label="argv"), fuzz_home)


@pytest.mark.parametrize(
    "argv",
    [
        ["search"],
        ["search", "x", "--top-k", "abc"],
        ["search", "x", "--top-k", "0"],
        ["search", "x", "--strategy", "nope"],
        ["context", "x", "--budget", "-5", "--index-dir", "repo/.ragloom"],
        ["context", "x", "--counter", "nope", "--index-dir", "repo/.ragloom"],
        ["status", "--index-dir", "no-such-dir-xyz"],
        ["index", "no-such-dir-xyz", "--json"],
        ["eval", "--dataset", "questions.jsonl", "--index-dir", "repo/.ragloom"],
        ["no-such-command"],
        ["--no-such-flag"],
    ],
)
def test_cli_bad_input_is_one_typed_line(fuzz_home: Path, argv: list[str]) -> None:
    runner = CliRunner()
    with _cwd(fuzz_home):
        result = runner.invoke(GROUP, argv, catch_exceptions=True)
    _check_result = f"{argv}: exit {result.exit_code}, stderr {result.stderr!r}"
    assert result.exit_code not in (0, cli_module.INTERNAL_ERROR_EXIT), _check_result
    assert result.exit_code in DOCUMENTED_EXIT_CODES, _check_result
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), _check_result


def test_cli_shell_metacharacters_are_just_text(fuzz_home: Path) -> None:
    runner = CliRunner()
    query = "$(rm -rf /); `id` | cat /etc/passwd > x && echo *"
    with _cwd(fuzz_home):
        result = runner.invoke(GROUP, ["search", query, "--index-dir", "repo/.ragloom", "--json"])
    assert result.exit_code == 0, result.stderr
    assert isinstance(json.loads(result.stdout), list)
    assert not (fuzz_home / "x").exists()
