#!/usr/bin/env bash
# Issue 17's table in one run: fan-out per core, presence-server (memory, then durable) against
# Mosquitto 2.0.11, each alone on SERVER_CPU (taskset), the generator (presence-bench, epoll
# transport) on GENERATOR_CPU, a fresh server or broker per run.
#
# Shape: USERS writers flap their presence at R writes/s in total, WATCHERS watchers each follow
# SUBS users (1,000 / 1,000 / 10: every write makes 10 pushes). Ours runs bench/rules/
# presence-bench.rules.json (the shipped presence rules plus the two numeric fields the generator
# embeds: sentAt for exact latency, seq for the final-state check), --log-level warning, default
# --disconnect-grace; "durable" is the default SQLite storage (--durability normal) in a fresh data
# directory, "memory" is --storage memory. Mosquitto: bench/mosquitto.sh's config (persistence
# false), writers publish retained QoS 1 with a retained QoS 1 offline Will, watchers subscribe
# QoS MQTT_SUB_QOS, the same two fields in each payload.
#
# Output: one JSON line per (server, R) on stdout ({"server":…,"rate":…,"loadavg_before":…,
# "result":{presence-bench's report}}), after a first {"meta":…} line; then the markdown tables
# (bench/fanout-table.py). Everything is also kept in OUT (results.jsonl, table.md, server logs, and
# pushback-<server>-<R>.txt: the push-back and shedding counters from /metrics at the end of each run of ours).
# Every run happens even if one fails; a failed final-state check (exit 2) or a timeout makes the
# script exit 1 at the end, naming the runs.
#
# Env: RATES ("2000 5000 10000 15000 20000"), SERVERS ("memory durable mosquitto"), USERS (1000),
#      WATCHERS (1000), SUBS (10), DURATION (10), WARMUP (1), SETTLE (10), SERVER_CPU (0),
#      GENERATOR_CPU (1), TRANSPORT (epoll), MQTT_SUB_QOS (0), PORT (9290; Mosquitto PORT+10/+11),
#      OURS_ARGS (more presence-server flags), GEN_ARGS (more `presence-bench fanout` flags, e.g.
#      --writer-window 4), OUT (a new temp dir), SKIP_BUILD, BIN.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/mosquitto.sh"
RATES="${RATES:-2000 5000 10000 15000 20000}"; SERVERS="${SERVERS:-memory durable mosquitto}"
USERS="${USERS:-1000}"; WATCHERS="${WATCHERS:-1000}"; SUBS="${SUBS:-10}"
DURATION="${DURATION:-10}"; WARMUP="${WARMUP:-1}"; SETTLE="${SETTLE:-10}"
export SERVER_CPU="${SERVER_CPU:-0}" GENERATOR_CPU="${GENERATOR_CPU:-1}"
TRANSPORT="${TRANSPORT:-epoll}"; MQTT_SUB_QOS="${MQTT_SUB_QOS:-0}"
PORT="${PORT:-9290}"; MQTT_PORT=$((PORT + 10))
OUT="${OUT:-$(mktemp -d -t presence-fanout-vs-mosquitto.XXXXXX)}"
mkdir -p "$OUT"
RULES="$ROOT/bench/rules/presence-bench.rules.json"
build with-server
[ -x "$MOSQUITTO" ] || "$ROOT/bench/install-bench-deps.sh" mosquitto >&2
trap 'stop_server; stop_mosquitto' EXIT

RESULTS="$OUT/results.jsonl"
: >"$RESULTS"
emit() { echo "$1" | tee -a "$RESULTS"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' ','; }
mosquitto_version="$("$MOSQUITTO" -h 2>/dev/null | head -1 || true)"
emit "$(printf '{"meta":{"date":"%s","host_cpus":%s,"uptime":"%s","commit":"%s","mosquitto":"%s","shape":"%s users, %s watchers x %s","duration_s":%s,"settle_s":%s,"server_cpu":%s,"generator_cpu":%s,"transport":"%s","mqtt_subscribe_qos":%s}}' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(nproc)" "$(uptime | sed 's/^ *//')" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$mosquitto_version" "$USERS" "$WATCHERS" "$SUBS" "$DURATION" "$SETTLE" "$SERVER_CPU" "$GENERATOR_CPU" "$TRANSPORT" "$MQTT_SUB_QOS")"

SHAPE=(--users "$USERS" --watchers "$WATCHERS" --subscriptions "$SUBS" --duration "$DURATION" --warmup "$WARMUP"
       --settle "$SETTLE" --source-addresses 4 --transport "$TRANSPORT" --payload-field sentAt --seq-field seq)
LIMIT=$((DURATION + WARMUP + SETTLE + 180))
FAILED=()
# measure SERVER RATE COMMAND...: one generator run; its report becomes one JSON line.
measure() {
    local server="$1" rate="$2" status=0 before report
    shift 2
    before="$(loadavg)"
    # shellcheck disable=SC2046
    report="$(timeout "$LIMIT" $(generator_pin) "$@")" || status=$?
    [ -n "$report" ] || report=null
    emit "$(printf '{"server":"%s","rate":%s,"exit":%s,"loadavg_before":"%s","loadavg_after":"%s","result":%s}' \
        "$server" "$rate" "$status" "$before" "$(loadavg)" "$report")"
    if [ "$status" -ne 0 ]; then
        echo "!! $server at $rate writes/s failed (exit $status)" >&2
        FAILED+=("$server $rate/s (exit $status)")
    fi
}

for R in $RATES; do
    for S in $SERVERS; do
        echo "== $R writes/s: $S (server on CPU $SERVER_CPU, generator on CPU $GENERATOR_CPU)" >&2
        case "$S" in
            memory|durable)
                storage=""; [ "$S" = memory ] && storage="--storage memory"
                DATA_DIR="$(mktemp -d -t presence-bench-data.XXXXXX)"
                SERVER_LOG="$OUT/server-$S-$R.log" \
                    SERVER_ARGS="--rules $RULES --log-level warning $storage ${OURS_ARGS:-}" start_server
                trap 'stop_server; stop_mosquitto' EXIT
                # shellcheck disable=SC2086
                measure "$S" "$R" "$BENCH" fanout --url "$URL" --rate "$R" "${SHAPE[@]}" --server-pid "$SERVER_PID" ${GEN_ARGS:-}
                # Whether push-back and shedding engaged (their log lines are at notice level, under this warning level).
                curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -E '^presence_(writers_(paused_total|pushed_back)|writes_shed_total|write_shedding)' \
                    >"$OUT/pushback-$S-$R.txt" || true
                stop_server
                rm -rf "$DATA_DIR"
                ;;
            mosquitto)
                start_mosquitto "$MQTT_PORT"
                measure mosquitto "$R" "$BENCH" mqtt-fanout --url "$MQTT_URL" --rate "$R" "${SHAPE[@]}" \
                    --subscribe-qos "$MQTT_SUB_QOS" --server-pid "$MOSQ_PID"
                stop_mosquitto
                ;;
            *) echo "unknown server $S (memory, durable, mosquitto)" >&2; exit 1 ;;
        esac
    done
done

echo >&2
python3 "$ROOT/bench/fanout-table.py" "$RESULTS" | tee "$OUT/table.md" || echo "!! could not make the table from $RESULTS" >&2
echo "results in $OUT" >&2
if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "fanout-vs-mosquitto: ${#FAILED[@]} run(s) failed:" >&2
    printf '  %s\n' "${FAILED[@]}" >&2
    exit 1
fi
