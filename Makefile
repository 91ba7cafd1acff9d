# Two entry points (README): `make run` runs the main job, `make test` the test suite.
# Both create .venv and install what they need on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow lint bench clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/dse run studies/llm_serving.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests

clean-venv:
	rm -rf $(VENV)
