# Shared helpers for the bench wrappers (sourced, not run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
BENCH="$BIN/presence-bench"
SERVER_PID=""

build() {
    if [ -n "${SKIP_BUILD:-}" ]; then return; fi
    (cd "$ROOT" && swift build -c release --product presence-bench >&2)
    if [ -z "${PRESENCE_URL:-}" ] && [ "${1:-}" = "with-server" ]; then
        (cd "$ROOT" && swift build -c release --product presence-server >&2)
    fi
}

# Starts presence-server on $PORT unless PRESENCE_URL points at a running one; sets URL and SERVER_PID.
start_server() {
    if [ -n "${PRESENCE_URL:-}" ]; then
        URL="$PRESENCE_URL"
        SERVER_PID="${PRESENCE_PID:-}"
        return
    fi
    URL="ws://127.0.0.1:${PORT}"
    # shellcheck disable=SC2086
    # From the repo root so the default rules path (rules/presence.rules.json) resolves.
    # A fresh data directory per run (the default ./data would be shared, and locked, by concurrent runs).
    DATA_DIR="${DATA_DIR:-$(mktemp -d -t presence-bench-data.XXXXXX)}"
    (cd "$ROOT" && exec "$BIN/presence-server" --port "$PORT" --data-dir "$DATA_DIR" ${SERVER_ARGS:-}) \
        >"${SERVER_LOG:-/tmp/presence-bench-server.log}" 2>&1 &
    SERVER_PID=$!
    trap stop_server EXIT
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "server did not start listening on $PORT; see ${SERVER_LOG:-/tmp/presence-bench-server.log}" >&2
    exit 1
}

stop_server() {
    if [ -n "$SERVER_PID" ] && [ -z "${PRESENCE_URL:-}" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        timeout 10 tail --pid="$SERVER_PID" -f /dev/null || kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}

pid_args() { if [ -n "$SERVER_PID" ]; then echo "--server-pid $SERVER_PID"; fi; }
