"""Several processes opening a new ``feedback.sqlite`` at the same moment (the workers of
``serve http --workers N``, each with its own store) all get it: SQLite answers "database is
locked" at once, without its busy wait, to one of them while another switches the new file to
WAL, and opening retries that (before, about one open in sixteen failed in this race; the
two-worker HTTP test failed on it under load)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPENER = """
import sys, time
from pathlib import Path
from ragloom.server.feedback import FeedbackStore
base, start, n = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
failed = []
for i in range(n):
    folder = base / f"index{i}"
    folder.mkdir(parents=True, exist_ok=True)
    while time.time() < start + i * 0.03:
        pass
    try:
        FeedbackStore(folder).close()
    except Exception as exc:
        failed.append(str(exc))
print(len(failed), failed[:1])
"""


def test_processes_opening_a_new_feedback_file_at_once_all_get_it(tmp_path: Path) -> None:
    start = time.time() + 2.0  # every process started and its imports done
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(tmp_path), str(start), "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [out.split(" ", 1)[0] for out, _ in outs] == ["0", "0", "0"], outs
