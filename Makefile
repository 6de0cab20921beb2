# Cadence: `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CADENCE := $(VENV)/bin/cadence
FOCUS_VENV ?= .venv-focus
TORCH_VENV ?= .venv-torch
DOCS_VENV ?= .venv-docs
PYTEST_ARGS ?=
FUZZ_EXAMPLES ?= 100
export CADENCE_TEST_DATABASE_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test

.DEFAULT_GOAL := help
.PHONY: help run serve migrate demo docs test test-sqlite test-postgres fuzz lint fmt bench bench-quick clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(VENV)/.runtime: pyproject.toml clients/python/pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Cadence needs Python 3.11+"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The client (the `cadence` script and its commands) comes from this tree, never the
	# package index; the server declares it and adds serve/migrate/demo/token to it.
	# Older venvs held the client as "cadence-client" and `cadence` as the server's
	# script: remove both first, or reinstalling the server would delete the client's.
	$(PIP) uninstall --quiet --yes cadence cadence-client 2>/dev/null || true
	$(PIP) install --quiet -e ./clients/python
	$(PIP) install --quiet -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.runtime $(FOCUS_VENV)/.ok-2.2.1 $(TORCH_VENV)/.ok
	$(PIP) install --quiet -e '.[dev]'
	@touch $@

# The FinOps FOCUS validator 2.2.1 (the FOCUS 1.2 model, shipped in the package for
# offline use), for tests/reporting/test_focus.py, in a venv of its own: it needs Python
# 3.12+ (pyenv's, or a python3.12/3.13 on PATH; set FOCUS_PYTHON to choose) and pins
# pandas/pandera/polars versions the app must not share. Its dependencies are listed in
# deploy/focus/validator-requirements.txt (numpy >= 2 instead of its pin: see there).
FOCUS_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python) \
	$(shell command -v python3.13 python3.12 2>/dev/null))
$(FOCUS_VENV)/.ok-2.2.1: deploy/focus/validator-requirements.txt
	@test -n "$(FOCUS_PYTHON)" || { echo "focus-validator 2.2.1 needs Python 3.12+: set FOCUS_PYTHON"; exit 1; }
	rm -rf $(FOCUS_VENV)
	$(FOCUS_PYTHON) -m venv $(FOCUS_VENV)
	$(FOCUS_VENV)/bin/pip install --quiet --no-deps 'focus-validator==2.2.1'
	$(FOCUS_VENV)/bin/pip install --quiet -r deploy/focus/validator-requirements.txt
	@touch $@

# PyTorch (CPU wheel), Lightning and Transformers, for clients/python/tests/
# test_stall_accuracy.py (a real DataLoader under run.timed) and test_integrations.py (the
# two callbacks, tiny models built from code). Their own venv keeps ~1 GB out of the
# app's and the client's.
$(TORCH_VENV)/.ok: clients/python/pyproject.toml
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install --quiet 'torch==2.13.0' 'httpx>=0.24' 'numpy' \
	  'lightning==2.6.6' 'transformers==5.24.0' 'accelerate==1.15.0'
	@touch $@

# MkDocs and its Material theme in a venv of their own: the site is built, never served by
# the app, and Material brings Pygments, Babel and more that the app has no use for.
$(DOCS_VENV)/.ok: docs/requirements.txt
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet -r docs/requirements.txt
	@touch $@

docs: $(DOCS_VENV)/.ok ## Build the documentation site into site/ (mkdocs build --strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet --site-dir site

# Logs for a person at a terminal; production keeps JSON lines (CADENCE_LOG_FORMAT=json).
run: export CADENCE_LOG_FORMAT ?= text
run: $(VENV)/.runtime ## Migrate the embedded SQLite DB, load demo data if empty, serve on :8000 (text logs)
	$(CADENCE) migrate
	$(CADENCE) demo --if-empty
	$(CADENCE) serve

serve: $(VENV)/.runtime ## Serve without touching the database
	$(CADENCE) serve

migrate: $(VENV)/.runtime ## Apply migrations to CADENCE_DATABASE_URL
	$(CADENCE) migrate

demo: $(VENV)/.runtime ## Load the demo pipelines (idempotent)
	$(CADENCE) demo

lint: $(VENV)/.dev ## ruff, mypy on app/ and the client, the import contracts (ARCHITECTURE.md)
	$(VENV)/bin/ruff check app tests bench migrations clients/python scripts
	$(VENV)/bin/ruff format --check app tests bench migrations clients/python scripts
	$(VENV)/bin/mypy app
	$(VENV)/bin/mypy --python-version 3.10 clients/python/cadence_client
	$(VENV)/bin/lint-imports

fmt: $(VENV)/.dev ## Format and autofix
	$(VENV)/bin/ruff format app tests bench migrations clients/python scripts
	$(VENV)/bin/ruff check --fix app tests bench migrations clients/python scripts

test: lint docs test-sqlite test-postgres ## Lint, build the docs (--strict), then the suite on SQLite and on PostgreSQL

test-sqlite: $(VENV)/.dev ## The suite on SQLite, browser tests included
	CADENCE_TEST_BACKEND=sqlite $(PY) -m pytest $(PYTEST_ARGS)

test-postgres: $(VENV)/.dev ## The suite on PostgreSQL (CADENCE_TEST_DATABASE_URL)
	@$(PY) -m tests.services postgres; rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  CADENCE_TEST_BACKEND=postgresql $(PY) -m pytest -m "not browser and not docs" \
	    --ignore=tests/planning $(PYTEST_ARGS); \
	elif [ $$rc -eq 1 ]; then echo "PostgreSQL pass SKIPPED (see above)"; \
	else exit 1; fi

fuzz: $(VENV)/.dev ## schemathesis, FUZZ_EXAMPLES (100) new cases per operation, SQLite then PostgreSQL: no 5xx
	CADENCE_TEST_BACKEND=sqlite CADENCE_FUZZ_RANDOM=1 CADENCE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) \
	  $(PY) -m pytest tests/system/test_fuzz.py -p no:randomly -q
	@CADENCE_REQUIRE_POSTGRES=1 $(PY) -m tests.services postgres
	CADENCE_TEST_BACKEND=postgresql CADENCE_FUZZ_RANDOM=1 CADENCE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) \
	  $(PY) -m pytest tests/system/test_fuzz.py -p no:randomly -q

bench: $(VENV)/.dev ## Benchmark ingestion and analytics against a raw psycopg baseline (~5 min)
	$(PY) -m bench

bench-quick: $(VENV)/.dev ## A smaller benchmark run (~1 min) to check the harness
	$(PY) -m bench --quick

clean: ## Remove the venv, the SQLite database and caches
	rm -rf $(VENV) $(FOCUS_VENV) $(TORCH_VENV) $(DOCS_VENV) site var .pytest_cache .mypy_cache .ruff_cache tests/artifacts
