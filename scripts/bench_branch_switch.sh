#!/bin/bash
# Branch-switch benchmark (issue 23, item 3; docs/embedding.md "The vector cache").
#
#   scripts/bench_branch_switch.sh CLONE OTHER_REF
#
# CLONE is a disposable git clone (its checkout is changed). With an empty vector cache of its
# own, it indexes the current branch, checks OTHER_REF out, indexes, switches back, indexes, and
# switches once more, printing per step the files changed, the chunks embedded, how many the
# model computed and how many came from the cache (`index --json`), and the wall time.
set -euo pipefail
CLONE=${1:?usage: bench_branch_switch.sh CLONE OTHER_REF}
OTHER=${2:?usage: bench_branch_switch.sh CLONE OTHER_REF}
HERE=$(cd "$(dirname "$0")/.." && pwd)
R=${RAGLOOM:-$HERE/.venv/bin/ragloom}
PY=${PYTHON:-$HERE/.venv/bin/python}
export RAGLOOM_VECTOR_CACHE=${RAGLOOM_VECTOR_CACHE:-$(mktemp -d)/vectors.sqlite}
cd "$CLONE"
FIRST=$(git rev-parse --abbrev-ref HEAD)
echo "differing files: $(git diff --name-only "$FIRST" "$OTHER" | wc -l)"
rm -rf .ragloom
step() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$R" index . --no-history --json --no-progress 2>/dev/null)
  t1=$(date +%s.%N)
  "$PY" -c "
import json, sys
d = json.loads(sys.argv[1])
print(f\"{sys.argv[2]:<22} files_changed {d['files_changed']:>4}  chunks_embedded {d['chunks_embedded']:>5}  computed {d['embeddings_computed']:>5}  cached {d['embeddings_cached']:>5}  wall {float(sys.argv[4]) - float(sys.argv[3]):.2f} s\")
" "$out" "$1" "$t0" "$t1"
}
step "index $FIRST"
git checkout -q "$OTHER"; step "switch to $OTHER"
git checkout -q "$FIRST"; step "switch back"
git checkout -q "$OTHER"; step "switch again"
git checkout -q "$FIRST"
