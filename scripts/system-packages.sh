#!/usr/bin/env bash
# Debian packages the test suite needs beyond Python wheels, installed only when missing:
#   libltdl7   mssql-python's bundled Microsoft ODBC Driver 18 loads it (SQL_SERVER connections)
#   chromium   the offline /docs test renders Swagger UI in headless Chromium (tests/e2e)
#   chromium-driver  the /console browser tests drive Chromium over WebDriver (tests/e2e)
#   prometheus  promtool tests the alert rules (tests/deploy); a real Prometheus evaluates them
#               against a Manager and a Worker (tests/e2e/test_prometheus_alerts.py)
#   kubernetes-client     kubectl, whose `kubectl kustomize` renders the overlays (also `lint`)
# `scripts/system-packages.sh image` installs instead what `make image` needs:
#   podman, debootstrap   build the OCI image and its Debian base (tests/deploy/test_image.py)
# `scripts/system-packages.sh lint` installs what `make lint` needs: kubectl, as above.
# `scripts/system-packages.sh fuzz` what `make fuzz` needs (scripts/fuzz.sh):
#   clang, libclang-rt-14-dev   the sanitizer build of the C layout and its runtimes (ASan,
#                               UBSan, libFuzzer)
# Runs as root on the project machines (CI included); elsewhere it says what to install.
set -euo pipefail

missing=()
if [[ "${1:-}" == fuzz ]]; then
    command -v clang >/dev/null || missing+=(clang)
    [[ -f $(clang -print-file-name=libclang_rt.asan-x86_64.a 2>/dev/null || echo /absent) ]] ||
        missing+=(libclang-rt-14-dev)
elif [[ "${1:-}" == image ]]; then
    command -v podman >/dev/null || missing+=(podman)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
elif [[ "${1:-}" == lint ]]; then
    command -v kubectl >/dev/null || missing+=(kubernetes-client)
else
    command -v kubectl >/dev/null || missing+=(kubernetes-client)
    ldconfig -p 2>/dev/null | grep -q 'libltdl\.so\.7' || missing+=(libltdl7)
    command -v chromium >/dev/null || missing+=(chromium)
    command -v chromedriver >/dev/null || missing+=(chromium-driver)
    command -v promtool >/dev/null || missing+=(prometheus)
fi

if ((${#missing[@]} == 0)); then
    exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    printf 'system-packages: please install: %s\n' "${missing[*]}" >&2
    exit 1
fi
printf 'system-packages: installing %s\n' "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
}
