"""``ragloom eval`` and ``ragloom eval-data``: score retrieval on a dataset, and build the
datasets from the standard library (:mod:`ragloom.eval` does the work)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ragloom.cli.app import echo_json, handle_errors, open_for_read, progress_bars
from ragloom.eval.datasets import DEFAULT_MAX_QUERIES, DEFAULT_PACKAGES
from ragloom.eval.runner import DEFAULT_STRATEGIES

__all__ = ["eval_cmd", "eval_data_cmd"]


def _print_table(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from ragloom.eval.report import paired_table, summary_table

    header, rows = summary_table(report)
    table = Table(title=f"ragloom eval: {report.dataset_size} queries, top_k={report.top_k}")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    header, rows = paired_table(report, sep="\n")
    if rows:
        paired = Table(
            title=f"against {report.paired['reference']}, question by question "
            "(mean difference [95 % CI])"
        )
        paired.add_column(header[0], no_wrap=True, min_width=max(len(r[0]) for r in rows))
        for h in header[1:]:
            paired.add_column(h, justify="right")
        for row in rows:
            paired.add_row(*row)
        console.print(paired)
    for note in report.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)


@click.command("eval")
@click.option(
    "--dataset",
    "dataset_path",
    required=True,
    type=click.Path(path_type=Path),
    help="JSON Lines dataset: {id, query, gold_files, gold_symbols?} per line.",
)
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    help=f"Strategy to evaluate (repeatable) [{', '.join(DEFAULT_STRATEGIES)}].",
)
@click.option(
    "-k",
    "--top-k",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Hits per query.",
)
@click.option(
    "--runs-out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write one JSON line per query and strategy: id, strategy, files, hits.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write summary.md, report.html and chart PNGs to this folder.",
)
@click.option("--no-assembly", is_flag=True, help="Skip assembly coverage (faster).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@handle_errors
def eval_cmd(
    dataset_path: Path,
    index_dir: Path | None,
    strategies: tuple[str, ...],
    top_k: int,
    runs_out: Path | None,
    report_dir: Path | None,
    no_assembly: bool,
    as_json: bool,
    no_progress: bool,
) -> None:
    """Score retrieval on a dataset, every strategy side by side."""
    from ragloom.errors import ConfigError, InputError
    from ragloom.eval.dataset import load_dataset
    from ragloom.eval.report import write_report
    from ragloom.eval.runner import ASSEMBLY_BUDGETS, run_eval, write_runs

    dataset = load_dataset(dataset_path)
    if runs_out is not None and not runs_out.parent.is_dir():  # before the run, not after it
        raise InputError(f"--runs-out {runs_out}: the folder {runs_out.parent} does not exist")
    idx = open_for_read(str(index_dir) if index_dir else None)
    names = [s.strip().lower() for s in strategies] or list(DEFAULT_STRATEGIES)
    show = not no_progress and sys.stderr.isatty()
    try:
        with progress_bars(show) as progress:
            report = run_eval(
                idx,
                dataset,
                names,
                top_k=top_k,
                progress=progress,
                assembly_budgets=() if no_assembly else ASSEMBLY_BUDGETS,
            )
    finally:
        idx.close()
    if not any(s.available for s in report.summaries.values()):
        raise ConfigError("no strategy could be evaluated: " + "; ".join(report.notes))
    if runs_out is not None:
        write_runs(report, runs_out)
    files = None
    if report_dir is not None:
        args = sys.argv[1:]
        command = "ragloom " + " ".join(args) if args else None
        files = write_report(report, report_dir, command=command)
    if as_json:
        out = report.to_dict()
        if files is not None:
            out["report"] = {"markdown": str(files.markdown), "html": str(files.html)}
        echo_json(out)
        return
    _print_table(report)
    if files is not None:
        click.echo(f"report: {files.html}")
        if files.charts_note:
            click.echo(files.charts_note, err=True)
    if runs_out is not None:
        click.echo(f"runs: {runs_out}")


@click.command("eval-data")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Output folder: corpus/, docstring.jsonl, identifier.jsonl.",
)
@click.option(
    "--max-queries",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_QUERIES,
    show_default=True,
    help="Cap per dataset (seeded sample).",
)
@click.option(
    "--packages",
    default=",".join(DEFAULT_PACKAGES),
    show_default=True,
    help="Comma-separated stdlib packages or modules to use.",
)
@click.option("--json", "as_json", is_flag=True, help="Print counts and paths as JSON.")
@handle_errors
def eval_data_cmd(out_dir: Path, max_queries: int, packages: str, as_json: bool) -> None:
    """Build the docstring-to-code and identifier datasets from the standard library."""
    from ragloom.eval.datasets import build_datasets

    pkgs = [p.strip() for p in packages.split(",") if p.strip()]
    built = build_datasets(out_dir, pkgs, max_queries)
    if as_json:
        echo_json(built.to_dict())
        return
    click.echo(
        f"corpus {built.corpus_dir}: {built.files} files, docstrings removed; "
        f"{len(built.docstring)} docstring queries -> {built.docstring_path}; "
        f"{len(built.identifier)} identifier queries -> {built.identifier_path}"
    )
    if built.skipped_files:
        click.echo(f"{len(built.skipped_files)} files did not parse and give no query", err=True)
    click.echo("next:")
    click.echo(f"  ragloom index {built.corpus_dir}")
    click.echo(
        f"  ragloom eval --dataset {built.docstring_path} "
        f"--index-dir {built.corpus_dir / '.ragloom'} --report {Path(out_dir) / 'report'}"
    )
