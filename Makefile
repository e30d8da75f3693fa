# aiperf-web: the two commands of the quick start are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint typecheck unit bench clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

# The main job. Until the web service exists: an hour of agentic traffic simulated in virtual
# time, legacy vs spawn-pin routing and conversation vs lineage affinity side by side.
run: $(STAMP)
	$(PY) -m runner demo

test: lint typecheck unit

lint: $(STAMP)
	$(PY) -m ruff check runner tests
	$(PY) -m ruff format --check runner tests

typecheck: $(STAMP)
	$(PY) -m mypy

unit: $(STAMP)
	$(PY) -m pytest

# Benchmarks print figures; they are never pass/fail timing checks.
bench: $(STAMP)
	$(PY) -m runner bench router --json
	$(PY) -m runner bench sim --json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
