"""``ragloom config show``: every effective setting, its value and the layer it came from.

The layers (later wins) are the built-in defaults, ``[tool.ragloom]`` in ``pyproject.toml``,
``ragloom.toml``, ``RAGLOOM_*`` environment variables and explicit overrides; see
:mod:`ragloom.settings` and docs/configuration.md. Secrets (``server.api_token``) are masked.
A bad configuration is one ``error:`` line naming the file or variable and the key path, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ragloom.cli.app import echo_json, handle_errors

__all__ = ["config_group", "settings_root"]


def settings_root(path: Path | None) -> Path:
    """The folder whose configuration applies: PATH as a repository root, the root of an index
    folder given as PATH, else the nearest configured folder at or above the current one."""
    from ragloom.settings import find_config_root

    if path is None:
        return find_config_root()
    from ragloom.paths import existing_dir
    from ragloom.retrieve.reader import DB_NAME

    folder = existing_dir(path)
    if (folder / DB_NAME).exists():  # an index folder: its repository's configuration
        import ragloom

        return ragloom.Index.at(folder).root
    return folder.resolve()


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@click.group("config")
def config_group() -> None:
    """Inspect ragloom's configuration (ragloom.toml, [tool.ragloom], RAGLOOM_* variables)."""


@config_group.command("show")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"settings": {...}, "sources": {"dotted.key": source}, "files": [...]}.',
)
@handle_errors
def show_cmd(path: Path | None, as_json: bool) -> None:
    """Print every effective setting of the repository at PATH [nearest configured folder],
    with where it came from: default, pyproject.toml, ragloom.toml, env:VAR or override."""
    from ragloom.settings import load_settings

    loaded = load_settings(settings_root(path))
    if as_json:
        echo_json({**loaded.to_dict(), "root": str(loaded.root)})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ragloom configuration of {loaded.root}", title_justify="left")
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source", no_wrap=True)
    for key, value in loaded.settings.flat().items():
        table.add_row(key, _shown(value), loaded.sources[key])
    console = Console(soft_wrap=False, highlight=False)
    console.print(table)
    if loaded.files:
        console.print("files: " + ", ".join(str(p) for p in loaded.files), soft_wrap=True)
    else:
        console.print("files: none (defaults and environment only)")
