"""The ``ragloom`` command line: one module per command group, over the public API.

- :mod:`ragloom.cli.app`: the group, error handling, ``--json`` and progress helpers;
- :mod:`ragloom.cli.index`: ``index``, ``status``;
- :mod:`ragloom.cli.query`: ``search``, ``context``;
- :mod:`ragloom.cli.eval`: ``eval``, ``eval-data``;
- :mod:`ragloom.cli.bench`: ``bench``, ``bench-scale``;
- :mod:`ragloom.cli.config`: ``config show``;
- :mod:`ragloom.cli.serve`: ``serve http``, ``serve mcp``;
- :mod:`ragloom.cli.feedback`: ``feedback add``, ``feedback used``, ``feedback stats``;
- :mod:`ragloom.cli.adapt`: ``adapt`` (the learned ranking fitted to this repository);
- :mod:`ragloom.cli.watch`: ``watch`` (follow a work tree, keep its index fresh);
- :mod:`ragloom.cli.cache`: ``cache stats``, ``cache prune``, ``cache clear`` (the vector cache).

The commands import the layers below; nothing imports the CLI back.
"""

from __future__ import annotations

from ragloom.cli.app import INTERNAL_ERROR_EXIT, cli

__all__ = ["INTERNAL_ERROR_EXIT", "cli", "main"]

# Each command is imported when it is run (or listed by ``--help``), so ``ragloom search``
# does not import the servers, the benchmarks and the evaluation (0.38 s -> 0.2 s of imports
# a command, docs/benchmarks.md "A command's start-up").
cli.lazy_commands.update(
    {
        "index": ("ragloom.cli.index", "index_cmd"),
        "search": ("ragloom.cli.query", "search_cmd"),
        "status": ("ragloom.cli.index", "status_cmd"),
        "bench": ("ragloom.cli.bench", "bench_cmd"),
        "context": ("ragloom.cli.query", "context_cmd"),
        "eval": ("ragloom.cli.eval", "eval_cmd"),
        "eval-data": ("ragloom.cli.eval", "eval_data_cmd"),
        "bench-scale": ("ragloom.cli.bench", "bench_scale_cmd"),
        "config": ("ragloom.cli.config", "config_group"),
        "serve": ("ragloom.cli.serve", "serve_cmd"),
        "feedback": ("ragloom.cli.feedback", "feedback_group"),
        "adapt": ("ragloom.cli.adapt", "adapt_cmd"),
        "watch": ("ragloom.cli.watch", "watch_cmd"),
        "cache": ("ragloom.cli.cache", "cache_group"),
        "defs": ("ragloom.cli.graph", "defs_cmd"),
        "refs": ("ragloom.cli.graph", "refs_cmd"),
        "callers": ("ragloom.cli.graph", "callers_cmd"),
        "callees": ("ragloom.cli.graph", "callees_cmd"),
        "map": ("ragloom.cli.graph", "map_cmd"),
    }
)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="ragloom")
