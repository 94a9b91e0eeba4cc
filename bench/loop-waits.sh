#!/usr/bin/env bash
# Who had the core while the server's loop thread waited for it during an attack
# (docs/robustness.md, "The storage thread yields inside SQLite"): runs one scenario of
# bench/attack.sh pinned (PIN=1: the server and the bystander on CPU 0), records 10 s of CPU 0's
# context switches with perf from 2 s into the attack, and prints the loop thread's waits (from
# being preempted, still runnable, to running again): how many, their p99 and max, how many passed
# 0.5 ms, and which tasks ran meanwhile (the server's storage thread, the bystander, other
# processes on the machine), in all waits and in those over 0.5 ms. Needs perf and root.
# Env: SCENARIO (slow-reader-ws), SERVER (the server binary), SERVER_ARGS, OUT (prefix of the files
# kept: the attack's JSON and log, the perf data; default a temporary directory).
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SCENARIO="${SCENARIO:-slow-reader-ws}"
OUT="${OUT:-$(mktemp -d -t presence-loop-waits.XXXXXX)/waits}"
attack_in_background "$OUT"
perf record -q -o "$OUT.perf" -e sched:sched_switch -C 0 -- sleep 10 > /dev/null 2>&1
wait "$ATTACK_PID" || true
perf script -i "$OUT.perf" -F time,trace 2>/dev/null | python3 -c '
import collections, re, sys
loop = int(sys.argv[1])
switch = re.compile(r"\s*([\d.]+):\s*prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)")
waits, ran, ran_long = [], collections.Counter(), collections.Counter()
running, since, wait_began, during = None, None, None, collections.Counter()
for line in sys.stdin:
    m = switch.match(line)
    if not m:
        continue
    at, prev, state, name, nxt = float(m[1]), int(m[3]), m[4], m[5], int(m[6])
    if wait_began is not None and running is not None:
        during[running] += at - since
    if prev == loop and state.startswith("R"):  # preempted, still runnable
        wait_began, during = at, collections.Counter()
    if nxt == loop and wait_began is not None:
        waits.append(at - wait_began)
        ran.update(during)
        if at - wait_began > 0.0005:
            ran_long.update(during)
        wait_began = None
    running, since = f"{name}/{nxt}", at
if not waits:
    sys.exit("no waits recorded")
waits.sort()
n = len(waits)
show = lambda counter: ", ".join(f"{who} {seconds * 1e3:.1f}" for who, seconds in counter.most_common(6))
print(f"loop thread {loop}: {n} waits for the core in 10 s, {sum(waits) * 1e3:.1f} ms in all; p99 {waits[int(n * .99)] * 1e6:.0f} us, "
      f"max {waits[-1] * 1e6:.0f} us; over 0.5 ms: {sum(w > 0.0005 for w in waits)}")
print(f"ran meanwhile (ms): {show(ran)}")
print(f"ran in the waits over 0.5 ms (ms): {show(ran_long)}")
print("(the server: presence-server is its loop thread, storage-writer its storage thread)")' "$SERVER_PID"
grep "^ *bystander p99" "$OUT.err" || true
echo "kept: $OUT.{json,err,perf}" >&2
