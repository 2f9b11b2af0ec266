# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv (re-installed when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DB ?= sqlite:///procgrade.db
DEMO_REPORT ?= procgrade-report.html
DEMO_TB_DB ?= sqlite:///procgrade-tb.db
DEMO_TB_REPORT ?= procgrade-tb-report.html
DEMO_TB := tests/fixtures/imports/terminal-bench-claude-code

.PHONY: demo test bench-ingest bench-rescore bench-import clean

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

# The main job, end to end on the embedded SQLite default. First the heart of it: the real multi-system
# Terminal-Bench sample (Claude Code behind four models on 15 shared tasks, the agents' actions recovered
# from the terminal recordings) in its own store: process vs outcome per system with Kendall tau-b and
# Spearman and their bootstrap intervals over tasks, the rule-outcome association table, and its report.
# Then everything else: procgrade's own example and the other bundled harness runs, human and judge
# grades, a workspace judged by the acceptance oracle, scores, comparison, calibration and the report.
demo: $(VENV)/.installed-analysis
	$(BIN)/procgrade init --db $(DEMO_TB_DB)
	$(BIN)/procgrade ingest --db $(DEMO_TB_DB) $(DEMO_TB) > /dev/null
	$(BIN)/procgrade rescore --all --db $(DEMO_TB_DB) > /dev/null
	$(BIN)/procgrade compare --db $(DEMO_TB_DB) --by system --resamples 1999
	$(BIN)/procgrade associate --db $(DEMO_TB_DB) --by system --resamples 1999
	$(BIN)/procgrade report --db $(DEMO_TB_DB) --by system --html $(DEMO_TB_REPORT) --resamples 1999
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
	@echo "demo done: Terminal-Bench sample in $(DEMO_TB_DB), report $(abspath $(DEMO_TB_REPORT));"
	@echo "           everything in $(DEMO_DB), report $(abspath $(DEMO_REPORT))"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

bench-ingest: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

bench-rescore: $(VENV)/.installed-dev
	$(BIN)/python bench/rescore.py

bench-import: $(VENV)/.installed-dev
	$(BIN)/python bench/imports.py

clean:
	rm -rf $(VENV) procgrade.db procgrade.db-wal procgrade.db-shm procgrade-report.html .pytest_cache .hypothesis \
		procgrade-tb.db procgrade-tb.db-wal procgrade-tb.db-shm procgrade-tb-report.html
