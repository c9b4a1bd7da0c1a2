"""Evaluation reports: a Markdown summary and a self-contained HTML page with charts.

The Markdown needs nothing beyond the standard library. The charts (metric per strategy, recall
at k, latency distribution) are matplotlib PNGs written next to the HTML page; matplotlib is an
optional extra (``pip install ragloom[eval]``) imported only here, with the ``Agg`` backend so
no display is needed. Without it the Markdown is still written and the HTML page says which
extra draws the charts.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragloom.eval.runner import MRR_K, NDCG_K, PAIRED_METRICS, RECALL_KS, EvalReport
from ragloom.eval.stats import format_difference

__all__ = [
    "ReportFiles",
    "paired_lines",
    "paired_table",
    "render_markdown",
    "summary_table",
    "write_report",
]

CHART_METRICS: tuple[str, ...] = ("recall@10", f"mrr@{MRR_K}", f"ndcg@{NDCG_K}", f"sym_mrr@{MRR_K}")
"""Metrics of the per-strategy bar chart: the issue's headline quality figures."""
CHART_DPI = 110
"""Resolution of the PNGs: sharp on a laptop screen, about 50 kB per chart."""
MATPLOTLIB_HINT = "pip install 'ragloom[eval]' (matplotlib)"
"""What to install for charts; printed in the HTML page when matplotlib is missing."""


@dataclass(slots=True)
class ReportFiles:
    """Paths :func:`write_report` produced (charts empty when matplotlib is missing)."""

    markdown: Path
    html: Path
    charts: list[Path] = field(default_factory=list)
    charts_note: str | None = None


def _fmt(key: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if key.startswith("diversity"):
        return f"{value:.2f}"
    return f"{value:.3f}"


def summary_table(report: EvalReport) -> tuple[list[str], list[list[str]]]:
    """Header and rows of formatted cells: one row per metric, one column per strategy.

    Metrics go down and strategies across so that the table fits a terminal however many
    metrics there are. An unavailable strategy's column says so in every row.
    """
    header = ["metric", *report.strategies]
    rows: list[list[str]] = []
    for key in report.metric_names():
        row = [key]
        for name in report.strategies:
            s = report.summaries[name]
            row.append(_fmt(key, s.metrics.get(key)) if s.available else "unavailable")
        rows.append(row)
    for label, key in (("latency p50 ms", "p50"), ("latency p95 ms", "p95")):
        row = [label]
        for name in report.strategies:
            s = report.summaries[name]
            lat = s.latency_ms.get(key)
            row.append("unavailable" if not s.available else f"{lat:.1f}" if lat else "n/a")
        rows.append(row)
    rows.append(
        ["errors"]
        + [
            str(report.summaries[n].errors) if report.summaries[n].available else "unavailable"
            for n in report.strategies
        ]
    )
    return header, rows


def render_markdown(
    report: EvalReport, *, title: str = "ragloom evaluation", command: str | None = None
) -> str:
    """A Markdown summary: settings, a metric-by-strategy table, notes."""
    header, rows = summary_table(report)
    lines = [f"# {title}", ""]
    lines.append(
        f"{report.dataset_size} queries, top_k={report.top_k}, "
        f"{len(report.strategies)} strategies, {report.seconds:.1f} s, "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    )
    if command:
        lines += ["", f"Command: `{command}`"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [
        "",
        "recall@k, MRR, nDCG: file level; sym_*: symbol level (queries with gold symbols); "
        "diversity: distinct files in the top 10; duplication: share of the top 10 repeating "
        "an earlier hit; coverage@B: share of gold files in the context assembled at B tokens; "
        "latency: wall-clock per search, after one warm-up query.",
    ]
    lines += paired_lines(report)
    if report.notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def paired_table(report: EvalReport, sep: str = " ") -> tuple[list[str], list[list[str]]]:
    """Header and rows of every strategy against the reference, question by question: the
    mean difference and its 95 % paired bootstrap interval (after ``sep``) per metric of
    :data:`~ragloom.eval.runner.PAIRED_METRICS` measured; no rows without a comparison."""
    per: dict[str, dict[str, dict[str, float]]] = (
        report.paired.get("metrics", {}) if report.paired else {}
    )
    keys = [k for k in PAIRED_METRICS if any(k in v for v in per.values())]
    if not keys:
        return [], []
    rows = [
        [name, *(format_difference(d, sep=sep) if (d := diffs.get(k)) else "-" for k in keys)]
        for name, diffs in per.items()
    ]
    return ["strategy", *keys], rows


def paired_lines(report: EvalReport) -> list[str]:
    """:func:`paired_table` as Markdown lines (none without a comparison)."""
    header, rows = paired_table(report)
    if not rows:
        return []
    ref = report.paired["reference"]
    lines = ["", f"Against `{ref}`, question by question (mean difference [95 % CI]):", ""]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---|" * (len(header) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _charts(report: EvalReport, out: Path) -> list[Path]:
    """Draw the three charts; raises ImportError when matplotlib is missing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in report.strategies if report.summaries[n].available]
    paths: list[Path] = []

    metrics = [k for k in CHART_METRICS if k in report.metric_names()]
    fig: Any
    ax: Any
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        vals = [report.summaries[name].metrics.get(k) or 0.0 for k in metrics]
        ax.bar([j + i * width for j in range(len(metrics))], vals, width, label=name)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(metrics))], metrics)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean over queries")
    ax.set_title("Quality per strategy")
    ax.legend(fontsize="small")
    fig.tight_layout()
    paths.append(out / "metrics.png")
    fig.savefig(paths[-1], dpi=CHART_DPI)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    ks = [k for k in RECALL_KS if k <= report.top_k]
    for name in names:
        s = report.summaries[name]
        ax.plot(ks, [s.metrics.get(f"recall@{k}") or 0.0 for k in ks], marker="o", label=name)
    ax.set_xticks(ks)
    ax.set_xlabel("k (hits)")
    ax.set_ylabel("file recall@k")
    ax.set_ylim(0, 1)
    ax.set_title("Recall at k")
    ax.legend(fontsize="small")
    fig.tight_layout()
    paths.append(out / "recall_at_k.png")
    fig.savefig(paths[-1], dpi=CHART_DPI)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    samples = [report.summaries[n].latencies or [0.0] for n in names]
    ax.boxplot(samples, showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_yscale("log")
    ax.set_ylabel("latency per query (ms, log scale)")
    ax.set_title("Search latency")
    fig.tight_layout()
    paths.append(out / "latency.png")
    fig.savefig(paths[-1], dpi=CHART_DPI)
    plt.close(fig)
    return paths


def _html_page(
    report: EvalReport, markdown_title: str, charts: list[Path], note: str | None
) -> str:
    esc = html.escape

    def table(header: list[str], rows: list[list[str]]) -> list[str]:
        head = "<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header)
        body = ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows]
        return [head + "</tr></thead>", "<tbody>", *body, "</tbody></table>"]

    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(markdown_title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;"
        "text-align:right}td:first-child,th:first-child{text-align:left}"
        "img{max-width:100%;margin:1em 0}</style></head><body>",
        f"<h1>{esc(markdown_title)}</h1>",
        f"<p>{report.dataset_size} queries, top_k={report.top_k}, {report.seconds:.1f} s.</p>",
        *table(*summary_table(report)),
    ]
    paired_header, paired_rows = paired_table(report)
    if paired_rows:
        ref = esc(str(report.paired["reference"]))
        parts.append(f"<h2>Against {ref}, question by question</h2>")
        parts.append("<p>Mean difference [95 % paired bootstrap interval].</p>")
        parts += table(paired_header, paired_rows)
    if charts:
        parts += [f'<img src="{esc(p.name)}" alt="{esc(p.stem)}">' for p in charts]
    if note:
        parts.append(f"<p><em>{esc(note)}</em></p>")
    if report.notes:
        parts.append(
            "<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in report.notes) + "</ul>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(
    report: EvalReport,
    out_dir: str | os.PathLike[str],
    *,
    title: str = "ragloom evaluation",
    command: str | None = None,
) -> ReportFiles:
    """Write ``summary.md``, ``report.html`` and (with matplotlib) the chart PNGs to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md_path = out / "summary.md"
    md_path.write_text(render_markdown(report, title=title, command=command), encoding="utf-8")
    charts: list[Path] = []
    note: str | None = None
    try:
        charts = _charts(report, out)
    except ImportError:
        note = f"Charts need matplotlib: {MATPLOTLIB_HINT}."
    html_path = out / "report.html"
    html_path.write_text(_html_page(report, title, charts, note), encoding="utf-8")
    return ReportFiles(markdown=md_path, html=html_path, charts=charts, charts_note=note)
