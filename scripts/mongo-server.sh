#!/usr/bin/env bash
# A throw-away MongoDB wire-protocol server (nx-27017, SQLite-backed) for the MongoDB tests.
#
#   scripts/mongo-server.sh [start]   start nx-27017 on 127.0.0.1 only and wait for `ping`
#   scripts/mongo-server.sh stop      stop it by the PID recorded at start, remove its data
#   scripts/mongo-server.sh status    exit 0 when the recorded PID is alive
#
# nx-27017 has no telemetry and opens one listener (the wire port, bound to 127.0.0.1). It has
# no SCRAM authentication and cannot store Decimal128, Timestamp or Regex values; the tests
# know these gaps. Environment (all optional):
#   FETCHER_TEST_MONGODB_PORT       wire port (default 27018, so a real mongod keeps 27017)
#   FETCHER_TEST_MONGODB_STATE_DIR  where the PID file, log and data live
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV_BIN="$ROOT/.venv/bin"
NX="$VENV_BIN/nx-27017"

PORT="${FETCHER_TEST_MONGODB_PORT:-27018}"
STATE_DIR="${FETCHER_TEST_MONGODB_STATE_DIR:-${TMPDIR:-/tmp}/fetcher-mongo-$(id -u)-$PORT}"
PID_FILE="$STATE_DIR/nx.pid"
LOG_FILE="$STATE_DIR/nx.log"
DATA_DIR="$STATE_DIR/data"

NAME=mongo-server
PROCESS_RE="nx-27017.* -p $PORT"  # the recorded PID must still be our nx-27017 process
ADDRESS="127.0.0.1:$PORT"
# shellcheck source=scripts/lib/pid-server.sh
source "$ROOT/scripts/lib/pid-server.sh"

wait_ready() {
    "$VENV_BIN/python" - "$PORT" <<'PY'
import sys, time
from pymongo import MongoClient

client = MongoClient(host="127.0.0.1", port=int(sys.argv[1]), directConnection=True,
                     serverSelectionTimeoutMS=500, connectTimeoutMS=500)
deadline = time.monotonic() + 30
while True:
    try:
        client.admin.command("ping")
        break
    except Exception as exc:
        if time.monotonic() > deadline:
            sys.exit(f"mongo-server: nx-27017 did not answer ping: {exc}")
        time.sleep(0.1)
client.close()
PY
}

cmd_start() {
    mkdir -p "$STATE_DIR"
    chmod 700 "$STATE_DIR"
    if pid_alive "$(recorded_pid)"; then
        log "already running (pid $(recorded_pid))"
        return
    fi
    port_free "$PORT" || { log "port $PORT on 127.0.0.1 is already in use"; exit 1; }
    rm -rf "$DATA_DIR"
    mkdir -p "$DATA_DIR"
    # Foreground mode (no -d): the PID recorded here is the server itself.
    setsid "$NX" --host 127.0.0.1 -p "$PORT" --data-dir "$DATA_DIR" \
        --log-file "$LOG_FILE" --pid-file "$STATE_DIR/nx-own.pid" \
        </dev/null >>"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
    if ! wait_ready; then
        log "startup failed; last log lines:"
        tail -n 20 "$LOG_FILE" >&2 || true
        cmd_stop
        exit 1
    fi
    log "ready: mongodb 127.0.0.1:$PORT (pid $(cat "$PID_FILE"))"
}

run_command "$@"
