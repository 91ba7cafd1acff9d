# Two entry points (README): `make run` runs the main job, `make test` the test suite.
# Both create .venv and install what they need on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow lint fuzz report-screens clean-venv

$(STAMP): pyproject.toml
	@echo "installing dse and its dependencies into $(VENV) (first use: 1-2 minutes)"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,lint]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/dse run studies/llm_serving.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

# Style, types and the import direction of STYLE.md section 1 (contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check dse tests benchmarks scripts
	$(BIN)/ruff format --check dse tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

# A longer fuzz of the YAML loader and the study, space and GPU schemas (the suite runs 1,100 documents).
fuzz: $(STAMP)
	DSE_FUZZ_EXAMPLES=$${DSE_FUZZ_EXAMPLES:-10000} $(BIN)/python -m pytest -q -p no:randomly tests/config/test_yamlio.py -k fuzzed

# A small run's report, one PNG per section (pareto, front, parcoords, breakdown, dvfs, settings), via
# headless Chromium (apt-get install -y chromium): results/report-screens/<section>.png.
report-screens: $(STAMP)
	$(BIN)/dse run studies/llm_serving.yaml --executor serial --n-points 120 --out results/report-screens --fresh
	$(BIN)/python scripts/report_screens.py results/report-screens

clean-venv:
	rm -rf $(VENV)
