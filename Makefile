# oasis-operator developer commands. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The locked versions (pip constraints) every install uses: CI's, a newcomer's and the image's.
LOCK := .ci/constraints.txt
# The release (decision 0108): pyproject.toml's version, the image `make image` builds, the helm
# `make dist` packages the chart with (empty: the tool cache's, from `make tools`, else PATH's), and the
# tag being released (the release workflow's; empty: no tag check).
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/oasis-operator/oasis-operator:$(VERSION)
HELM ?=
RELEASE_TAG ?=

.DEFAULT_GOAL := help

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(LOCK) -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install the package with its test tools

lock: ## Re-resolve the dependencies (newest allowed by pyproject.toml) into .ci/constraints.txt
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet '.[test]'
	{ head -n 3 $(LOCK); .lock-venv/bin/pip freeze --all --exclude-editable | grep -v -E '^(oasis-operator|pip)=='; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .lock-venv

binaries: ## Build the control-plane binaries into the cache (once; ~5 min on 2 cores)
	@bash tools/build-binaries.sh

backends: ## Build the tool-plane back-ends (metrics, alerts, traces, GitOps) into the cache (once; ~25 min on 2 cores)
	@OASIS_BUILD_JOBS=$${OASIS_BUILD_JOBS:-2} bash tools/build-backends.sh >/dev/null

postgres: ## Install Debian's PostgreSQL server (the database back-end), once
	@bash tools/install-postgres.sh

tools: ## Install helm, kubeconform (tool cache), chromium and PostgreSQL, once, for the shipping, report and database tests
	@bash tools/install-tools.sh >/dev/null

demo: install binaries postgres ## Run the main job on the embedded control plane and print the results
	$(BIN)/oasis demo

lint: install ## ruff (lint and format), mypy, the import contracts (layers, independent adapters, no cycles), the complexity budget
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python tools/complexity.py

test: install binaries backends tools lint ## The whole test suite, including the control-plane tests
	$(BIN)/pytest

unit: install ## The pure suite: no control plane, no helm or other outside tool, on every core
	$(BIN)/pytest -m unit -n auto

bench: install binaries ## Benchmarks (numbers to report, not pass/fail); the engine's as JSON, compared with the baseline
	$(BIN)/python tools/benchmarks/bench_devcluster.py
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_targets.py
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_environments.py
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_operator.py
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_toolplane.py
	$(MAKE) --no-print-directory bench-engine
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_gateway.py
	PYTHONPATH=. $(BIN)/python tools/benchmarks/bench_gateway.py --flood 1024

BENCH_OUT ?= .bench/results.json

bench-engine: install ## The verification engine at 100k, 1M and 10M events: figures to $(BENCH_OUT), regressions against tools/benchmarks/baseline.json
	$(BIN)/python tools/benchmarks/bench_verification.py --json $(BENCH_OUT)
	$(BIN)/python tools/benchmarks/compare.py tools/benchmarks/baseline.json $(BENCH_OUT)

dev-up: install binaries ## Start a local control plane and leave it running
	$(BIN)/oasis dev-cluster up

dev-down: install ## Stop the local control plane
	$(BIN)/oasis dev-cluster down

dist: install ## Build the release's wheel and chart package into dist/ (what .github/workflows/release.yml pushes)
	HELM="$(HELM)" RELEASE_TAG="$(RELEASE_TAG)" bash tools/release-build.sh dist

image: ## Build the operator's image (IMAGE=name:tag; needs a container engine)
	docker build --label org.opencontainers.image.version=$(VERSION) \
	  --label org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) -t $(IMAGE) .

clean: ## Remove the virtualenv and caches in the repository (not the binary cache)
	rm -rf $(VENV) .lock-venv .mypy_cache .ruff_cache .pytest_cache .hypothesis .bench dist

.PHONY: help install lock binaries backends postgres tools demo lint test unit bench bench-engine dev-up dev-down dist image clean
