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

.PHONY: demo test bench bench-ingest bench-rescore bench-import bench-huge-run bench-scale clean

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
	$(BIN)/procgrade judge --db $(DEMO_DB) todo-app-demo --rubric arena --model gpt-4o-mini --dry-run --price-input 0.15 --price-output 0.60
	$(BIN)/procgrade compare --db $(DEMO_DB) --by model --allow-mixed --resamples 1999
	$(BIN)/procgrade calibrate --db $(DEMO_DB) --reference human --candidate judge --layer requirement --by harness
	$(BIN)/procgrade calibrate --db $(DEMO_DB) --reference human --candidate rules --layer check
	$(BIN)/procgrade report --db $(DEMO_DB) --html $(DEMO_REPORT) --allow-mixed --resamples 1999
	@echo
	@echo "demo done. What it did, on the SQLite database $(DEMO_DB):"
	@echo "  ingested procgrade's example run, the arena runs and the bundled real harness logs (tests/fixtures/imports),"
	@echo "  imported an arena grade sheet and the DevAI human and judge grades, judged tasks/verrange's reference"
	@echo "  workspace with the hidden-test oracle, scored every run and verified the scores byte for byte, compared"
	@echo "  process with outcome by model, calibrated the judge and the rules against the human grades."
	@echo "  First, on its own database $(DEMO_TB_DB): the Terminal-Bench sample (4 systems x 15 tasks, the agents'"
	@echo "  actions recovered from the casts), process vs outcome per system and the rule-outcome association."
	@echo "Where to look:"
	@echo "  the reports:  $(abspath $(DEMO_TB_REPORT)) (Terminal-Bench) and $(abspath $(DEMO_REPORT))"
	@echo "                (open them in a browser; they fetch nothing)"
	@echo "  the runs:     $(BIN)/procgrade runs --db $(DEMO_DB)"
	@echo "  one run:      $(BIN)/procgrade explain --db $(DEMO_DB) arena/gguf-swift/model-c"
	@echo "  more:         README.md, Usage (every line there runs on this database)"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

# Every bench in one run (about three minutes here when idle): one table of ratios, CPU time and peak memory.
bench: $(VENV)/.installed-dev
	$(BIN)/python bench/suite.py

bench-ingest: $(VENV)/.installed-dev
	$(BIN)/python bench/ingest.py

bench-rescore: $(VENV)/.installed-dev
	$(BIN)/python bench/rescore.py

bench-scale: $(VENV)/.installed-dev
	$(BIN)/python bench/scale.py

bench-import: $(VENV)/.installed-dev
	$(BIN)/python bench/imports.py

bench-huge-run: $(VENV)/.installed-dev
	$(BIN)/python bench/huge_run.py

clean:
	rm -rf $(VENV) procgrade.db procgrade.db-wal procgrade.db-shm procgrade-report.html .pytest_cache .hypothesis \
		procgrade-tb.db procgrade-tb.db-wal procgrade-tb.db-shm procgrade-tb-report.html build dist
