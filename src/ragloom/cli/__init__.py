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

from ragloom.cli.adapt import adapt_cmd
from ragloom.cli.app import INTERNAL_ERROR_EXIT, cli
from ragloom.cli.bench import bench_cmd, bench_scale_cmd
from ragloom.cli.cache import cache_group
from ragloom.cli.config import config_group
from ragloom.cli.eval import eval_cmd, eval_data_cmd
from ragloom.cli.feedback import feedback_group
from ragloom.cli.graph import callees_cmd, callers_cmd, defs_cmd, map_cmd, refs_cmd
from ragloom.cli.index import index_cmd, status_cmd
from ragloom.cli.query import context_cmd, search_cmd
from ragloom.cli.serve import serve_cmd
from ragloom.cli.watch import watch_cmd

__all__ = ["INTERNAL_ERROR_EXIT", "cli", "main"]

# Registered in the order of the former single-module CLI (click lists them sorted anyway).
for _command in (
    index_cmd,
    search_cmd,
    status_cmd,
    bench_cmd,
    context_cmd,
    eval_cmd,
    eval_data_cmd,
    bench_scale_cmd,
    config_group,
    serve_cmd,
    feedback_group,
    adapt_cmd,
    watch_cmd,
    cache_group,
    defs_cmd,
    refs_cmd,
    callers_cmd,
    callees_cmd,
    map_cmd,
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="ragloom")
