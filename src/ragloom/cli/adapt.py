"""``ragloom adapt``: fit the learned ranking model to this repository's history and feedback,
show what it changed, or undo what feedback changed (issue 22; :mod:`ragloom.learn.adapt`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ragloom.cli.app import echo_json, handle_errors, progress_bars
from ragloom.cli.backend import backend_options, open_read
from ragloom.errors import ConfigError

__all__ = ["adapt_cmd"]

SHOW_FEATURES = 8
"""Features listed by ``--show``."""


@click.command("adapt")
@click.option(
    "--index-dir", type=click.Path(path_type=Path), help="Index folder [nearest .ragloom]."
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Seconds of mining before fitting on what there is [25].",
)
@click.option(
    "--max-examples", type=click.IntRange(min=1), default=None, help="History questions [200]."
)
@click.option("--no-feedback", is_flag=True, help="Fit on the history only.")
@click.option("--show", is_flag=True, help="Show the repository model and what feedback changed.")
@click.option("--reset-feedback", is_flag=True, help="Undo what feedback changed.")
@click.option("--remove", is_flag=True, help="Delete the repository model (rank with the global).")
@click.option("--dry-run", is_flag=True, help="Fit and report, but keep the model in use as it is.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@backend_options
@handle_errors
def adapt_cmd(
    index_dir: Path | None,
    time_limit: float | None,
    max_examples: int | None,
    no_feedback: bool,
    show: bool,
    reset_feedback: bool,
    remove: bool,
    dry_run: bool,
    as_json: bool,
    no_progress: bool,
    backend: str | None,
    dsn: str | None,
    repo: str | None,
) -> None:
    """Adapt the learned ranking (``+learned``) to this repository.

    Asks the index the repository's own past commit messages (each with the history as it
    stood before that commit) and the answers its users rated, and fits a bounded correction of
    the shipped model on them; ``status`` then reports ``ranking_model: repository``. With
    ``--backend postgres`` the model is kept in the database, where every server ranks with it.
    """
    from ragloom.learn import adapt as learn
    from ragloom.retrieve.adapt import FEEDBACK_FULL

    if sum((show, reset_feedback, remove, dry_run)) > 1:
        raise ConfigError("--show, --reset-feedback, --remove and --dry-run go one at a time")
    idx = open_read(index_dir, backend, dsn, repo)
    try:
        if show or reset_feedback or remove:
            out = _model_change(idx, reset_feedback, remove)
            if as_json:
                echo_json(out)
            else:
                _print_model(out, reset_feedback, remove)
            return
        show_bar = not no_progress and sys.stderr.isatty()
        with progress_bars(show_bar) as bar:
            report, _ = learn.adapt_index(
                idx,
                time_limit=time_limit if time_limit is not None else learn.TIME_LIMIT_S,
                max_examples=max_examples or learn.MAX_EXAMPLES,
                feedback=not no_feedback,
                write=not dry_run,
                progress=lambda i, n: bar("adapt", i, n),
            )
    finally:
        idx.close()
    if as_json:
        echo_json(report.to_dict())
        return
    would = "" if report.written else "would be "
    if report.status == "fitted":
        mrr = report.train_mrr
        click.echo(
            f"{would}adapted: {report.examples} history questions ({report.asked} asked), "
            f"{report.feedback_answers} rated answers"
            + (
                f" (step {report.feedback_step:.3g}, whole from {FEEDBACK_FULL})"
                if report.feedback_used
                else " (too few to use)"
            )
            + "; "
            f"MRR@10 on them {mrr.get('global', 0):.3f} -> {mrr.get('adapted', 0):.3f}"
            + _validation_text(report.validation_mrr)
            + "; "
            f"model {report.digest} in {report.seconds:.1f}s"
            + ("" if report.written else " (dry run: the model in use is unchanged)")
        )
    elif report.written:
        click.echo(f"not adapted: {report.reason}; ranking goes on with the shipped global model")
    else:
        click.echo(f"would not be adapted: {report.reason} (dry run: nothing changed)")


def _model_change(idx: Any, reset_feedback: bool, remove: bool) -> dict[str, object]:
    """``--show``, ``--reset-feedback`` or ``--remove`` on the repository model of ``idx``."""
    from ragloom.learn import adapt as learn
    from ragloom.retrieve.adapt import describe, repository_model_state

    store = idx.ranking_model_store()
    if remove:
        return {"removed": store.remove(), "ranking_model": {"model": "global"}}
    set_aside = None
    if reset_feedback:
        model = learn.reset_feedback(idx)
    else:  # as `status` shows it: a model that cannot be used is named, with why
        model, set_aside = repository_model_state(store)
    out: dict[str, object] = {"ranking_model": describe(model, set_aside)}
    if model is not None:
        out["feedback_changes"] = dict(model.feedback_changes()[:SHOW_FEATURES])
        out["history_changes"] = {
            name: float(v)
            for name, v in sorted(
                zip(model.names, model.history, strict=True), key=lambda t: -abs(t[1])
            )[:SHOW_FEATURES]
        }
    return out


def _validation_text(figures: dict[str, float]) -> str:
    """The newest history questions' MRR@10, global and adapted (fitted without them), as the
    summary line shows them; a check, not a gate (docs/ranking.md, "Per-repository
    adaptation")."""
    adapted = [v for k, v in figures.items() if k != "global"]
    if "global" not in figures or not adapted:
        return ""
    return f", on the newest (held out) {figures['global']:.3f} -> {adapted[0]:.3f}"


def _print_model(out: dict[str, object], reset: bool, remove: bool) -> None:
    rm = out["ranking_model"]
    assert isinstance(rm, dict)
    if remove:
        click.echo("repository model removed" if out["removed"] else "no repository model")
        return
    if rm.get("set_aside"):
        click.echo(f"global model; the repository model is set aside: {rm['set_aside']}")
        return
    if rm.get("model") != "repository":
        click.echo("no repository model: ranking uses the shipped global model")
        return
    head = "feedback reset; " if reset else ""
    click.echo(
        f"{head}repository model {rm['digest']} over global {rm['base_digest']}: "
        f"{rm['examples']} history questions, {rm['feedback_answers']} rated answers "
        f"(feedback {'in use' if rm['feedback_used'] else 'not in use'})"
    )
    for title, key in (
        ("history changed", "history_changes"),
        ("feedback changed", "feedback_changes"),
    ):
        changes = out.get(key)
        if isinstance(changes, dict) and any(changes.values()):
            shown = ", ".join(f"{k} {v:+.3f}" for k, v in changes.items() if v)
            click.echo(f"{title}: {shown}")
