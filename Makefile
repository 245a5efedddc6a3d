# The README's commands. `make demo` and `make test` each build .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python that ships outside the package: the image's health check, compose's bucket creator,
# the build's setup.py (the optional C extension).
DEPLOY_PY := deploy/container/fetcher-healthcheck deploy/compose/create-bucket.py setup.py

.PHONY: install demo test test-unit lint bench clean image fuzz fuzz-short

# setup.py and the C source: an edited extension is rebuilt by `make install` (pip install -e).
$(STAMP): pyproject.toml constraints.txt setup.py src/fetcher/adapters/jsonlayout/_native.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/fetcher demo

lint: install
	$(BIN)/ruff check src tests bench examples $(DEPLOY_PY)
	$(BIN)/ruff format --check src tests bench examples $(DEPLOY_PY)
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/kubernetes-validate --strict --quiet deploy/kubernetes/*.yaml deploy/kubernetes/secret-template/*.yaml
	$(BIN)/pymarkdown scan --recurse README.md docs bench tests

# The S3 server (SeaweedFS) and the MongoDB wire server (nx-27017), both on loopback, run only
# around the tests and are stopped by PID, both of them even when the tests or a start fail.
test: install lint fuzz-short
	scripts/system-packages.sh
	scripts/s3-server.sh start; rc=$$?; \
	if [ $$rc -eq 0 ]; then scripts/mongo-server.sh start; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then $(BIN)/pytest; rc=$$?; fi; \
	scripts/mongo-server.sh stop; scripts/s3-server.sh stop; exit $$rc

# The OCI image (Containerfile), built with `podman build --isolation chroot` on a debootstrap
# Debian base kept outside the repository (scripts/image-base.sh, FETCHER_IMAGE_CACHE), then
# checked in its own file system: `fetcher demo` as the image's user, non-root, no compiler, no
# .git, start time and size (tests/deploy/test_image.py). Too slow for `make test`; .ci/run
# runs it after. Installs podman and debootstrap when missing.
image: install
	scripts/system-packages.sh image
	$(BIN)/pytest -m image tests/deploy/test_image.py -s

# The C layout (src/fetcher/adapters/jsonlayout/_native.c) built with AddressSanitizer and
# UndefinedBehaviorSanitizer into build/fuzz/ (never the .venv's module), then: its tests under
# the sanitizers on Python 3.11 and 3.12, and atheris (libFuzzer) on every entry point against
# its Python twin for FUZZ_SECONDS each, reporting executions, C edges covered and CPU time
# (scripts/fuzz.sh; installs clang when missing). `make test` runs fuzz-short: 10 s a target.
# Python 3.12 is PYTHON312, else python3.12 on PATH, else pyenv's; without one the 3.12 leg
# fails, unless FUZZ_SKIP_312=1 leaves it out.
FUZZ_SECONDS ?= 60
fuzz: install
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh full

fuzz-short: install
	FUZZ_SECONDS=10 scripts/fuzz.sh short

test-unit: install
	$(BIN)/pytest tests/unit tests/architecture

bench: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/python bench/run.py

# Faults against a real Manager and two Workers (bench/chaos.py; not part of `make test`,
# whose smoke version is tests/chaos/test_smoke.py). Starts the S3 server only if none runs,
# and then stops only that one.
.PHONY: chaos
chaos: install
	s3=0; scripts/s3-server.sh status >/dev/null 2>&1 || { scripts/s3-server.sh start && s3=1; }; \
	$(BIN)/python bench/chaos.py; rc=$$?; \
	if [ $$s3 -eq 1 ]; then scripts/s3-server.sh stop; fi; exit $$rc

# A steady 5 jobs/s for SOAK_MINUTES (default 30): RSS, fds, database connections and AMQP
# channels of every process, their slopes and a PNG (bench/soak.py; needs the `bench` extra).
SOAK_MINUTES ?= 30
.PHONY: soak
soak: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	s3=0; scripts/s3-server.sh status >/dev/null 2>&1 || { scripts/s3-server.sh start && s3=1; }; \
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES); rc=$$?; \
	if [ $$s3 -eq 1 ]; then scripts/s3-server.sh stop; fi; exit $$rc

clean:
	rm -rf $(VENV) fetcher-data .mypy_cache .ruff_cache .pytest_cache
