#!/usr/bin/env bash
# The SEQ round trip (EVALSHA through PresenceRedis), the append -> tail delivery time and Redis's
# CPU per write at fixed rates, against a redis-server this script starts (free port, temporary
# directory, AOF with appendfsync always, as the design runs it) and stops.
# Redis is pinned to CPU 0 and the generator to CPU 1 (taskset), so Redis's CPU per write is not
# inflated by migrations. Env: RATES ("1000,5000,10000"), DURATION (5 s), FSYNC (always | everysec | no).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release}"
if [ -z "${SKIP_BUILD:-}" ]; then (cd "$ROOT" && swift build -c release --product presence-redis-bench >&2); fi
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
DIR="$(mktemp -d -t presence-redis-bench.XXXXXX)"
PIN0=(); PIN1=()
if command -v taskset >/dev/null; then PIN0=(taskset -c 0); PIN1=(taskset -c 1); fi
# taskset execs, so $! is Redis's own pid (the bench reads its CPU time from /proc).
"${PIN0[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync "${FSYNC:-always}" \
    --dir "$DIR" --logfile redis.log --daemonize no >/dev/null 2>&1 &
REDIS_PID=$!
trap 'kill -9 $REDIS_PID 2>/dev/null; wait $REDIS_PID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 1 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
"${PIN1[@]}" "$BIN/presence-redis-bench" --redis "127.0.0.1:$PORT" --redis-pid "$REDIS_PID" \
    --rates "${RATES:-1000,5000,10000}" --duration "${DURATION:-5}"
