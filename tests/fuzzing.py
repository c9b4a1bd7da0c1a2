"""Shared settings of the fuzz tests (hypothesis).

The default test run keeps every fuzz target small (tens of cases) so ``make test`` stays fast;
``make fuzz`` sets ``RAGLOOM_FUZZ_EXAMPLES`` (10,000) for a long campaign. Each fuzz test reads
its budget through :func:`fuzz_settings`, so one variable scales them all.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["fuzz_examples", "fuzz_settings"]


def fuzz_examples(default: int) -> int:
    """Cases per fuzz target: ``RAGLOOM_FUZZ_EXAMPLES`` when set, else ``default``."""
    raw = os.environ.get("RAGLOOM_FUZZ_EXAMPLES", "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"RAGLOOM_FUZZ_EXAMPLES must be an integer, got {raw!r}") from exc
    return max(1, value)


def fuzz_settings(default: int) -> settings:
    """Hypothesis settings of one fuzz target: no deadline (I/O and model loads vary)."""
    return settings(
        max_examples=fuzz_examples(default),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
        derandomize=False,
        print_blob=True,
    )
