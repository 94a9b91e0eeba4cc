#!/usr/bin/env bash
# `make bench`: a short version of every scenario, a few minutes in all. Each prints one JSON line.
# The full versions and recorded results are in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product presence-bench >&2
swift build -c release --product presence-server >&2
export SKIP_BUILD=1
echo "== echo ceiling (lws echo server, K=50)" >&2
K=50 DURATION=3 PORT=9180 bench/echo.sh
echo "== connections (2000 listeners)" >&2
COUNT=2000 HOLD=1 PORT=9181 bench/connections.sh
echo "== fanout (200 users, 200 watchers x 10, 1000 writes/s, 5 s)" >&2
USERS=200 WATCHERS=200 SUBS=10 RATE=1000 DURATION=5 PORT=9182 bench/fanout.sh
echo "== Mosquitto side by side (fanout, churn), ~30 s; skipped without /usr/sbin/mosquitto" >&2
if [ -x /usr/sbin/mosquitto ]; then PORT=9190 bench/compare.sh; fi
echo "== issue 17's per-core table, one rate (2000 writes/s, 3 s): memory, durable, Mosquitto; skipped without /usr/sbin/mosquitto" >&2
if [ -x /usr/sbin/mosquitto ]; then RATES=2000 DURATION=3 SETTLE=5 PORT=9290 bench/fanout-vs-mosquitto.sh; fi
echo "== rules (presence rules, 100k users)" >&2
ITERATIONS=100000 bench/rules.sh
echo "== storage (SQLite group commits of presence writes, normal durability)" >&2
MODES=normal WRITES_PER_COMMIT="1 100" COMMITS_WRITES=10000 bench/storage.sh
echo "== floods (issue 16): message storm, slow readers, connection storm, REST bodies; bystander p99, server RSS and CPU, ~1.5 min" >&2
SCENARIO=message-storm,slow-reader-ws,connection-storm,rest-bodies BASELINE=3 DURATION=5 bench/attack.sh
