#!/usr/bin/env bash
# presence-server and Mosquitto 2.0.11 (MQTT 3.1.1 over WebSockets) side by side, in one run, with
# the same generator: the fanout shape, then the churn shape. Prints four JSON lines, in order:
# ours fanout, Mosquitto fanout, ours churn, Mosquitto churn. A fresh server/broker per scenario.
# Ours runs with the shipped rules, SQLite --durability normal (default), --log-level warning;
# fanout with the default --disconnect-grace 3, churn with --disconnect-grace $CHURN_GRACE (0).
# Env: USERS (1000), WATCHERS (1000), SUBS (10), RATE (5000 writes/s), DURATION (5),
#      CHURN_USERS (2000), CHURN_WATCHERS (1000), CHURN_SUBS (10), CHURN_RATE (500 connects/s),
#      CHURN_HOLD (0.5 s), CHURN_ABORT (0.5), CHURN_GRACE (0), PORT (9190; Mosquitto on PORT+10/+11).
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/mosquitto.sh"
USERS="${USERS:-1000}"; WATCHERS="${WATCHERS:-1000}"; SUBS="${SUBS:-10}"; RATE="${RATE:-5000}"; DURATION="${DURATION:-5}"
CHURN_USERS="${CHURN_USERS:-2000}"; CHURN_WATCHERS="${CHURN_WATCHERS:-1000}"; CHURN_SUBS="${CHURN_SUBS:-10}"
CHURN_RATE="${CHURN_RATE:-500}"; CHURN_HOLD="${CHURN_HOLD:-0.5}"; CHURN_ABORT="${CHURN_ABORT:-0.5}"; CHURN_GRACE="${CHURN_GRACE:-0}"
PORT="${PORT:-9190}"; MQTT_PORT=$((PORT + 10))
build with-server
trap 'stop_server; stop_mosquitto' EXIT
FANOUT=(--users "$USERS" --watchers "$WATCHERS" --subscriptions "$SUBS" --rate "$RATE" --duration "$DURATION" --settle 5 --source-addresses 4)
CHURN=(--users "$CHURN_USERS" --watchers "$CHURN_WATCHERS" --subscriptions "$CHURN_SUBS" --rate "$CHURN_RATE"
       --duration "$DURATION" --hold "$CHURN_HOLD" --abort-fraction "$CHURN_ABORT" --settle 15 --source-addresses 4)

echo "== fanout: presence-server" >&2
SERVER_ARGS="--log-level warning" start_server
trap 'stop_server; stop_mosquitto' EXIT
# shellcheck disable=SC2046
timeout $((DURATION + 200)) "$BENCH" fanout --url "$URL" "${FANOUT[@]}" $(pid_args) || true
stop_server
echo "== fanout: mosquitto" >&2
start_mosquitto "$MQTT_PORT"
timeout $((DURATION + 200)) "$BENCH" mqtt-fanout --url "$MQTT_URL" "${FANOUT[@]}" --server-pid "$MOSQ_PID" || true
stop_mosquitto

echo "== churn: presence-server --disconnect-grace $CHURN_GRACE" >&2
DATA_DIR="" SERVER_ARGS="--log-level warning --disconnect-grace $CHURN_GRACE" start_server
trap 'stop_server; stop_mosquitto' EXIT
# shellcheck disable=SC2046
timeout $((DURATION + 200)) "$BENCH" churn --protocol rtdb --url "$URL" "${CHURN[@]}" --grace "$CHURN_GRACE" $(pid_args) || true
stop_server
echo "== churn: mosquitto" >&2
start_mosquitto "$MQTT_PORT"
timeout $((DURATION + 200)) "$BENCH" churn --protocol mqtt --url "$MQTT_URL" "${CHURN[@]}" --server-pid "$MOSQ_PID" || true
stop_mosquitto
