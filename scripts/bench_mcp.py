"""MCP benchmark: warm ``get_context`` through ``ragloom serve mcp`` over stdio vs in-process.

    python scripts/bench_mcp.py [--repo .] [--queries 200] [--warmup 20]
        [--out docs/benchmarks.md] [--out docs/mcp.md] [--json-out FILE]

See :mod:`ragloom.bench.mcp_latency` for the phases and what is measured.
"""

from __future__ import annotations

import sys

from ragloom.bench.mcp_latency import main

if __name__ == "__main__":
    sys.exit(main())
