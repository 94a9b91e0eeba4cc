#!/usr/bin/env bash
# presence-server and Mosquitto 2.0.11 (MQTT 3.1.1 over WebSockets) side by side, in one run, with
# the same generator. For each fan-out rate in RATES: ours `fanout`, then Mosquitto `mqtt-fanout`;
# for each churn rate in CHURN_RATES: ours `churn --protocol rtdb`, then Mosquitto
# `churn --protocol mqtt`; with MEMORY_COUNT > 0, memory per connection for both (MEMORY_COUNT
# connections, each subscribed to one user's presence, RSS read while they are open). One JSON line
# per scenario on stdout, each preceded on stderr by "== <what>". A fresh server/broker per scenario.
# Ours runs with the shipped rules, SQLite --durability normal (default), --log-level warning;
# fanout with the default --disconnect-grace 3, churn with --disconnect-grace $CHURN_GRACE (0).
# Env: USERS (1000), WATCHERS (1000), SUBS (10), RATES ("5000" writes/s; RATE also accepted),
#      DURATION (5), CHURN_USERS (max(2000, 2 x rate)), CHURN_WATCHERS (1000), CHURN_SUBS (10),
#      CHURN_RATES ("500" connects/s; CHURN_RATE also accepted), CHURN_HOLD (0.5 s),
#      CHURN_ABORT (0.5), CHURN_GRACE (0), MEMORY_COUNT (0 = skip; at most ~19,900 here),
#      PORT (9190; Mosquitto on PORT+10/+11), OURS_ARGS (more presence-server flags, e.g.
#      "--storage memory" to match Mosquitto's persistence false), TRANSPORT (the fan-out generator's:
#      lws, or epoll), SERVER_CPU / GENERATOR_CPU (pin the server or broker and the generator with
#      taskset, e.g. 0 and 1). An empty RATES or CHURN_RATES skips.
# Issue 17's per-core table (pinned, epoll generator, memory/durable/Mosquitto) is
# bench/fanout-vs-mosquitto.sh.
# The heavier shapes of issue 8: RATES="7500 20000" CHURN_RATES="1000 2000" MEMORY_COUNT=19900.
# Every scenario runs even when one fails (a failed final-state check exits 2, a timeout 124); the
# script then names the failed runs on stderr and exits 1.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/mosquitto.sh"
USERS="${USERS:-1000}"; WATCHERS="${WATCHERS:-1000}"; SUBS="${SUBS:-10}"; RATES="${RATES-${RATE:-5000}}"; DURATION="${DURATION:-5}"
CHURN_WATCHERS="${CHURN_WATCHERS:-1000}"; CHURN_SUBS="${CHURN_SUBS:-10}"; CHURN_RATES="${CHURN_RATES-${CHURN_RATE:-500}}"
CHURN_HOLD="${CHURN_HOLD:-0.5}"; CHURN_ABORT="${CHURN_ABORT:-0.5}"; CHURN_GRACE="${CHURN_GRACE:-0}"
MEMORY_COUNT="${MEMORY_COUNT:-0}"; TRANSPORT="${TRANSPORT:-lws}"
PORT="${PORT:-9190}"; MQTT_PORT=$((PORT + 10))
build with-server
trap 'stop_server; stop_mosquitto' EXIT

rss_of() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }

FAILED=()
# run NAME COMMAND...: runs one measurement; a failure is remembered, and the comparison goes on.
run() {
    local name="$1" status=0
    shift
    "$@" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "!! $name failed (exit $status)" >&2
        FAILED+=("$name (exit $status)")
    fi
}

for RATE in $RATES; do
    FANOUT=(--users "$USERS" --watchers "$WATCHERS" --subscriptions "$SUBS" --rate "$RATE" --duration "$DURATION" --settle 5
            --source-addresses 4 --transport "$TRANSPORT")
    echo "== fanout $RATE writes/s: presence-server" >&2
    DATA_DIR="" SERVER_ARGS="--log-level warning ${OURS_ARGS:-}" start_server
    trap 'stop_server; stop_mosquitto' EXIT
    # shellcheck disable=SC2046
    run "fanout $RATE/s presence-server" timeout $((DURATION + 200)) $(generator_pin) "$BENCH" fanout --url "$URL" "${FANOUT[@]}" $(pid_args)
    stop_server
    echo "== fanout $RATE writes/s: mosquitto" >&2
    start_mosquitto "$MQTT_PORT"
    # shellcheck disable=SC2046
    run "fanout $RATE/s mosquitto" timeout $((DURATION + 200)) $(generator_pin) "$BENCH" mqtt-fanout --url "$MQTT_URL" "${FANOUT[@]}" --server-pid "$MOSQ_PID"
    stop_mosquitto
done

for CHURN_RATE in $CHURN_RATES; do
    POOL="${CHURN_USERS:-$(( CHURN_RATE * 2 > 2000 ? CHURN_RATE * 2 : 2000 ))}"
    CHURN=(--users "$POOL" --watchers "$CHURN_WATCHERS" --subscriptions "$CHURN_SUBS" --rate "$CHURN_RATE"
           --duration "$DURATION" --hold "$CHURN_HOLD" --abort-fraction "$CHURN_ABORT" --settle 15 --source-addresses 4)
    echo "== churn $CHURN_RATE connects/s: presence-server --disconnect-grace $CHURN_GRACE" >&2
    DATA_DIR="" SERVER_ARGS="--log-level warning --disconnect-grace $CHURN_GRACE ${OURS_ARGS:-}" start_server
    trap 'stop_server; stop_mosquitto' EXIT
    # shellcheck disable=SC2046
    run "churn $CHURN_RATE/s presence-server" timeout $((DURATION + 200)) "$BENCH" churn --protocol rtdb --url "$URL" "${CHURN[@]}" --grace "$CHURN_GRACE" $(pid_args)
    stop_server
    echo "== churn $CHURN_RATE connects/s: mosquitto" >&2
    start_mosquitto "$MQTT_PORT"
    run "churn $CHURN_RATE/s mosquitto" timeout $((DURATION + 200)) "$BENCH" churn --protocol mqtt --url "$MQTT_URL" "${CHURN[@]}" --server-pid "$MOSQ_PID"
    stop_mosquitto
done

if [ "$MEMORY_COUNT" -gt 0 ]; then
    # The same shape for both: 1,000 writers and MEMORY_COUNT - 1,000 watchers of one user each,
    # a trickle of writes; the generator reads the server's RSS before closing.
    MEM=(--users 1000 --watchers $((MEMORY_COUNT - 1000)) --subscriptions 1 --rate 100 --duration 1 --settle 5 --source-addresses 4)
    echo "== memory, $MEMORY_COUNT connections: presence-server (--rx-buffer 512); baseline RSS on stderr" >&2
    DATA_DIR="" SERVER_ARGS="--log-level warning --rx-buffer 512 ${OURS_ARGS:-}" start_server
    trap 'stop_server; stop_mosquitto' EXIT
    echo "baseline_rss $(rss_of "$SERVER_PID")" >&2
    # shellcheck disable=SC2046
    run "memory presence-server" timeout 300 "$BENCH" fanout --url "$URL" "${MEM[@]}" $(pid_args)
    stop_server
    echo "== memory, $MEMORY_COUNT connections: mosquitto; baseline RSS on stderr" >&2
    start_mosquitto "$MQTT_PORT"
    echo "baseline_rss $(rss_of "$MOSQ_PID")" >&2
    run "memory mosquitto" timeout 300 "$BENCH" mqtt-fanout --url "$MQTT_URL" "${MEM[@]}" --server-pid "$MOSQ_PID"
    stop_mosquitto
fi

if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "compare: ${#FAILED[@]} run(s) failed:" >&2
    printf '  %s\n' "${FAILED[@]}" >&2
    exit 1
fi
