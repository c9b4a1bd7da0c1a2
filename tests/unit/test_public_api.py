"""The public surface stays honest: __all__ matches what is exported, and every CLI command
is documented in the README."""

from __future__ import annotations

from pathlib import Path

import ragloom
from ragloom import errors
from ragloom.cli import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def test_all_names_resolve() -> None:
    for name in ragloom.__all__:
        assert getattr(ragloom, name) is not None, name


def test_every_error_is_exported_and_rooted() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.RagError)
        assert name in ragloom.__all__
    codes = [getattr(errors, n).exit_code for n in errors.__all__ if n != "RagError"]
    assert len(codes) == len(set(codes)), "exit codes must be distinct"


def test_every_cli_command_is_documented() -> None:
    text = README.read_text()
    for name in cli.all_commands():
        assert f"ragloom {name}" in text, f"`ragloom {name}` missing from README"
