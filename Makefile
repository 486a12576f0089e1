# Headwater: `make up` runs the platform on embedded defaults; `make test` installs and checks everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CORE_STAMP := $(VENV)/.core-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: up test check lint imports typecheck unit soak install install-dev bench demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(CORE_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[server]"
	touch $@

$(DEV_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(CORE_STAMP)

install: $(CORE_STAMP)
install-dev: $(DEV_STAMP)

## up: start every service in the foreground on embedded defaults; Ctrl-C stops them all.
up: $(CORE_STAMP)
	$(VENV)/bin/headwater up

## test: lint, format check, import rules, mypy --strict, then the whole test suite on
## TEST_WORKERS parallel workers (the fault tests one after another on one of them).
TEST_WORKERS ?= 5
test: $(DEV_STAMP) lint imports typecheck
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

## check: the quick loop (about a minute): lint, format check, import rules, types, unit tests.
check: $(DEV_STAMP) lint imports typecheck unit

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## imports: the import rules of docs/architecture.md ([tool.importlinter] in pyproject.toml).
imports: $(DEV_STAMP)
	$(VENV)/bin/lint-imports

typecheck: $(DEV_STAMP)
	$(VENV)/bin/mypy headwater headwater_cli services/*/headwater_* spark/headwater_spark spark/pyspark_headwater tests bench

unit: $(DEV_STAMP)
	$(PY) -m pytest tests/unit

## soak: the replication fault tests in rounds beside a CPU hog per core (SOAK_SECONDS, 300).
soak: $(DEV_STAMP)
	$(PY) -m tests.fault_soak

bench: $(DEV_STAMP)
	$(PY) bench/broker.py

## demo: start a broker and a registry, produce valid and broken Avro, run the Spark validation job.
demo: $(DEV_STAMP)
	$(PY) -m headwater_spark.demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .import_linter_cache data
