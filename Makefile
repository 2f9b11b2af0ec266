# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv (re-installed when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB ?= sqlite:///procgrade.db

.PHONY: demo test bench-ingest bench-rescore bench-import clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-base

demo: $(VENV)/.installed-base
	$(BIN)/procgrade init --db $(DEMO_DB)
	$(BIN)/procgrade ingest --db $(DEMO_DB) examples/native/todo-app-run.jsonl
	$(BIN)/procgrade runs --db $(DEMO_DB)
	$(BIN)/procgrade show --db $(DEMO_DB) todo-app-demo
	$(BIN)/procgrade verify-log --db $(DEMO_DB) todo-app-demo
	$(BIN)/procgrade ingest --db $(DEMO_DB) tests/fixtures/planted/claim-backed-by-passing-test/fault.jsonl tests/fixtures/planted/no-repeated-failing-command/fault.jsonl
	$(BIN)/procgrade ingest --db $(DEMO_DB) tests/fixtures/imports
	$(BIN)/procgrade runs --db $(DEMO_DB)
	$(BIN)/procgrade rescore --all --db $(DEMO_DB)
	$(BIN)/procgrade explain --db $(DEMO_DB) planted-claim-backed-by-passing-test-fault
	$(BIN)/procgrade verify --db $(DEMO_DB)
	$(BIN)/procgrade validate-rules tests/fixtures/planted

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

bench-ingest: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

bench-rescore: $(VENV)/.installed-dev
	$(BIN)/python bench/rescore.py

bench-import: $(VENV)/.installed-dev
	$(BIN)/python bench/imports.py

clean:
	rm -rf $(VENV) procgrade.db procgrade.db-wal procgrade.db-shm .pytest_cache .hypothesis
