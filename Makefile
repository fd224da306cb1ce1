PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

# Python 3.12+ for the component model library (the `components` extra): the first 3.12
# under pyenv that runs, else python3.12 on PATH (pyenv's shim may not run it).
PYTHON312 ?= $(shell for p in $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12*/bin/python3.12 \
	python3.12; do "$$p" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null \
	&& { echo "$$p"; break; }; done)
VENV312 := .venv312
STAMP312 := $(VENV312)/.installed-components

.PHONY: demo test test-slow test-slow-share test-all test-oracle typecheck lint format clean browser components test-components

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(DEVSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(STAMP)

demo: $(STAMP)
	$(BIN)/fusemap demo

# The fast set: ruff, then every test not marked slow or oracle, in two processes
# (about 1.5 minutes on 2 cores). Plain `pytest` runs the same set.
test: $(DEVSTAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments
	$(BIN)/mypy
	$(BIN)/python -m pytest -n 2

# The rest: the tests marked slow (long cases of checks the fast set makes on small
# ones: whole mapper runs, the corpus, sweeps, the brute forces) and the LoopTree
# oracle (74 minutes on 2 cores, 2026-11-29). CI runs a share of it after `make test`.
test-slow: $(DEVSTAMP)
	$(BIN)/python -m pytest -n 2 -m "slow or oracle"

# One share of the rest (SHARE=K/N: the tests placed in share K, by their recorded
# duration, tests/support/slow_durations.json, else by a hash of their id; the N shares
# together are the whole of it). CI runs the sixteenth its commit picks (about 4.6
# minutes of test time on 2 cores each; hashed, they ranged from 2.5 to 8.5).
SHARE ?= 0/16
test-slow-share: $(DEVSTAMP)
	$(BIN)/python -m pytest -n 2 -m "slow or oracle" --share $(SHARE)

# Everything: the fast set, then the rest.
test-all: test test-slow

# mypy over src/fusemap, configured in pyproject.toml (also run by `make test`).
typecheck: $(DEVSTAMP)
	$(BIN)/mypy

# FFM against the independent LoopTree oracle (every LoopTree of 48 tiny random cases,
# of 12 with a spatial fanout, and of tests/oracles/test_mapper_root.py's; part of
# `make test-slow`), two cases at a time.
test-oracle: $(DEVSTAMP)
	$(BIN)/python -m pytest -m oracle -n 2

# Headless Chromium for the HTML report tests (they are skipped, saying why, without it).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO="sudo"; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium \
	  || echo "warning: could not install chromium: the HTML report tests will be skipped" >&2; }

format: $(DEVSTAMP)
	$(BIN)/ruff format src tests benchmarks experiments
	$(BIN)/ruff check --fix src tests benchmarks experiments

# A Python 3.12 venv with the component model library; builds CACTI / NeuroSim from
# their shipped sources where the shipped binaries do not run (an older glibc).
$(STAMP312): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "no Python 3.12 found (set PYTHON312=...)"; exit 2; }
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --quiet --upgrade pip
	$(VENV312)/bin/pip install --quiet -e '.[dev,components]'
	$(VENV312)/bin/python -m fusemap.component_binaries
	touch $@

components: $(STAMP312)

# The tests that price components with the library (they skip where it is missing, so
# first check that it is there and its simulators run).
test-components: $(STAMP312)
	$(VENV312)/bin/python -m fusemap.component_binaries --check
	$(VENV312)/bin/python -m pytest -p no:logging -m "" tests/unit/spec/test_component_models.py \
		tests/integration/test_components_corpus.py tests/unit/spec/test_cim_functions.py \
		tests/unit/model/test_model_tolls.py

clean:
	rm -rf $(VENV) $(VENV312) build *.egg-info src/*.egg-info
