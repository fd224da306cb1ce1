PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test lint format clean

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

test: $(DEVSTAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments
	$(BIN)/python -m pytest

format: $(DEVSTAMP)
	$(BIN)/ruff format src tests benchmarks experiments
	$(BIN)/ruff check --fix src tests benchmarks experiments

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
