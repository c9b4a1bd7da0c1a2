"""Serving benchmark: concurrent ``/context`` requests against ``ragloom serve http``.

    python scripts/bench_serving.py INDEX_PATH [--concurrency 100] [--rounds 5]
        [--queries FILE] [--out docs/benchmarks.md] [--json-out FILE]

See :mod:`ragloom.bench.serving` for the phases and what is measured.
"""

from __future__ import annotations

import sys

from ragloom.bench.serving import main

if __name__ == "__main__":
    sys.exit(main())
