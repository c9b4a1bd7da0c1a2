"""The ``ragloom`` command group and what every command shares: error handling (one line on
stderr, an exit code defined by the error class), JSON output, progress bars, opening an index.

Errors are one clear line on stderr and a non-zero exit code defined by the error class
(:mod:`ragloom.errors`); ``--json`` outputs are a stable contract: fields are only added.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from ragloom._version import __version__
from ragloom.errors import RagError

__all__ = [
    "INTERNAL_ERROR_EXIT",
    "RagloomGroup",
    "cli",
    "echo_json",
    "handle_errors",
    "open_for_read",
    "progress_bars",
]

F = TypeVar("F", bound=Callable[..., Any])


def echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


@contextmanager
def progress_bars(enabled: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per pipeline stage, on stderr so stdout stays parseable."""
    if not enabled:
        yield lambda *_: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    labels = {
        "scan": "scan files",
        "parse": "parse",
        "bm25": "bm25",
        "bm25-files": "file bm25",
        "embed": "embed",
        "vectors": "vectors",
        "graph": "graph",
        "content": "file bytes",
    }
    with Progress(
        TextColumn("{task.description:<11}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=max(total, 1))
            bar.update(tasks[stage], completed=done if total else 1, total=max(total, 1))

        yield update


INTERNAL_ERROR_EXIT = 70
"""Exit code of an unexpected exception (EX_SOFTWARE from sysexits.h)."""


PIPE_CLOSED_EXIT = 141
"""Exit status when stdout was closed by its reader: what a shell reports for a program a
SIGPIPE ended (128 + 13)."""


def handle_errors(fn: F) -> F:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RagError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            # the reader went away (`ragloom search ... | head -2`): nothing to report; what is
            # still buffered for stdout goes nowhere, so the exit does not fail on it again
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(PIPE_CLOSED_EXIT)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            # A bug, not bad input: one line by default, the traceback with -v (and in the log).
            logging.getLogger("ragloom.cli").info("internal error", exc_info=True)
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (run `ragloom -v COMMAND ...` for the traceback; "
                "please report it)",
                err=True,
            )
            sys.exit(INTERNAL_ERROR_EXIT)

    return wrapper  # type: ignore[return-value]


def open_for_read(index_dir: str | None, embedder: str | None = None) -> Any:
    import ragloom

    if index_dir is None:
        return ragloom.Index.at(ragloom.find_index_dir(), embedder=embedder)
    idx = ragloom.open(index_dir, embedder=embedder)
    if not idx.exists and Path(index_dir).is_dir():
        from ragloom.errors import IndexNotFoundError

        idx.close()
        # `--index-dir` names the index folder itself (or a root holding `.ragloom`): the
        # command that creates an index there says both
        raise IndexNotFoundError(
            f"no index in {index_dir} (nor in {Path(index_dir) / '.ragloom'}); create one with "
            f"`ragloom index PATH --index-dir {index_dir}`"
        )
    return idx


class RagloomGroup(click.Group):
    """The command group: a usage error is one ``error:`` line too, like every other failure.

    click's own format (usage, a hint, a blank line, ``Error: ...``) is four lines; scripts and
    agents reading stderr get one line, with the command's ``--help`` named in it. The exit
    code stays click's (2 for a usage error).

    Commands named in :attr:`lazy_commands` are imported the first time they are asked for
    (:meth:`get_command`), so one command pays for its own imports only.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, tuple[str, str]] = {}
        """Command name -> (module, attribute) of a command not imported yet."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self.lazy_commands.get(cmd_name)
        if where is not None and cmd_name not in self.commands:
            command = getattr(importlib.import_module(where[0]), where[1])
            if not isinstance(command, click.Command):
                raise TypeError(f"{where[0]}.{where[1]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests from the commands imported so far: every command, as before
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def all_commands(self) -> dict[str, click.Command]:
        """Every command, imported (tests and documentation read them all)."""
        with click.Context(self) as ctx:
            for name in self.list_commands(ctx):
                self.get_command(ctx, name)
        return dict(self.commands)

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        for i, arg in enumerate(args or ()):
            if isinstance(arg, str) and "\x00" in arg:  # execve cannot pass one; main() can
                click.echo(f"error: argument {i + 1} contains a NUL byte", err=True)
                sys.exit(2)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else prog_name or "ragloom"
            message = " ".join(exc.format_message().split())
            click.echo(f"error: {message} (see '{where} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except RagError as exc:  # a command without @handle_errors: the same one line
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=RagloomGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ragloom")
@click.option("-v", "--verbose", count=True, help="More logging (structured, on stderr).")
def cli(verbose: int) -> None:
    """ragloom: the best context for a question about a codebase, inside a token budget."""
    from ragloom.logs import configure_logging

    configure_logging(logging.WARNING - 10 * verbose)
