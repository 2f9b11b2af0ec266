# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv (re-installed when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB ?= sqlite:///procgrade.db

.PHONY: demo test bench-ingest clean

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

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

bench-ingest: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) procgrade.db procgrade.db-wal procgrade.db-shm .pytest_cache .hypothesis
