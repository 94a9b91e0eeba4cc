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
    # With SERVER_CPU set (e.g. 0), the server and all its threads run pinned to that CPU.
    local pin=()
    if [ -n "${SERVER_CPU:-}" ]; then pin=(taskset -c "$SERVER_CPU"); fi
    (cd "$ROOT" && exec "${pin[@]}" "$BIN/presence-server" --port "$PORT" --data-dir "$DATA_DIR" ${SERVER_ARGS:-}) \
        >"${SERVER_LOG:-/tmp/presence-bench-server.log}" 2>&1 &
    SERVER_PID=$!
    trap stop_server EXIT
    # START_TRIES tenths of a second to start listening (more under valgrind).
    for _ in $(seq 1 "${START_TRIES:-100}"); do
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

# The generator's command prefix: pinned to GENERATOR_CPU when set (e.g. 1).
generator_pin() { if [ -n "${GENERATOR_CPU:-}" ]; then echo "taskset -c $GENERATOR_CPU"; fi; }

# For the tracing wrappers (loop-turns.sh, loop-waits.sh): runs one scenario of attack.sh pinned,
# with a 10 s baseline, in the background (its JSON in $1.json, its log in $1.err), and returns
# 2 s into the attack, when 10 s of it can be recorded; sets ATTACK_PID and SERVER_PID.
attack_in_background() {
    local out="$1" ready="server pid"
    local has_setup
    has_setup=$(cd "$ROOT/bench" && python3 -c "import sys; sys.path.insert(0, '../Tests/live'); import attack_scenarios as a; print('y' if 'setup' in a.SCENARIOS['$SCENARIO'] else '')")
    BASELINE=10 SKIP_BUILD=1 PIN=1 SCENARIO="$SCENARIO" SERVER_ARGS="${SERVER_ARGS:-}" "$ROOT/bench/attack.sh" > "$out.json" 2> "$out.err" &
    ATTACK_PID=$!
    if [ -n "$has_setup" ]; then ready="setup done"; fi
    until grep -q "$ready" "$out.err" 2>/dev/null; do sleep 0.1; done
    SERVER_PID=$(grep -o "server pid [0-9]*" "$out.err" | tail -1 | awk '{print $3}')
    sleep 13  # 1 s of connections, 10 s of baseline, 2 s into the attack
}
