# The README's commands. `make demo` and `make test` each build .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Python that ships outside the package: the image's health check, compose's bucket creator,
# the build's setup.py (the optional C extension).
DEPLOY_PY := deploy/container/fetcher-healthcheck deploy/compose/create-bucket.py setup.py

.PHONY: install demo test test-unit lint bench clean image fuzz fuzz-short
# Where `make lint` writes each rendered Kubernetes overlay (kubectl kustomize) to validate it.
RENDERED ?= $(VENV)/rendered
# The base's objects (its kustomization.yaml is no Kubernetes object: rendered, not validated).
K8S_BASE := $(filter-out %/kustomization.yaml,$(wildcard deploy/kubernetes/base/*.yaml))

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
	scripts/system-packages.sh lint
	$(BIN)/kubernetes-validate --strict --quiet $(K8S_BASE) deploy/kubernetes/secret-template/*.yaml
	scripts/render-overlays.sh $(RENDERED)
	$(BIN)/kubernetes-validate --strict --quiet $(RENDERED)/*.yaml
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
# Debian base (the build argument BASE_IMAGE) kept outside the repository
# (scripts/image-base.sh, FETCHER_IMAGE_CACHE) and KEPT as IMAGE (compose.yaml's name by
# default; a rebuild replaces it), then checked in its own file system: `fetcher demo` as the image's user, non-root, no compiler, no .git, start time,
# size, an OCI archive (tests/deploy/test_image.py). Last, its ID, size and digest, and with
# IMAGE_ARCHIVE=/path/outside/the/repo.tar an OCI archive there (scripts/image.sh report).
# Too slow for `make test`; .ci/run runs it after. Installs podman and debootstrap when missing.
IMAGE ?= localhost/fetcher:local
IMAGE_ARCHIVE ?=
image: install
	scripts/system-packages.sh image
	scripts/image.sh build $(IMAGE)
	FETCHER_IMAGE=$(IMAGE) $(BIN)/pytest -m image tests/deploy/test_image.py -s
	scripts/image.sh report $(IMAGE) $(IMAGE_ARCHIVE)

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
	$(BIN)/python -m bench.run

# Faults against a real Manager and two Workers (bench/chaos.py; not part of `make test`,
# whose smoke version is tests/chaos/test_smoke.py). Starts the S3 server only if none runs,
# and then stops only that one.
.PHONY: chaos
chaos: install
	s3=0; scripts/s3-server.sh status >/dev/null 2>&1 || { scripts/s3-server.sh start && s3=1; }; \
	$(BIN)/python -m bench.chaos; rc=$$?; \
	if [ $$s3 -eq 1 ]; then scripts/s3-server.sh stop; fi; exit $$rc

# A steady 5 jobs/s for SOAK_MINUTES (default 30): RSS, fds, database connections and AMQP
# channels of every process, their slopes and a PNG (bench/soak.py; needs the `bench` extra).
SOAK_MINUTES ?= 30
.PHONY: soak
soak: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	s3=0; scripts/s3-server.sh status >/dev/null 2>&1 || { scripts/s3-server.sh start && s3=1; }; \
	$(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES); rc=$$?; \
	if [ $$s3 -eq 1 ]; then scripts/s3-server.sh stop; fi; exit $$rc

clean:
	rm -rf $(VENV) fetcher-data .mypy_cache .ruff_cache .pytest_cache
