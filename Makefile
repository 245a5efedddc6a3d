# The README's commands. `make demo` and `make test` each build .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-unit lint bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/fetcher demo

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The S3 server (SeaweedFS on loopback) runs only around the tests and is stopped by PID.
test: install lint
	scripts/s3-server.sh start
	$(BIN)/pytest; rc=$$?; scripts/s3-server.sh stop; exit $$rc

test-unit: install
	$(BIN)/pytest tests/unit tests/architecture

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) fetcher-data .mypy_cache .ruff_cache .pytest_cache
