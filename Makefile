# Skew-join reproduction harness. `make reproduce` and `make test` work on a fresh clone:
# every target installs the project's virtual environment on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# "-path": the stamp of a venv that also has this checkout on its path (skewjoins.pth), so
# `.venv/bin/python -m joins` (datagen, experiments) works from any folder
STAMP := $(VENV)/.installed-$(shell cksum < requirements.lock | cut -d' ' -f1)-path
SCALE ?= small
SPARK ?= local
ARGS ?=

# Per-figure and per-paper targets are derived from conf/figure/, never written by hand (a
# family beyond the papers, conf/figure/arena/, gets its targets the same way: reproduce-arena).
FIGURES := $(sort $(patsubst conf/figure/%.yaml,%,$(wildcard conf/figure/*/[!_]*.yaml)))
PAPERS := $(sort $(foreach f,$(FIGURES),$(firstword $(subst /, ,$(f)))))
FIGURE_TARGETS := $(addprefix reproduce-,$(subst /,-,$(FIGURES)))
PAPER_TARGETS := $(addprefix reproduce-,$(PAPERS))

.PHONY: help setup test slow stress lint list reproduce reproduce-all report readme calibrate bench data clean \
        cluster-up cluster-down cluster-status history history-down budget-sensitivity \
        $(FIGURE_TARGETS) $(PAPER_TARGETS)

help:
	@echo "make reproduce             headline figures at SCALE=$(SCALE) on SPARK=$(SPARK)"
	@echo "make reproduce-<paper>     every figure of a paper: $(PAPERS)"
	@echo "                           (arena: beyond the papers, every online operator on the same streams)"
	@echo "make reproduce-<p>-<fig>   one figure (make list shows them)"
	@echo "make reproduce-all         every figure of every paper"
	@echo "make list                  the figures;  make report  REPORT.md from results/;  make readme  its figure table"
	@echo "make test | lint           the tests (ARGS=pytest options) | ruff"
	@echo "make slow                  the long cases make test leaves out (CI runs both)"
	@echo "make stress                1,000+ random layout-change schedules against DuckDB (slow)"
	@echo "make calibrate | bench     measure the cost model's constants | benchmarks (ARGS=\"name key=value\")"
	@echo "make data | setup | clean  the headline figures' inputs | install the venv | remove scratch/"
	@echo "make cluster-up | cluster-status | cluster-down   a Spark standalone cluster here (SPARK=standalone)"
	@echo "make history | history-down                       Spark's history server on every run's event log"
	@echo "make budget-sensitivity    where amjoin's budgeted joins fail at 0.5x..2x the budget (no joins run)"
	@echo "CLIs: $(PY) -m joins list|describe|run|compare|stream ...   (--help after a command)"
	@echo "      $(PY) -m datagen list|<generator> ...                  (see README: Your own data)"

$(STAMP): requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r requirements.lock
	$(PY) -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), \
	    "skewjoins.pth").write_text(sys.argv[1] + "\n")' "$(CURDIR)"
	@rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

# the long cases (end to end, clusters, the engine's slowest exactness properties): CI runs them
# after make test, which leaves them out to stay under 20 minutes on 2 cores
slow: $(STAMP)
	$(PY) -m pytest -m 'slow and not stress' $(ARGS)

# the engine's exactness under random multi-change schedules: 1,000+ cases against DuckDB
# (tests/online/test_schedules_property.py); run it after every engine change
stress: $(STAMP)
	$(PY) -m pytest -m stress -p no:randomly --hypothesis-show-statistics $(ARGS) tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .

list: $(STAMP)
	@$(PY) -m experiments.figures list all

reproduce: $(STAMP)
	$(PY) -m experiments.reproduce headline scale=$(SCALE) spark=$(SPARK) $(ARGS)

reproduce-all: $(STAMP)
	$(PY) -m experiments.reproduce all scale=$(SCALE) spark=$(SPARK) $(ARGS)

$(FIGURE_TARGETS) $(PAPER_TARGETS): reproduce-%: $(STAMP)
	$(PY) -m experiments.reproduce $(subst -,/,$*) scale=$(SCALE) spark=$(SPARK) $(ARGS)

report: $(STAMP)
	$(PY) -m experiments.report scale=$(SCALE)
	$(PY) -m experiments.status

readme: $(STAMP)
	$(PY) -m experiments.status

calibrate: $(STAMP)
	$(PY) -m experiments.calibrate spark=$(SPARK) $(ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks $(ARGS)

budget-sensitivity: $(STAMP)
	$(PY) -m experiments.budget_sensitivity scale=$(SCALE) $(ARGS)

data: $(STAMP)
	$(PY) -m experiments.reproduce headline scale=$(SCALE) spark=$(SPARK) data_only=true $(ARGS)

# A Spark standalone master and workers on this machine (runtime/cluster.py; ARGS="--workers 3
# --memory 4g --port 7078 ..."); SPARK=standalone runs on it while $$SPARK_MASTER_URL is unset.
cluster-up: $(STAMP)
	@$(PY) -m runtime.cluster up $(ARGS)

cluster-down: $(STAMP)
	@$(PY) -m runtime.cluster down

cluster-status: $(STAMP)
	@$(PY) -m runtime.cluster status

history: $(STAMP)
	@$(PY) -m runtime.cluster history $(ARGS)

history-down: $(STAMP)
	@$(PY) -m runtime.cluster history-down

clean:
	rm -rf scratch .pytest_cache .ruff_cache .hypothesis
