#!/usr/bin/env bash
# Opens COUNT authenticated listeners against presence-server and reports time, failures and
# server RSS per connection. Env: COUNT (2000), SOURCES (4), HOLD (3), PORT (9000),
# PRESENCE_URL/PRESENCE_PID (use a running server), SERVER_ARGS, EXTRA (more bench flags).
source "$(dirname "$0")/common.sh"
COUNT="${COUNT:-2000}"; SOURCES="${SOURCES:-4}"; HOLD="${HOLD:-3}"; PORT="${PORT:-9000}"
build with-server
start_server
# shellcheck disable=SC2046,SC2086
timeout 300 "$BENCH" connections --url "$URL" --count "$COUNT" --source-addresses "$SOURCES" \
    --hold "$HOLD" --timeout 120 $(pid_args) ${EXTRA:-}
