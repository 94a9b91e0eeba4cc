#!/usr/bin/env bash
# Writers flap presence, watchers listen; latency, events/s, final-state check.
# Env: USERS (200), WATCHERS (200), SUBS (10), RATE (1000), DURATION (10), FIELD (payload field
# name, empty = client-side matching; the server needs rules that accept it, e.g.
# SERVER_ARGS="--rules bench/rules/presence-bench.rules.json" with FIELD=sentAt), SEQ_FIELD (e.g. seq),
# TRANSPORT (lws, or epoll), SERVER_CPU / GENERATOR_CPU (taskset pinning), PORT (9000),
# PRESENCE_URL/PRESENCE_PID, SERVER_ARGS, EXTRA.
source "$(dirname "$0")/common.sh"
USERS="${USERS:-200}"; WATCHERS="${WATCHERS:-200}"; SUBS="${SUBS:-10}"; RATE="${RATE:-1000}"
DURATION="${DURATION:-10}"; PORT="${PORT:-9000}"; FIELD="${FIELD:-}"
build with-server
start_server
FIELD_ARGS=""; if [ -n "$FIELD" ]; then FIELD_ARGS="--payload-field $FIELD"; fi
if [ -n "${SEQ_FIELD:-}" ]; then FIELD_ARGS="$FIELD_ARGS --seq-field $SEQ_FIELD"; fi
# shellcheck disable=SC2046,SC2086
timeout $((DURATION + 200)) $(generator_pin) "$BENCH" fanout --transport "${TRANSPORT:-lws}" --url "$URL" --users "$USERS" --watchers "$WATCHERS" \
    --subscriptions "$SUBS" --rate "$RATE" --duration "$DURATION" --settle 5 $FIELD_ARGS $(pid_args) ${EXTRA:-}
