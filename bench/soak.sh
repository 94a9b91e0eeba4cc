#!/usr/bin/env bash
# The soak (issue 16): CLIENTS presence clients flapping (reconnects, clean closes, FIN and RST
# drops, SIGKILL of whole client processes) for DURATION seconds against the release server, with
# watchers; RSS and fds over time, and every watcher's final view checked (bench/soak.py).
# Everything runs under nice 10 (the machine may be shared); the client processes another 10 below
# the server. Exit code 1 if a view is not exact.
# Env: CLIENTS (5000), WORKERS (10), WATCHERS (4), DURATION (600), KILL_EVERY (45), GRACE (3), SKIP_BUILD.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${SKIP_BUILD:-}" ]; then (cd "$ROOT" && swift build -c release --product presence-server >&2); fi
# Each client process holds up to CLIENTS/WORKERS sockets; the server one per client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec nice -n 10 python3 "$ROOT/bench/soak.py" --server "$ROOT/.build/release/presence-server" --clients "${CLIENTS:-5000}" \
    --workers "${WORKERS:-10}" --watchers "${WATCHERS:-4}" --duration "${DURATION:-600}" \
    --kill-every "${KILL_EVERY:-45}" --grace "${GRACE:-3}"
