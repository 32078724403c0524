# The targets are exactly what CI runs (.ci/run calls `make test`).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= ./claimgraph-data
PYTEST_ARGS ?=
# make test runs the suite in this many pytest-xdist worker processes (1: in the pytest process)
TEST_WORKERS ?= 3
XDIST := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup,-p no:xdist)

.PHONY: help install demo dist wheel-demo test soak lint typecheck docs bench clean kafka kafka-fetch

help:
	@echo "make install    .venv with claimgraph and every extra (and the native core when cargo is present)"
	@echo "make demo       the main job: the first article's world on the embedded runtime"
	@echo "make dist       the sdist and the wheel built from it (native core inside) into dist/, twine-checked"
	@echo "make wheel-demo the built wheel in a fresh venv outside the repository: both demos on its native core"
	@echo "make test       every test (lint, types and the docs build included), in TEST_WORKERS=3 processes"
	@echo "make soak       the long soaks (tests marked slow), which make test skips; CI runs both"
	@echo "make lint       ruff check + ruff format --check + the import layers (lint-imports)"
	@echo "make typecheck  mypy --strict on the package"
	@echo "make docs       the docs site into site/ (mkdocs build --strict, offline)"
	@echo "make bench      benchmarks, written to BENCHMARKS.md (embedded, Kafka, HTTP)"
	@echo "make kafka      a development Kafka broker (KRaft) on 127.0.0.1:9092, data in ./kafka-data; Ctrl-C stops it"
	@echo "make kafka-fetch  download the Kafka broker jars from Maven Central (once; needs Java 17, Maven)"
	@echo "make clean      remove .venv, the caches, site/ and the benchmark and test scratch"

# One distribution: the package's own build (setup.py, setuptools-rust) compiles the native
# core (native/, Rust through PyO3) into it when cargo is present — rustup's when installed,
# else the system's — and leaves it out otherwise: everything then runs on the pure-Python
# core. CLAIMGRAPH_BUILD_NATIVE=required (CI) makes a failed native build an error.
# The build backend (pyproject.toml's [build-system] requires) is installed into the venv and
# the installs do not isolate the build, so a rebuild reuses native/target.
CARGO_PATH := $(abspath $(BIN)):$(PATH):$(HOME)/.cargo/bin
HAS_CARGO := $(shell PATH="$(CARGO_PATH)" command -v cargo)
BUILD_REQUIRES := $(shell $(PYTHON) -c 'import tomllib; print(" ".join(repr(r) for r in tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
NATIVE_SRC := $(wildcard native/Cargo.toml native/Cargo.lock native/build.rs native/src/*.rs)
NATIVE_STAMP := $(VENV)/.native
NO_CARGO := "make: no cargo: the native core is not built (the pure-Python core runs)"

# The first install takes a minute or two: pip says what it is collecting as it goes.
# A venv made before the package built its native core is upgraded: claimgraph-native (the
# native core's own distribution then) is removed, and so are the empty directories the old
# editable install leaves in site-packages/claimgraph (they would shadow the package).
$(STAMP): pyproject.toml setup.py
	@echo "make: installing claimgraph and its extras into $(VENV) (once; pip's progress follows)" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(BUILD_REQUIRES)
	@$(BIN)/python -m pip uninstall --quiet --yes claimgraph-native 2>/dev/null || true
	@test -n "$(HAS_CARGO)" || echo $(NO_CARGO) >&2
	PATH="$(CARGO_PATH)" $(BIN)/python -m pip install --progress-bar off --no-build-isolation \
	  -e '.[dev,kafka,http,mcp,export,examples,langgraph,docs]' >&2
	@find "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/claimgraph" \
	  -depth -type d -empty -delete 2>/dev/null || true
	@touch $(STAMP) $(NATIVE_STAMP)
	@echo "make: $(VENV) is ready ($$(cd / && $(abspath $(BIN))/python -c 'from claimgraph import native; print(native.status())' | head -1))" >&2

# An edit under native/ rebuilds the native core in place (cargo recompiles what changed).
$(NATIVE_STAMP): $(STAMP) $(NATIVE_SRC)
	@if test -n "$(HAS_CARGO)"; then \
	  PATH="$(CARGO_PATH)" $(BIN)/python -m pip install --quiet --no-build-isolation --no-deps -e .; \
	else echo $(NO_CARGO); fi
	@touch $(NATIVE_STAMP)

install: $(STAMP) $(NATIVE_STAMP)

# The demo runs on the core the package's build made (native when cargo is present).
demo: install
	$(BIN)/claimgraph demo

# The sdist, then the wheel built from the unpacked sdist (so the sdist is complete), each in a
# fresh isolated build environment, the native core required; twine checks both.
dist: $(STAMP)
	rm -rf dist
	PATH="$(CARGO_PATH)" CLAIMGRAPH_BUILD_NATIVE=required $(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The wheel alone, as a user gets it: a fresh venv in a temporary directory (no checkout on
# its path), both demos there, on the native core (tools/wheel_demo.sh says what it checks).
wheel-demo: dist
	PYTHON=$(PYTHON) tools/wheel_demo.sh dist/*.whl

lint: $(STAMP)
	$(BIN)/ruff check setup.py claimgraph tests $(wildcard tools) $(wildcard examples)
	$(BIN)/ruff format --check setup.py claimgraph tests $(wildcard tools) $(wildcard examples)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The docs site, offline: the reference pages are generated from the code as it builds
# (tools/mkdocs_hooks.py), and --strict fails on any broken link or warning. `make test`
# builds it, so CI does too.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Every test on the core a process loads (native when built; a stale build is reported, and
# fails under CI=true), then the governor's behaviour suite (tests/cores.py) again on the
# pure-Python core: both cores pass one suite. Each pass runs in TEST_WORKERS pytest-xdist
# processes (--dist loadgroup: the Kafka tests of one broker set share one worker,
# tests/kafka_fixtures.py); TEST_WORKERS=1 runs in the pytest process (pdb, -x).
test: $(STAMP) $(NATIVE_STAMP) lint typecheck docs
	@$(BIN)/python -c 'from claimgraph import native; print(native.status())'
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)
	@if $(BIN)/python -c 'import sys, claimgraph.native as n; sys.exit(not n.ACTIVE)'; then \
	  echo "make: the behaviour suite again, on the pure-Python core (CLAIMGRAPH_PURE=1)"; \
	  CLAIMGRAPH_PURE=1 $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS) -m "not kafka" \
	    $$($(BIN)/python -m tests.cores); \
	else echo "make: no native core loaded: the pass above ran the pure-Python core"; fi

# The long soaks: tests marked slow, skipped by make test (minutes each, too long for every
# run); CI runs them after make test.
soak: $(STAMP) $(NATIVE_STAMP)
	SLOW=1 $(BIN)/python -m pytest -p no:xdist $(PYTEST_ARGS) -m slow

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache bench-data bench-data-whatif test-artifacts \
	  site dist build claimgraph.egg-info claimgraph/native/_rust*.so
