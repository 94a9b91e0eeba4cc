#!/usr/bin/env bash
# Floods and slow clients (issue 16): each attack of bench/attack_scenarios.py against a fresh
# release server, with a bystander's write->push latency with and without it, the server's RSS,
# fds and CPU, and what happened to the offender (docs/robustness.md, "Floods and slow clients").
# Exit code 1 if the server stopped or the bystander was starved during an attack.
# Env: SCENARIO (all; or a comma-separated list, see `python3 bench/attack.py --list`), BASELINE (as DURATION:
# as many pushes alone as under attack, so both p99s rest on as many samples),
# DURATION (20), RATE (50 bystander writes/s), OUT (also write the reports to this JSON file),
# STRICT (1: also fail when the bystander's p99 more than doubles), SKIP_BUILD, SERVER_ARGS (extra flags for
# every server, e.g. "--slice-reads-over 0" to compare with reads answered at once), PIN (1: the server
# and the bystander on CPU 0, the attackers on CPU 1: an attacker elsewhere on the network),
# BYSTANDER_SLICE_US (100: the bystander at nice 0 with a 100 µs slice, so it does not wait for the
# core it shares with the server as a client on its own machine would not; 0: as the server),
# SERVER (the server binary; .build/release/presence-server, built unless SKIP_BUILD).
# Everything runs under nice 10 (the machine may be shared); attackers another 10 below the server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${SKIP_BUILD:-}" ]; then (cd "$ROOT" && swift build -c release --product presence-server >&2); fi
# The connection storm and slow heads hold over a thousand sockets at once.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
args=(--server "${SERVER:-$ROOT/.build/release/presence-server}" --scenario "${SCENARIO:-all}" --baseline "${BASELINE:-${DURATION:-20}}"
      --duration "${DURATION:-20}" --rate "${RATE:-50}")
if [ -n "${OUT:-}" ]; then args+=(--json "$OUT"); fi
if [ -n "${STRICT:-}" ]; then args+=(--strict); fi
if [ -n "${PIN:-}" ]; then args+=(--pin); fi
if [ -n "${BYSTANDER_SLICE_US:-}" ]; then args+=(--bystander-slice-us "$BYSTANDER_SLICE_US"); fi
if [ -n "${SERVER_ARGS:-}" ]; then args+=(--server-args="$SERVER_ARGS"); fi
exec nice -n 10 python3 "$ROOT/bench/attack.py" "${args[@]}"
