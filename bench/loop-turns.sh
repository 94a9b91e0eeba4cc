#!/usr/bin/env bash
# How long the server's loop turns last during an attack (docs/robustness.md, "The loop's own
# pauses"): runs one scenario of bench/attack.sh pinned (PIN=1), and records 10 s of its attack
# phase with perf: the loop thread's epoll_wait exits and entries (a turn is the time between
# them: work, and any time the thread was preempted or blocked meanwhile), then prints the turns'
# distribution and the bystander's line. Needs perf and root (tracepoints).
# Env: SCENARIO (online-list), SERVER_ARGS (extra flags for the server), OUT (prefix of the files
# kept: the attack's JSON and log, the perf data; default a temporary directory).
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SCENARIO="${SCENARIO:-online-list}"
OUT="${OUT:-$(mktemp -d -t presence-loop-turns.XXXXXX)/turns}"
attack_in_background "$OUT"
perf record -q -o "$OUT.perf" -e 'syscalls:sys_enter_epoll_wait,syscalls:sys_exit_epoll_wait' -t "$SERVER_PID" -- sleep 10 > /dev/null 2>&1
wait "$ATTACK_PID" || true
perf script -i "$OUT.perf" -F time,event 2>/dev/null | python3 -c '
import sys
turns, started = [], None
for line in sys.stdin:
    parts = line.split()
    at, event = float(parts[0].rstrip(":")), parts[1]
    if "exit" in event:
        started = at
    elif started is not None:
        turns.append((at - started) * 1e6)
        started = None
turns.sort()
n = len(turns)
if not n:
    sys.exit("no turns recorded")
at = lambda q: turns[min(n - 1, int(n * q))]
print(f"{n} turns in 10 s: p50 {at(.5):.0f} us, p90 {at(.9):.0f}, p99 {at(.99):.0f}, p99.9 {at(.999):.0f}, max {turns[-1]:.0f}; "
      f"over 0.5 ms: {sum(t > 500 for t in turns)}, over 1 ms: {sum(t > 1000 for t in turns)}; in turns {sum(turns) / 1e6:.2f} s")'
grep "^ *bystander p99" "$OUT.err" || true
echo "kept: $OUT.{json,err,perf}" >&2
