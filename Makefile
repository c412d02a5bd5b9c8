# Lambda vs Kappa reference deployment. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# uv: the one on PATH, else the one infra/bootstrap.sh installs (`make setup` runs it).
export LK_UV_DIR ?= $(or $(LK_CACHE_DIR),$(CURDIR)/.cache)/uv
UV ?= $(if $(shell command -v uv),uv,$(LK_UV_DIR)/bin/uv)
LK := $(UV) run lk
PYTEST_ARGS ?=

##@ First steps

.PHONY: setup
setup: ## Install what is missing (uv; Debian's packages, as root) and the locked Python env
	@infra/bootstrap.sh
	@# Bytecode written now, once: every `lk` process (a job, a DAG task, a test's subprocess)
	@# then loads its 2 GB of libraries from it, even where PYTHONDONTWRITEBYTECODE is set
	@# (Python compiles in memory at each start then: about 4 CPU-s per process here).
	$(UV) sync --frozen --compile-bytecode

.PHONY: demo
demo: ## The main job: both architectures live on one workload, six scenarios, a report
	@[ -x .venv/bin/lk ] || echo "make demo, first run: it installs the Python environment \
	(uv sync: Spark, Airflow, GX; about 2 GB), then fetches Kafka's and Spark's jars and builds \
	MinIO and makes Spark's class-data archive (about 5-8 minutes on 2 cores), before the run itself (about 6 minutes). All of it \
	is cached: later runs start the stack in about 15 seconds."
	@$(MAKE) --no-print-directory setup
	$(LK) demo --serve-port $(or $(SERVE_PORT),8000)

.PHONY: compare
compare: setup ## The comparison alone, on a running stack (lk compare --help for its options)
	$(LK) compare

.PHONY: test
test: setup ## All tests: unit, and integration against the real local stack it starts itself
	$(UV) run pytest --durations=25 $(PYTEST_ARGS)

.PHONY: test-faults
test-faults: setup ## The cluster's fault suite alone (pods deleted, the node restarted; in test-k8s)
	@# The batch's fault is the chart's batch test's (its driver pod deleted): it runs first.
	$(UV) run pytest --k8s --durations=10 $(PYTEST_ARGS) \
	  "tests/k8s/test_chart_on_cluster.py::test_lambda_batch_through_rest_on_driver_and_executor_pods_survives_its_driver_deleted" \
	  tests/k8s/test_pod_faults.py

.PHONY: test-compare
test-compare: setup ## `lk demo`'s live comparison on a small workload; its report checked in Chromium
	$(UV) run pytest tests/comparison --comparison --durations=5 $(PYTEST_ARGS)

.PHONY: test-k8s
test-k8s: setup ## The chart on a real cluster it starts (lk cluster up): architecture both
	$(UV) run pytest tests/k8s --k8s --k8s-architecture both --durations=30 $(PYTEST_ARGS)

.PHONY: test-k8s-lambda
test-k8s-lambda: setup ## The same on the real cluster, with the chart in lambda alone
	$(UV) run pytest tests/k8s --k8s --k8s-architecture lambda $(PYTEST_ARGS)

.PHONY: test-k8s-kappa
test-k8s-kappa: setup ## The same on the real cluster, with the chart in kappa alone
	$(UV) run pytest tests/k8s --k8s --k8s-architecture kappa $(PYTEST_ARGS)

##@ Local stack (Kafka, MinIO, Postgres on loopback)

.PHONY: stack-up
stack-up: setup ## Start the local services (fetching and building what is missing)
	$(LK) stack up

.PHONY: stack-down
stack-down: ## Stop the services the stack started (data stays)
	$(LK) stack down

.PHONY: stack-status
stack-status: ## Report each service
	$(LK) stack status

.PHONY: stack-reset
stack-reset: ## Stop the stack and delete its data (the download cache stays)
	$(LK) stack reset

##@ Airflow (local: LocalExecutor, metadata in the stack's Postgres)

.PHONY: airflow-up
airflow-up: setup ## Start Airflow on the running stack (UI http://127.0.0.1:18080, admin/admin)
	$(UV) run python -m infra.airflow up

.PHONY: airflow-down
airflow-down: ## Stop the Airflow processes airflow-up started
	$(UV) run python -m infra.airflow down

.PHONY: airflow-status
airflow-status: ## Report each Airflow process
	$(UV) run python -m infra.airflow status

##@ Development

.PHONY: lint
lint: ## ruff (lint and format check), mypy, and the rooms' import contracts (pyproject.toml)
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy .
	$(UV) run lint-imports

.PHONY: fmt
fmt: ## Format and fix what ruff can
	$(UV) run ruff format .
	$(UV) run ruff check --fix .

.PHONY: unit
unit: ## Unit tests only (no services)
	$(UV) run pytest -m "not integration" $(PYTEST_ARGS)

.PHONY: bench
bench: setup ## Benchmarks (not tests): prints measured rates
	$(UV) run python -m tests.benchmarks.run

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

include infra/kind.mk
include infra/minikube.mk
include infra/cluster.mk

.PHONY: print-image-tag
print-image-tag: ## The tag `make images` gives this commit (unique per commit and change)
	@echo $(IMAGE_TAG)
