#!/usr/bin/env bash
# Where the server's time goes in issue 17's fan-out shape at one rate: presence-server (durable or
# memory) or Mosquitto pinned to SERVER_CPU, the generator (epoll transport) on GENERATOR_CPU, and
# `perf record -g` on the server for the measured seconds. Prints the user/kernel split, time by
# thread and by library, the top symbols, self and inclusive (Swift names demangled), and system
# calls per second and per delivered event (how many sends a push costs), after the
# generator's summary. On loopback a sender's `send` includes the kernel's delivery to the receiving
# socket (softirq), so the server's kernel time includes part of the generator's receive path.
#
# perf uses the cpu-clock software event, which works on VMs without hardware counters (this one:
# `perf stat -e instructions true` says <not supported>). PROFILER=callgrind instead runs the server
# under `valgrind --tool=callgrind` (instruction counts, ~50x slower: use a low RATE and a short
# DURATION) and prints callgrind_annotate's top functions.
#
# Env: RATE (10000), SERVER (durable | memory | mosquitto), USERS (1000), WATCHERS (1000), SUBS (10),
#      DURATION (10), WARMUP (1), SETTLE (10), SERVER_CPU (0), GENERATOR_CPU (1), TRANSPORT (epoll),
#      TOP (40 symbols), PROFILER (perf | callgrind), SYSCALLS (1: count system calls by type with
#      perf stat on the syscall tracepoints during the same seconds; 0: don't), PORT (9390; Mosquitto PORT+10/+11),
#      OURS_ARGS, OUT (a new temp dir: perf.data, fanout.json, profile.txt), SKIP_BUILD, BIN.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/mosquitto.sh"
RATE="${RATE:-10000}"; SERVER="${SERVER:-durable}"; USERS="${USERS:-1000}"; WATCHERS="${WATCHERS:-1000}"; SUBS="${SUBS:-10}"
DURATION="${DURATION:-10}"; WARMUP="${WARMUP:-1}"; SETTLE="${SETTLE:-10}"; TOP="${TOP:-40}"
export SERVER_CPU="${SERVER_CPU:-0}" GENERATOR_CPU="${GENERATOR_CPU:-1}"
TRANSPORT="${TRANSPORT:-epoll}"; PROFILER="${PROFILER:-perf}"; PORT="${PORT:-9390}"; SYSCALLS="${SYSCALLS:-1}"
SYSCALL_EVENTS=""
for call in sendto sendmsg write writev recvfrom recvmsg read epoll_wait epoll_pwait epoll_ctl poll ppoll futex fsync fdatasync pwrite64; do
    SYSCALL_EVENTS="$SYSCALL_EVENTS${SYSCALL_EVENTS:+,}syscalls:sys_enter_$call"
done
OUT="${OUT:-$(mktemp -d -t presence-profile.XXXXXX)}"
mkdir -p "$OUT"
build with-server
"$ROOT/bench/install-bench-deps.sh" "$([ "$PROFILER" = perf ] && echo linux-perf || echo valgrind)" >&2
if [ "$PROFILER" = perf ] && ! perf record -q -e cpu-clock -o "$OUT/check.data" -- true >/dev/null 2>&1; then
    echo "perf record -e cpu-clock does not work here (perf_event_paranoid? run as root); try PROFILER=callgrind" >&2
    exit 1
fi
rm -f "$OUT/check.data"
trap 'stop_server; stop_mosquitto' EXIT

SHAPE=(--users "$USERS" --watchers "$WATCHERS" --subscriptions "$SUBS" --rate "$RATE" --duration "$DURATION"
       --warmup "$WARMUP" --settle "$SETTLE" --source-addresses 4 --transport "$TRANSPORT" --payload-field sentAt --seq-field seq)
case "$SERVER" in
    memory|durable)
        storage=""; [ "$SERVER" = memory ] && storage="--storage memory"
        if [ "$PROFILER" = callgrind ]; then
            BIN_SAVED="$BIN"
            # valgrind runs the binary; start_server runs "$BIN/presence-server", so wrap it. Valgrind
            # 3.19 cannot read the Swift 6.3 binary's DWARF ("possibly corrupted debuginfo"), so it
            # runs a copy without debug info (the symbol table keeps the function names).
            mkdir -p "$OUT/bin"
            objcopy --strip-debug "$BIN_SAVED/presence-server" "$OUT/bin/presence-server.nodebug"
            printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/callgrind.out "%s/bin/presence-server.nodebug" "$@"\n' \
                "$OUT" "$OUT" >"$OUT/bin/presence-server"
            chmod +x "$OUT/bin/presence-server"
            BIN="$OUT/bin"
        fi
        DATA_DIR="$(mktemp -d -t presence-bench-data.XXXXXX)"
        START_TRIES=$([ "$PROFILER" = callgrind ] && echo 1200 || echo 100) \
            SERVER_LOG="$OUT/server.log" SERVER_ARGS="--rules $ROOT/bench/rules/presence-bench.rules.json --log-level warning $storage ${OURS_ARGS:-}" start_server
        trap 'stop_server; stop_mosquitto' EXIT
        [ "$PROFILER" = callgrind ] && BIN="$BIN_SAVED" && BENCH="$BIN/presence-bench"
        TARGET_PID="$SERVER_PID"
        GENERATOR=("$BENCH" fanout --url "$URL" "${SHAPE[@]}" --server-pid "$SERVER_PID")
        ;;
    mosquitto)
        [ "$PROFILER" = callgrind ] && { echo "PROFILER=callgrind is for presence-server" >&2; exit 1; }
        start_mosquitto $((PORT + 10))
        TARGET_PID="$MOSQ_PID"
        GENERATOR=("$BENCH" mqtt-fanout --url "$MQTT_URL" "${SHAPE[@]}" --server-pid "$MOSQ_PID")
        ;;
    *) echo "SERVER is durable, memory or mosquitto" >&2; exit 1 ;;
esac

echo "== $SERVER at $RATE writes/s: server pid $TARGET_PID on CPU $SERVER_CPU, generator on CPU $GENERATOR_CPU ($PROFILER)" >&2
status=0
# shellcheck disable=SC2046
$(generator_pin) "${GENERATOR[@]}" >"$OUT/fanout.json" 2>"$OUT/generator.log" &
GEN_PID=$!
if [ "$PROFILER" = perf ]; then
    # Record exactly the measured seconds: from the generator's "measuring" line.
    for _ in $(seq 1 1200); do grep -q "measuring" "$OUT/generator.log" 2>/dev/null && break; sleep 0.1; done
    STAT_PID=""
    if [ "$SYSCALLS" = 1 ]; then
        # shellcheck disable=SC2046
        $(generator_pin) perf stat -x, -e "$SYSCALL_EVENTS" -p "$TARGET_PID" -o "$OUT/syscalls.csv" -- sleep "$DURATION" >/dev/null 2>&1 &
        STAT_PID=$!
    fi
    # shellcheck disable=SC2046
    $(generator_pin) perf record -q -e cpu-clock -g -p "$TARGET_PID" -o "$OUT/perf.data" -- sleep "$DURATION" >/dev/null 2>&1 || status=$?
    [ -z "$STAT_PID" ] || wait "$STAT_PID" || true
fi
wait "$GEN_PID" || status=$?
stop_server
stop_mosquitto
[ -n "${DATA_DIR:-}" ] && rm -rf "$DATA_DIR"

{
    echo "# $SERVER, $RATE writes/s, $USERS users, $WATCHERS watchers x $SUBS, $DURATION s measured ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 - "$OUT/fanout.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no generator report ({e})")
s, g, lat, ack = r.get("server_cpu_us_per_event", {}), r.get("generator_cpu_us_per_event", {}), r.get("latency", {}), r.get("ack_latency", {})
print(f"events/s in window {r['events_per_s_in_window']:,.0f} (overall {r['events_per_s']:,.0f}); write→watcher p50 {lat.get('p50_us', 0)/1000:.2f} ms, p99 {lat.get('p99_us', 0)/1000:.2f} ms; "
      f"acks/s {r['acks_per_s_in_window']:,.0f}, ack p99 {ack.get('p99_us', 0)/1000:.2f} ms; final state {'right' if r['final_state']['ok'] else 'WRONG'}")
print(f"server (from /proc): {r.get('server_cpu_fraction_of_one_core', 0):.2f} core; per event user {s.get('user') or 0:.2f} + system {s.get('system') or 0:.2f} = {s.get('total') or 0:.2f} µs")
print(f"generator: {r.get('generator_cpu_fraction_of_one_core', 0):.2f} core, {g.get('total') or 0:.2f} µs per event; pace kept: {r.get('pace_kept')}")
PY
    if [ "$PROFILER" = perf ] && [ -s "$OUT/perf.data" ]; then
        report() { perf report -i "$OUT/perf.data" --stdio --no-children -g none --percent-limit "$1" --sort "$2" 2>/dev/null | grep '%'; }
        echo
        echo "## user / kernel (perf samples)"
        report 0 dso | awk '{ p = $1; sub("%", "", p); if ($2 == "[kernel.kallsyms]") k += p; else u += p }
                            END { printf "user %.1f %%, kernel %.1f %%\n", u, k }'
        echo
        echo "## by thread (perf's pid key is the thread id)"
        report 0.5 pid
        echo
        echo "## by library"
        report 0.5 dso
        echo
        echo "## top $TOP symbols (self time)"
        report 0.2 dso,sym | sed -n "1,${TOP}p" | swift demangle --simplified
        echo
        echo "## top $TOP symbols with their callees (inclusive, then self; kernel [k], user [.])"
        perf report -i "$OUT/perf.data" --stdio --children -g none --percent-limit 2 --sort sym 2>/dev/null | grep '%' \
            | sed -n "1,${TOP}p" | swift demangle --simplified
        echo
        if [ -s "$OUT/syscalls.csv" ]; then
            echo
            echo "## system calls in the measured seconds (perf stat on syscall tracepoints)"
            python3 - "$OUT/syscalls.csv" "$OUT/fanout.json" "$DURATION" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
seconds = float(sys.argv[3])
events = r["events_per_s_in_window"] * seconds
print(f"{'call':<12} {'per s':>10} {'per delivered event':>20}")
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) < 3 or not f[0].strip().isdigit():
        continue
    n, name = int(f[0]), f[2].replace("syscalls:sys_enter_", "")
    if n:
        print(f"{name:<12} {n / seconds:>10,.0f} {n / events if events else 0:>20.3f}")
PY
        fi
        echo
        echo "(perf report -i $OUT/perf.data --no-children for the call graphs)"
    elif [ "$PROFILER" = callgrind ] && [ -s "$OUT/callgrind.out" ]; then
        echo
        echo "## top $TOP functions by instructions (whole run, callgrind)"
        callgrind_annotate "$OUT/callgrind.out" 2>/dev/null | grep -m1 "PROGRAM TOTALS" || true
        callgrind_annotate "$OUT/callgrind.out" 2>/dev/null | sed -n '/file:function/,$p' | sed -n "3,$((TOP + 2))p" \
            | swift demangle --simplified
    fi
} | tee "$OUT/profile.txt"
echo "files in $OUT" >&2
exit "$status"
