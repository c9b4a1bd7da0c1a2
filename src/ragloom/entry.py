"""The ``ragloom`` console script: a Ctrl-C while the commands are still being imported (the
first ~0.3 s) ends the command quietly, as one later does ("interrupted", exit 130), instead
of printing the interpreter's traceback. Nothing heavy is imported before the guard."""

from __future__ import annotations

import sys

INTERRUPTED_EXIT = 130


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (:func:`ragloom.cli.main` once imported)."""
    try:
        from ragloom.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(INTERRUPTED_EXIT) from None
    cli_main(argv)
