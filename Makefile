PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test lint format clean browser

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

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
