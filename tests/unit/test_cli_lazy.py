"""The CLI imports a command when it is run: ``ragloom search`` does not pay for the servers,
the benchmarks or the evaluation (docs/benchmarks.md, "A command's start-up")."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from ragloom.cli import cli
from ragloom.cli.app import RagloomGroup


def test_every_lazy_command_resolves_to_its_name() -> None:
    commands = cli.all_commands()
    assert set(commands) == set(cli.lazy_commands)
    for name, command in commands.items():
        assert isinstance(command, click.Command)
        assert command.name == name


def test_a_command_run_imports_only_its_own_module() -> None:
    probe = (
        "import sys\n"
        "from ragloom.cli import main\n"
        "try:\n"
        "    main(['search', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ['ragloom.server.engine', 'ragloom.bench.peers', 'ragloom.cli.eval',\n"
        "         'ragloom.cli.serve', 'ragloom.cli.bench']\n"
        "print('loaded:' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "loaded:"


def test_a_lazy_entry_that_is_not_a_command_is_a_clear_error() -> None:
    group = RagloomGroup(name="g")
    group.lazy_commands["bad"] = ("ragloom.cli.app", "INTERNAL_ERROR_EXIT")
    with click.Context(group) as ctx, pytest.raises(TypeError, match="not a click command"):
        group.get_command(ctx, "bad")
    assert group.get_command(click.Context(group), "missing") is None


def test_a_mistyped_command_is_answered_with_the_commands_it_may_mean() -> None:
    """click suggests from the commands imported so far; with commands imported when run,
    `ragloom serch` lost its "Did you mean" (a user trial)."""
    out = subprocess.run(
        [sys.executable, "-m", "ragloom.cli", "serch", "x"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "Did you mean" in out.stderr and "'search'" in out.stderr, out.stderr
