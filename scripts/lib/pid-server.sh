# Shared by the scripts that run a throw-away test server (scripts/s3-server.sh,
# scripts/mongo-server.sh): the PID file, liveness by the process's own command line (never
# signal a reused PID), a loopback port check, stop by PID, and status. Source it after setting:
#   NAME        prefix of every message          PID_FILE    where start recorded the PID
#   PROCESS_RE  what /proc/<pid>/cmdline matches DATA_DIR    removed on stop
#   ADDRESS     what status reports

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }

pid_alive() {
    local pid="$1"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$PROCESS_RE"
}

recorded_pid() { [[ -f "$PID_FILE" ]] && cat "$PID_FILE" || true; }

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cmd_stop() {
    local pid
    pid="$(recorded_pid)"
    if ! pid_alive "$pid"; then
        log "not running"
        rm -f "$PID_FILE"
        return
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 50); do
        pid_alive "$pid" || break
        sleep 0.2
    done
    if pid_alive "$pid"; then
        log "pid $pid did not stop after 10 s; sending KILL"
        kill -KILL "$pid"
    fi
    rm -f "$PID_FILE"
    rm -rf "$DATA_DIR"
    log "stopped (pid $pid)"
}

cmd_status() {
    if pid_alive "$(recorded_pid)"; then
        log "running (pid $(recorded_pid)) on $ADDRESS"
        return 0
    fi
    log "not running"
    return 1
}

run_command() {
    case "${1:-start}" in
        start) cmd_start ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        *) log "usage: $0 [start|stop|status]"; exit 2 ;;
    esac
}
