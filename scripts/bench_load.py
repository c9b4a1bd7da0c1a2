"""Sustained-load benchmark (issue 25): open-loop ``POST /context`` (or ``/search``) requests
at fixed rates against ``ragloom serve http``, every question new.

    python scripts/bench_load.py INDEX_ROOT [--url URL] [--rates 5,10,20,40,80] [--seconds 20]
        [--route /context|/search] [--p95-ms 2000] [--write [--out docs/benchmarks.md]]
        [--json] [--json-out FILE]

Without ``--url`` the server is started on INDEX_ROOT (``--no-watch --port 0``) and stopped at
the end. See :mod:`ragloom.bench.load` for what is measured.
"""

from __future__ import annotations

import sys

from ragloom.bench.load import main

if __name__ == "__main__":
    sys.exit(main())
