# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv (re-installed when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB ?= sqlite:///procgrade.db
DEMO_REPORT ?= procgrade-report.html

.PHONY: demo test bench-ingest bench-rescore bench-import bench-scale clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-analysis: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[analysis,acceptance]'
	touch $@ $(VENV)/.installed-base

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-base $(VENV)/.installed-analysis

# The main job, end to end on the embedded SQLite default: ingest procgrade's own example and the
# bundled real harness runs, import human and judge grades, judge a workspace with the acceptance
# oracle, score, compare process with outcome, calibrate, and write the HTML report.
demo: $(VENV)/.installed-analysis
	$(BIN)/procgrade init --db $(DEMO_DB)
	$(BIN)/procgrade ingest --db $(DEMO_DB) examples/native/todo-app-run.jsonl tests/fixtures/grades/arena-runs.jsonl
	$(BIN)/procgrade ingest --db $(DEMO_DB) tests/fixtures/imports
	$(BIN)/procgrade grades import --db $(DEMO_DB) tests/fixtures/grades/arena-gguf.csv tests/fixtures/devai-judgments
	$(BIN)/procgrade accept --db $(DEMO_DB) --task tasks/verrange --workspace tasks/verrange/controls/reference/app --backend local
	$(BIN)/procgrade runs --db $(DEMO_DB)
	$(BIN)/procgrade verify-log --db $(DEMO_DB) todo-app-demo
	$(BIN)/procgrade rescore --all --db $(DEMO_DB)
	$(BIN)/procgrade verify --db $(DEMO_DB)
	$(BIN)/procgrade explain --db $(DEMO_DB) arena/gguf-swift/model-c
	$(BIN)/procgrade compare --db $(DEMO_DB) --by model --allow-mixed --resamples 1999
	$(BIN)/procgrade calibrate --db $(DEMO_DB) --reference human --candidate judge --layer requirement --by harness
	$(BIN)/procgrade calibrate --db $(DEMO_DB) --reference human --candidate rules --layer check
	$(BIN)/procgrade report --db $(DEMO_DB) --html $(DEMO_REPORT) --allow-mixed --resamples 1999
	@echo "demo done: database $(DEMO_DB), report $(abspath $(DEMO_REPORT))"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

bench-ingest: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

bench-rescore: $(VENV)/.installed-dev
	$(BIN)/python bench/rescore.py

bench-scale: $(VENV)/.installed-dev
	$(BIN)/python bench/scale.py

bench-import: $(VENV)/.installed-dev
	$(BIN)/python bench/imports.py

clean:
	rm -rf $(VENV) procgrade.db procgrade.db-wal procgrade.db-shm procgrade-report.html .pytest_cache .hypothesis
