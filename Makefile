# The two commands: `make run` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYPROJECT_HASH := $(shell sha1sum pyproject.toml | cut -c1-12)
RUN_STAMP := $(VENV)/.run-$(PYPROJECT_HASH)
TEST_STAMP := $(VENV)/.test-$(PYPROJECT_HASH)
BENCH_STAMP := $(VENV)/.bench-$(PYPROJECT_HASH)
BENCH_ARGS ?=
PYTEST_ARGS ?=
# make test's pytest-xdist workers (tests/support/scheduling.py shares the files out, longest first).
TEST_WORKERS ?= 2

.PHONY: run test lint test-deps system-deps unit fault fuzz bench clean

run: $(RUN_STAMP)
	$(BIN)/barnabas broker --listen 127.0.0.1:9092 --data-dir ./barnabas-data

$(BIN)/python:
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,profile]'
	touch $@

$(BENCH_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[bench,profile]'
	touch $@

system-deps:
	bash scripts/install-system-deps.sh

test-deps: $(TEST_STAMP) system-deps
	bash tests/interop/node/install.sh
	bash tests/interop/java/build.sh
	bash tests/contract/servers/cassandra/build.sh
	$(BIN)/python tests/spark/resolve_jars.py
	bash bench/kafka-server/build.sh

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: test-deps lint
	$(BIN)/pytest -n $(TEST_WORKERS) --max-worker-restart=0 $(PYTEST_ARGS)

unit: $(TEST_STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# The fault tests at length: the replication failure matrix repeated CYCLES times per backend, every
# failure or only those named in FAULTS (comma-separated, e.g. FAULTS="host crash bounce").
CYCLES ?= 5
FAULTS ?=
# Toxiproxy (the latency faults' relays) is built here only: make test skips those tests.
fault: test-deps
	bash tests/fault/install-toxiproxy.sh
	TOXIPROXY=$(CURDIR)/.tools/bin/toxiproxy-server BARNABAS_TEST_REPLICATION_CYCLES=$(CYCLES) BARNABAS_TEST_REPLICATION_SPLIT=0 BARNABAS_TEST_REPLICATION_FAULTS="$(FAULTS)" $(BIN)/pytest tests/fault $(PYTEST_ARGS)

# Coverage-guided fuzzing (docs/testing.md, "Fuzzing"): every target for FUZZ_RUNS inputs (FUZZ_TARGET for
# one), then the stateful tests at length. atheris (libFuzzer in its wheel) is installed here only.
FUZZ_RUNS ?= 1000000
FUZZ_TARGET ?= all
fuzz: $(TEST_STAMP)
	$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/pip install --quiet atheris==3.0.0
	$(BIN)/python -m tests.fuzz.run $(FUZZ_TARGET) --runs $(FUZZ_RUNS)
	BARNABAS_STATEFUL=fuzz $(BIN)/pytest -p no:cacheprovider --timeout=0 tests/unit/log/test_log_stateful.py tests/unit/groups/test_coordinator_stateful.py $(PYTEST_ARGS)

# barnabas (direct and through its proxy), Apache Kafka (1 and 3 brokers) and Tansu side by side
# (bench/README.md); ~14-20 min.
bench: $(BENCH_STAMP) system-deps
	bash bench/kafka-server/build.sh
	$(BIN)/barnabas bench compare $(BENCH_ARGS)

clean:
	rm -rf $(VENV) barnabas-data .pytest_cache .mypy_cache .ruff_cache .tools
