PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint typecheck pytest gate bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,recheck,cluster]'
	touch $(STAMP)

.venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/meshproof report --out reports --html
	@echo "Look at reports/report.html (one offline page), or reports/README.md (verdict table), reports/diagrams/*.svg and reports/figures/*.png"

lint: $(STAMP)
	$(BIN)/ruff check meshproof tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

# two workers: the machines the suite runs on have two cores
pytest: $(STAMP)
	$(BIN)/pytest -q -n 2

test: lint typecheck pytest

# the edit-test loop: lint and every test not marked slow (tests/slow_tests.txt) or scale, under a
# minute on the 2-core machine; `make test` stays the whole suite
test-fast: $(STAMP)
	$(BIN)/ruff check meshproof tests benchmarks examples
	$(BIN)/pytest -q -n 2 -m 'not slow and not scale'

gate: $(STAMP)
	$(BIN)/meshproof gate proofs.toml

bench: $(STAMP)
	$(BIN)/pytest -q -m scale
	$(BIN)/python benchmarks/verify_scale.py --json reports/verify_scale.json
	$(BIN)/python benchmarks/verify_random.py
	$(BIN)/python benchmarks/sim_scale.py
	$(BIN)/python benchmarks/cli_start.py
	$(BIN)/python benchmarks/numeric_tightness.py
	$(BIN)/python benchmarks/masked_scale.py

# The API page of meshproof.testing and the public entry points, built offline with pdoc
# (a dev dependency: it reads the docstrings and type hints already there; no network).
API_MODULES := meshproof.testing meshproof.pytest_plugin meshproof.verify.api \
	meshproof.verify.properties meshproof.verify.result meshproof.sim.api \
	meshproof.gate.pipeline meshproof.gate.judge meshproof.gate.runner meshproof.gate.sarif \
	meshproof.report.api meshproof.report.diagrams meshproof.schemas
docs: $(STAMP)
	$(BIN)/pdoc --docformat markdown --no-show-source -o build/docs $(API_MODULES)
	@echo "Open build/docs/index.html (API: meshproof.testing and the public entry points)"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
