#!/usr/bin/env bash
# make fuzz / make fuzz-short: the C layout (src/fetcher/adapters/jsonlayout/_native.c) built
# with AddressSanitizer + UndefinedBehaviorSanitizer (clang, -fsanitize=fuzzer-no-link for
# libFuzzer's edge coverage) into build/fuzz/<python version>/ — never the .venv's own module —
# then, with that build loaded in its place (tests/fuzz/preload/sitecustomize.py):
#   full   the layout tests under the sanitizers on Python 3.11 and 3.12, then the fuzzer
#          (atheris) on every entry point against its Python twin, FUZZ_SECONDS per target;
#   short  the fuzzer only, on the .venv's Python, FUZZ_SECONDS per target (make test).
# Installs clang and its sanitizer runtimes (Debian: clang, libclang-rt-14-dev) when missing.
# Python 3.12 is the first python3.12 found: PYTHON312, then PATH, then pyenv's versions; the
# 3.12 leg says so and fails when there is none (FUZZ_SKIP_312=1 leaves it out knowingly).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-full}
seconds=${FUZZ_SECONDS:-60}
root=build/fuzz
source_c=src/fetcher/adapters/jsonlayout/_native.c
layout_tests=(
    tests/unit/document/test_json_layout.py
    tests/unit/document/test_layout_callbacks.py
    tests/unit/sql/test_mysql_laid_out.py
    tests/unit/sql/test_postgres_laid_out.py
)
# Left out under the sanitizers: its Python reference, 12 s on the .venv's build, took more
# than 8 minutes there (every object through ASan's malloc); the C's buffer growth it covers
# is what the fuzzer's texts with many escapes drive too.
layout_tests+=(--deselect tests/unit/document/test_json_layout.py::test_huge_strings_and_containers)

scripts/system-packages.sh fuzz
runtime_dir=$(dirname "$(clang -print-file-name=libclang_rt.asan-x86_64.so)")

# ASan's runtime and libFuzzer in one preloaded library (as atheris's asan_with_fuzzer.so):
# the extension's coverage counters must reach libFuzzer, not ASan's weak stand-ins.
preload=$root/asan_with_fuzzer.so
if [[ ! -f $preload ]]; then
    mkdir -p "$root"
    objects=$(mktemp -d)
    (cd "$objects" && ar x "$runtime_dir/libclang_rt.asan-x86_64.a" && rm -f asan_preinit.cpp.o &&
        ar rc asan.a ./*.o)
    clang++ -shared -o "$preload" -Wl,--whole-archive "$objects/asan.a" \
        "$runtime_dir/libclang_rt.fuzzer_no_main-x86_64.a" -Wl,--no-whole-archive \
        -lpthread -ldl -lrt -lm
    rm -rf "$objects"
fi

# build PYTHON DIR: the sanitized module for PYTHON in DIR; prints its path.
build() {
    local python=$1 dir=$2 include suffix
    include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    mkdir -p "$dir"
    clang -shared -fPIC -I"$include" -O1 -g -fno-omit-frame-pointer \
        -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all \
        -Wall -Wextra -Werror "$source_c" -o "$dir/_native$suffix"
    echo "$dir/_native$suffix"
}

# sanitized PYTHON MODULE COMMAND...: COMMAND with the sanitized MODULE in place. PYTHONMALLOC
# =malloc puts Python's objects under ASan too (a list's freed items are then caught).
sanitized() {
    local module=$2
    shift 2
    LD_PRELOAD=$PWD/$preload PYTHONMALLOC=malloc \
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        PYTHONPATH=$PWD/tests/fuzz/preload:$PWD/src:$PWD FETCHER_FUZZ_NATIVE=$PWD/$module \
        FETCHER_REQUIRE_SERVICES=1 "$@"
}

python311=.venv/bin/python
module311=$(build "$python311" "$root/3.11")

if [[ $mode == short ]]; then
    sanitized "$python311" "$module311" "$python311" -m tests.fuzz.run \
        --seconds "$seconds" --work "$root/3.11"
    exit
fi

python312=${PYTHON312:-}
if [[ -z $python312 ]] && command -v python3.12 >/dev/null && python3.12 -V >/dev/null 2>&1; then
    python312=$(command -v python3.12)
fi
if [[ -z $python312 ]] && command -v pyenv >/dev/null; then
    version=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | tail -1 || true)
    [[ -n $version ]] && python312=$(pyenv root)/versions/$version/bin/python3.12
fi

echo "== layout tests under ASan + UBSan, Python 3.11 ($python311)"
sanitized "$python311" "$module311" "$python311" -m pytest -q -p no:cacheprovider "${layout_tests[@]}"

if [[ -n $python312 ]]; then
    venv312=$root/3.12/venv
    if [[ ! -x $venv312/bin/python ]]; then
        "$python312" -m venv "$venv312"
        # the project's dependencies, not the project (its normal build would go into src/)
        mapfile -t deps < <("$python312" -c 'import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + extras["postgres"] + extras["mysql"]))')
        "$venv312/bin/python" -m pip install --quiet -c constraints.txt "${deps[@]}" \
            pytest pytest-asyncio hypothesis
    fi
    module312=$(build "$venv312/bin/python" "$root/3.12")
    echo "== layout tests under ASan + UBSan, Python 3.12 ($("$venv312/bin/python" -V))"
    sanitized "$venv312/bin/python" "$module312" "$venv312/bin/python" -m pytest -q \
        -p no:cacheprovider "${layout_tests[@]}"
elif [[ ${FUZZ_SKIP_312:-} == 1 ]]; then
    echo "== Python 3.12: none found (PYTHON312, PATH, pyenv); left out (FUZZ_SKIP_312=1)"
else
    echo "== Python 3.12: none found (PYTHON312, PATH, pyenv): set PYTHON312, or FUZZ_SKIP_312=1" >&2
    exit 1
fi

echo "== fuzzing every entry point against its Python twin, $seconds s each (Python 3.11)"
sanitized "$python311" "$module311" "$python311" -m tests.fuzz.run \
    --seconds "$seconds" --work "$root/3.11"
