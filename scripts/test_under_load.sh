#!/bin/bash
# `make test` in a fresh clone, RUNS times, with HOGS CPU-bound processes beside it (issue 25
# item 3: the default test run must pass on a machine whose cores are busy with other work).
#   scripts/test_under_load.sh [REV] [RUNS] [HOGS]    (defaults: HEAD, 5, 2)
# Prints one line per run (exit code, seconds, pytest's summary) and exits non-zero if any failed.
set -u
REPO=$(git rev-parse --show-toplevel)
REV=$(git -C "$REPO" rev-parse "${1:-HEAD}")
RUNS=${2:-5}
HOGS=${3:-2}
WORK=$(mktemp -d /tmp/ragloom-under-load.XXXXXX)
failed=0
for i in $(seq 1 "$RUNS"); do
  git clone -q "$REPO" "$WORK/run$i" && git -C "$WORK/run$i" checkout -q "$REV"
  pids=()
  for _ in $(seq 1 "$HOGS"); do python3 -c "while True: pass" & pids+=($!); done
  t0=$(date +%s)
  (cd "$WORK/run$i" && make test > "$WORK/run$i.log" 2>&1); rc=$?
  kill "${pids[@]}" 2>/dev/null
  echo "run $i rev ${REV:0:7} hogs=$HOGS rc=$rc seconds=$(( $(date +%s) - t0 )) $(grep -E '[0-9]+ passed' "$WORK/run$i.log" | tail -1)"
  [ "$rc" = 0 ] || failed=1
done
echo "logs: $WORK"
exit $failed
