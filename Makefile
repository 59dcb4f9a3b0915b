# kafka-log-jobs — every target sets up what it needs on a fresh machine (Python 3.11, Java 17, Maven).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SAMPLE ?= sample/logs
SAMPLE_CONF ?= sample/conf
NOW_MS ?= 1767225600000
PYTEST_ARGS ?=
# `make test` runs in this many pytest processes (pytest-xdist; 0: one process, as `make test-unit` runs).
# Each test file stays in one process (--dist loadfile), so a module's broker or data set is made once.
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP) ## create or refresh the virtualenv

browser: ## Debian's Chromium for the HTML report screenshot test (skipped with a message when absent)
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
		echo "chromium could not be installed: the HTML screenshot test will be skipped"

dist: $(STAMP) ## wheel + executors' Python environment archive in dist/ (rebuilt only when sources change)
	$(VENV)/bin/kafka-log-jobs package --out dist

test: $(STAMP) browser dist ## run the whole suite (core, Spark, a Spark cluster, real Kafka broker)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# No broker, no Spark, no cluster, no slow case: nothing is downloaded (the broker's jars and Spark's
# packages come from Maven Central) and no JVM starts, so it runs offline in a few minutes.
UNIT_MARKERS := not broker and not spark and not cluster and not slow

test-unit: $(STAMP) ## the fast subset: the core on real files, without a JVM (a few minutes)
	$(PY) -m pytest -q -m "$(UNIT_MARKERS)" $(PYTEST_ARGS)

run: $(STAMP) ## generate a sample log dir; report (table + sample/report.html), compact, retain, offsets
	$(PY) -m kafka_log_core.simulator.sample --out $(SAMPLE) --fresh --now-ms $(NOW_MS)
	$(VENV)/bin/kafka-log-jobs report --log-dir $(SAMPLE) --conf-dir $(SAMPLE_CONF) --now-ms $(NOW_MS) --format table
	$(VENV)/bin/kafka-log-jobs report --log-dir $(SAMPLE) --conf-dir $(SAMPLE_CONF) --now-ms $(NOW_MS) --format html --out sample/report.html
	$(VENV)/bin/kafka-log-jobs compact --log-dir $(SAMPLE) --conf-dir $(SAMPLE_CONF) --now-ms $(NOW_MS) --output table
	$(VENV)/bin/kafka-log-jobs retain --log-dir $(SAMPLE) --conf-dir $(SAMPLE_CONF) --now-ms $(NOW_MS) --output table
	$(VENV)/bin/kafka-log-jobs offsets --log-dir $(SAMPLE) --time -2

bench: $(STAMP) ## benchmark: ratios measured side by side in one run
	$(PY) -m bench.run

soak: $(STAMP) ## long crash-injection run, and the fuzz over damaged segments with more examples
	SOAK=1 $(PY) -m pytest tests/work/test_crash_safety.py -s $(PYTEST_ARGS)
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-2000} $(PY) -m pytest tests/work/test_fuzz_segments.py $(PYTEST_ARGS)

lint: $(STAMP) ## ruff format check and lint, mypy on the core
	$(VENV)/bin/ruff check kafka_log_core jobs spark_udfs tests bench
	$(VENV)/bin/ruff format --check kafka_log_core jobs spark_udfs tests bench
	$(VENV)/bin/mypy

clean: ## remove the virtualenv and generated data
	rm -rf $(VENV) sample .pytest_cache dist

.PHONY: help venv browser dist test test-unit run bench soak lint clean
