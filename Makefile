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
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports

# The S3 server (SeaweedFS) and the MongoDB wire server (nx-27017), both on loopback, run only
# around the tests and are stopped by PID, both of them even when the tests or a start fail.
test: install lint
	scripts/system-packages.sh
	scripts/s3-server.sh start; rc=$$?; \
	if [ $$rc -eq 0 ]; then scripts/mongo-server.sh start; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then $(BIN)/pytest; rc=$$?; fi; \
	scripts/mongo-server.sh stop; scripts/s3-server.sh stop; exit $$rc

test-unit: install
	$(BIN)/pytest tests/unit tests/architecture

bench: install
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) fetcher-data .mypy_cache .ruff_cache .pytest_cache
