#!/usr/bin/env bash
# The transport's ceiling on this machine: presence-bench's lws echo server (libuv, one thread)
# under K connections with one message in flight each, then 1 connection (ping-pong latency).
# Env: PORT (9100), K (50), DURATION (5), SIZE (64).
source "$(dirname "$0")/common.sh"
PORT="${PORT:-9100}"; K="${K:-50}"; DURATION="${DURATION:-5}"; SIZE="${SIZE:-64}"
build
"$BENCH" echo-server --port "$PORT" --duration $((2 * DURATION + 60)) >/tmp/presence-bench-echo-server.json 2>/dev/null &
SERVER_PID=$!
trap stop_server EXIT
sleep 0.5
for k in "$K" 1; do
    timeout $((DURATION + 60)) "$BENCH" echo-ceiling --url "ws://127.0.0.1:$PORT" --connections "$k" \
        --duration "$DURATION" --size "$SIZE" --server-pid "$SERVER_PID"
done
stop_server
cat /tmp/presence-bench-echo-server.json
