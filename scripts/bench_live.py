"""Live-index benchmark (issue 23): time from a file write to the first answer of a warm
``ragloom serve http`` that shows it, p50/p95 over 50+ edits (add a function, change a body,
rename a symbol, delete a file).

    python scripts/bench_live.py ROOT... [--edits 52] [--out docs/benchmarks.md] [--json-out F]

See :mod:`ragloom.bench.live` for what is measured.
"""

from __future__ import annotations

import sys

from ragloom.bench.live import main

if __name__ == "__main__":
    sys.exit(main())
