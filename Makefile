# The targets are exactly what CI runs (.ci/run calls `make test`).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= ./claimgraph-data
PYTEST_ARGS ?=

.PHONY: help install demo test lint typecheck docs bench clean kafka kafka-fetch

help:
	@echo "make install    .venv with claimgraph and every extra (and the native core when cargo is present)"
	@echo "make demo       the main job: the first article's world on the embedded runtime"
	@echo "make test       every test (lint, types and the docs build included)"
	@echo "make lint       ruff check + ruff format --check + the import layers (lint-imports)"
	@echo "make typecheck  mypy --strict on the package"
	@echo "make docs       the docs site into site/ (mkdocs build --strict, offline)"
	@echo "make bench      benchmarks, written to BENCHMARKS.md (embedded, Kafka, HTTP)"
	@echo "make kafka      a development Kafka broker (KRaft) on 127.0.0.1:9092, data in ./kafka-data; Ctrl-C stops it"
	@echo "make kafka-fetch  download the Kafka broker jars from Maven Central (once; needs Java 17, Maven)"
	@echo "make clean      remove .venv, the caches, site/ and the benchmark and test scratch"

# The first install takes a minute or two: pip says what it is collecting as it goes.
$(STAMP): pyproject.toml
	@echo "make: installing claimgraph and its extras into $(VENV) (once; pip's progress follows)" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar off -e '.[dev,kafka,http,mcp,export,examples,docs]' >&2
	@touch $(STAMP)
	@echo "make: $(VENV) is ready" >&2

# The native core (native/, Rust through PyO3) is built when cargo is present; without a
# compiler it is skipped and everything runs on the pure-Python core.
NATIVE_STAMP := $(VENV)/.native
NATIVE_SRC := $(wildcard native/Cargo.toml native/Cargo.lock native/pyproject.toml native/src/*.rs)

$(NATIVE_STAMP): $(STAMP) $(NATIVE_SRC)
	@if command -v cargo >/dev/null 2>&1 || test -x "$$HOME/.cargo/bin/cargo"; then \
	  export PATH="$(abspath $(BIN)):$$PATH:$$HOME/.cargo/bin"; \
	  $(BIN)/python -m pip install --quiet 'maturin>=1.7,<2' && \
	  $(BIN)/python -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./native; \
	else echo "no cargo: the native core is not built (the pure-Python core runs)"; fi
	@touch $(NATIVE_STAMP)

install: $(STAMP) $(NATIVE_STAMP)

demo: $(STAMP)
	$(BIN)/claimgraph demo

lint: $(STAMP)
	$(BIN)/ruff check claimgraph tests $(wildcard tools) $(wildcard examples)
	$(BIN)/ruff format --check claimgraph tests $(wildcard tools) $(wildcard examples)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The docs site, offline: the reference pages are generated from the code as it builds
# (tools/mkdocs_hooks.py), and --strict fails on any broken link or warning. `make test`
# builds it, so CI does too.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: $(STAMP) $(NATIVE_STAMP) lint typecheck docs
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The broker jars go to ~/.cache/claimgraph/kafka-<version>/libs; later runs are offline.
kafka-fetch: $(STAMP)
	$(BIN)/python tools/kafka_broker.py fetch

kafka: kafka-fetch
	$(BIN)/python tools/kafka_broker.py start

bench: $(STAMP) $(NATIVE_STAMP) kafka-fetch
	$(BIN)/python tools/bench.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_kafka.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_http.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_versions.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_whatif.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_chain.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_agents.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_submit.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_wrk.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_native.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_memory.py --out BENCHMARKS.md
	$(BIN)/python tools/bench_memory.py --spill 131072 --runs 1 --out BENCHMARKS.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache bench-data bench-data-whatif test-artifacts site
