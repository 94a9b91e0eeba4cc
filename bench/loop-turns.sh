#!/usr/bin/env bash
# How long the server's loop turns last during an attack (docs/robustness.md, "The loop's own
# pauses"): runs one scenario of bench/attack.sh pinned (PIN=1), and records 10 s of its attack
# phase with perf: the loop thread's epoll_wait exits and entries (a turn is the time between
# them: work, and any time the thread was preempted or blocked meanwhile), then prints the turns'
# distribution and the bystander's line. Needs perf and root (tracepoints).
# Env: SCENARIO (online-list), SERVER_ARGS (extra flags for the server), OUT (prefix of the files
# kept: the attack's JSON and log, the perf data; default a temporary directory).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCENARIO="${SCENARIO:-online-list}"
OUT="${OUT:-$(mktemp -d -t presence-loop-turns.XXXXXX)/turns}"
has_setup=$(cd "$ROOT/bench" && python3 -c "import sys; sys.path.insert(0, '../Tests/live'); import attack_scenarios as a; print('y' if 'setup' in a.SCENARIOS['$SCENARIO'] else '')")
BASELINE=10 SKIP_BUILD=1 PIN=1 SCENARIO="$SCENARIO" SERVER_ARGS="${SERVER_ARGS:-}" "$ROOT/bench/attack.sh" > "$OUT.json" 2> "$OUT.err" &
attack=$!
if [ -n "$has_setup" ]; then ready="setup done"; else ready="server pid"; fi
until grep -q "$ready" "$OUT.err" 2>/dev/null; do sleep 0.1; done
pid=$(grep -o "server pid [0-9]*" "$OUT.err" | tail -1 | awk '{print $3}')
sleep 13  # 1 s of connections, 10 s of baseline, 2 s into the attack
perf record -q -o "$OUT.perf" -e 'syscalls:sys_enter_epoll_wait,syscalls:sys_exit_epoll_wait' -t "$pid" -- sleep 10 > /dev/null 2>&1
wait "$attack" || true
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
