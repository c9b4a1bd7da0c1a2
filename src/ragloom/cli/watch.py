"""``ragloom watch``: follow a work tree and keep its index fresh (:mod:`ragloom.watch`)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from types import FrameType

import click

from ragloom.cli.app import handle_errors

__all__ = ["watch_cmd"]


@click.command("watch")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--index-dir", type=click.Path(path_type=Path), help="Index folder [PATH/.ragloom].")
@click.option(
    "--model",
    "model",
    default=None,
    help="Embedding model, as for `index` (default: the one the index was built with).",
)
@click.option(
    "--debounce-ms",
    type=click.IntRange(min=0, max=60_000),
    default=200,
    show_default=True,
    help="Quiet time that closes a batch of changes (a burst is held 2 s at most, or ten "
    "windows when that is longer).",
)
@click.option(
    "--rescan-s",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Quiet seconds between checks for changes no event reported (0: never).",
)
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Skip files above this size (bytes).",
)
@click.option(
    "--no-history",
    is_flag=True,
    help="Do not sync the git history (ranking then uses no change history).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per batch (a line each).")
@click.option(
    "--max-batches",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after N batches (the update at start not counted).",
)
@handle_errors
def watch_cmd(
    path: Path,
    index_dir: Path | None,
    model: str | None,
    debounce_ms: int,
    rescan_s: float,
    max_file_bytes: int | None,
    no_history: bool,
    as_json: bool,
    max_batches: int | None,
) -> None:
    """Index PATH, then follow it and apply each batch of changes as it happens.

    Prints one line per applied batch (changed, added and removed files, chunks, embeddings,
    seconds, generation). Changes inside `.git`, the index folder or ignored files trigger
    nothing. Ctrl-C stops after the batch in progress (exit 0; Ctrl-C again stops at once,
    the batch then not applied); a deleted PATH stops with an error.
    """
    import ragloom
    from ragloom.embed.registry import DEFAULT_MODEL_NAME
    from ragloom.ingest.walker import DEFAULT_MAX_FILE_BYTES
    from ragloom.paths import existing_dir, path_exists
    from ragloom.watch import BatchReport, Watcher

    path = existing_dir(path)
    if index_dir is not None:
        path_exists(index_dir)
    idx = ragloom.Index(path, index_dir or path / ".ragloom", embedder=model)

    def on_batch(report: BatchReport) -> None:
        if as_json:
            click.echo(json.dumps(report.to_dict(), sort_keys=False))
        else:
            click.echo(report.line())

    def on_message(message: str) -> None:
        click.echo(message, err=True)

    if not idx.exists:  # a mistyped --index-dir started a whole index without a word
        on_message(
            f"no index at {idx.index_dir}: creating one of {path} first "
            f"(model {model or DEFAULT_MODEL_NAME}; Ctrl-C to stop)"
        )

    watcher = Watcher(
        idx,
        debounce_ms=debounce_ms,
        rescan_s=rescan_s,
        history=not no_history,
        max_file_bytes=max_file_bytes or DEFAULT_MAX_FILE_BYTES,
        max_batches=max_batches,
        on_batch=on_batch,
        on_message=on_message,
        on_ready=lambda: on_message(f"watching {idx.root} (Ctrl-C to stop)"),
    )

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        if watcher.stopping:  # the second Ctrl-C: now (the index is crash-safe)
            raise KeyboardInterrupt
        watcher.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        watcher.run()
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        idx.close()
    if watcher.stopping:
        on_message("stopped")
