#!/usr/bin/env bash
# Cluster costs at 1, 2 and 3 nodes under the same offered load (issue 14; docs/scaling.md,
# "Measured"). For each node count: a fresh redis-server (AOF, appendfsync $FSYNC) and that many
# presence-server nodes with --storage redis; `presence-bench fanout` writes at $RATE through node 1
# while the watchers sit on the other nodes (on node 1 when it is alone), so the latency it
# reports is write -> remote watcher. During the measured window it samples every node's and
# Redis's CPU (/proc/<pid>/stat) and Redis's INFO commandstats, and reports:
#   node CPU µs per applied write (every node applies every write) and per push delivered,
#   Redis CPU µs per write, Redis commands per write (all, EVALSHA, XREAD),
#   write -> ack and write -> (remote) watcher p50 / p99, RSS per connection.
# The machine these run on is usually shared: treat the numbers as costs on a busy machine.
#
# Env: NODES ("1 2 3"), RATE (500 writes/s), USERS (100 writers), WATCHERS (300), SUBS (10 users each
# watcher follows), DURATION (10 s measured), FSYNC (always), TRANSPORT (epoll), SKIP_BUILD, BIN,
# OUT (a JSON-lines file for the raw results; default a temporary file).
source "$(dirname "$0")/common.sh"
NODES="${NODES:-1 2 3}"; RATE="${RATE:-500}"; USERS="${USERS:-100}"; WATCHERS="${WATCHERS:-300}"
SUBS="${SUBS:-10}"; DURATION="${DURATION:-10}"; FSYNC="${FSYNC:-always}"
OUT="${OUT:-$(mktemp -t presence-cluster-bench.XXXXXX.jsonl)}"
REDIS_SERVER="$(command -v redis-server || echo /usr/bin/redis-server)"
[ -x "$REDIS_SERVER" ] || { echo "redis-server is not installed (scripts/install-deps.sh)" >&2; exit 1; }
build with-server

PIDS=()
WORK=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; done
    PIDS=()
    if [ -n "$WORK" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
wait_port() {
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}

run_one() {
    local n="$1"
    WORK="$(mktemp -d -t presence-cluster-bench.XXXXXX)"
    local redis_port; redis_port="$(free_port)"
    "$REDIS_SERVER" --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync "$FSYNC" \
        --dir "$WORK" >"$WORK/redis.log" 2>&1 &
    local redis_pid=$!
    PIDS+=("$redis_pid")
    wait_port "$redis_port"
    local ports=() node_pids=()
    for i in $(seq 1 "$n"); do
        local port; port="$(free_port)"
        (cd "$ROOT" && exec "$BIN/presence-server" --port "$port" --storage redis --redis "127.0.0.1:$redis_port" \
            --node-id "n$i" --data-dir "$WORK/node$i" --rules bench/rules/presence-bench.rules.json --log-level warning) >"$WORK/node$i.log" 2>&1 &
        node_pids+=("$!")
        PIDS+=("$!")
        ports+=("$port")
    done
    for port in "${ports[@]}"; do wait_port "$port"; done
    sleep 1
    local rss0=()
    for pid in "${node_pids[@]}"; do rss0+=("$(rss_kb "$pid")"); done
    local watcher_args=()
    if [ "$n" -gt 1 ]; then
        for port in "${ports[@]:1}"; do watcher_args+=(--watcher-url "ws://127.0.0.1:$port"); done
    fi
    # shellcheck disable=SC2046
    $(generator_pin) "$BENCH" fanout --transport "${TRANSPORT:-epoll}" --url "ws://127.0.0.1:${ports[0]}" "${watcher_args[@]}" \
        --namespace cluster-bench --users "$USERS" --watchers "$WATCHERS" --subscriptions "$SUBS" --rate "$RATE" \
        --duration "$DURATION" --warmup 2 --settle 5 --payload-field sentAt --server-pid "${node_pids[0]}" \
        >"$WORK/fanout.json" 2>"$WORK/fanout.err" &
    local fanout=$!
    for _ in $(seq 1 1200); do
        if grep -q "measuring" "$WORK/fanout.err" 2>/dev/null || ! kill -0 "$fanout" 2>/dev/null; then break; fi
        sleep 0.05
    done
    redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
    local t0 node0=() redis0
    t0=$(date +%s.%N)
    for pid in "${node_pids[@]}"; do node0+=("$(cpu_ticks "$pid")"); done
    redis0=$(cpu_ticks "$redis_pid")
    sleep "$DURATION"
    local t1 node1=() redis1 rss1=()
    t1=$(date +%s.%N)
    for pid in "${node_pids[@]}"; do node1+=("$(cpu_ticks "$pid")"); done
    redis1=$(cpu_ticks "$redis_pid")
    redis-cli -p "$redis_port" INFO commandstats >"$WORK/commandstats.txt"
    for pid in "${node_pids[@]}"; do rss1+=("$(rss_kb "$pid")"); done
    wait "$fanout" || echo "fanout exited with $? (see the result's failures)" >&2
    python3 - "$n" "$WORK" "$t0" "$t1" "$redis0" "$redis1" "${rss0[*]}" "${rss1[*]}" "$USERS" "$WATCHERS" "$(getconf CLK_TCK)" \
        "${node0[*]}" "${node1[*]}" >>"$OUT" <<'PY'
import json, re, sys
n, work, t0, t1, r0, r1, rss0, rss1, users, watchers, hz, n0, n1 = sys.argv[1:14]
n, users, watchers, hz = int(n), int(users), int(watchers), int(hz)
# Writers on node 1; watchers on nodes 2..n in turn (on node 1 when it is alone).
held = [users] + [0] * (n - 1)
for i in range(watchers):
    held[0 if n == 1 else 1 + i % (n - 1)] += 1
growth = [int(b) - int(a) for a, b in zip(rss0.split(), rss1.split())]
seconds = float(t1) - float(t0)
fan = json.loads(open(f"{work}/fanout.json").read().strip().splitlines()[-1])
writes = fan["acks_per_s_in_window"] * seconds
pushes = fan["events_per_s_in_window"] * seconds
stats = {}
for line in open(f"{work}/commandstats.txt"):
    m = re.match(r"cmdstat_(\w+(?:\|\w+)?):calls=(\d+)", line)
    if m:
        stats[m.group(1)] = int(m.group(2))
node_us = [(int(b) - int(a)) * 1e6 / hz for a, b in zip(n0.split(), n1.split())]
redis_us = (int(r1) - int(r0)) * 1e6 / hz
per = lambda v, d: round(v / d, 2) if d else None
print(json.dumps({
    "nodes": n, "seconds": round(seconds, 2), "writes": round(writes), "pushes": round(pushes),
    "node_cpu_us_per_write": [per(u, writes) for u in node_us],
    "node_cpu_us_per_write_all_nodes": per(sum(node_us), writes),
    "node_cpu_us_per_push_all_nodes": per(sum(node_us), pushes),
    "redis_cpu_us_per_write": per(redis_us, writes),
    # commandstats counts the commands a script runs too (SEQ: TIME, HMGET, HGET, HINCRBY, XADD)
    "redis_commands_per_write": per(sum(stats.values()), writes),
    "evalsha_per_write": per(stats.get("evalsha", 0), writes), "xread_per_write": per(stats.get("xread", 0), writes),
    "ack_p50_us": fan["ack_latency"].get("p50_us"), "ack_p99_us": fan["ack_latency"].get("p99_us"),
    "watcher_p50_us": fan["latency"].get("p50_us"), "watcher_p99_us": fan["latency"].get("p99_us"),
    "connections_per_node": held, "rss_growth_kb_per_node": growth,
    "rss_kb_per_connection_per_node": [per(g, c) for g, c in zip(growth, held)],
    "rss_kb_per_connection_all_nodes": per(sum(growth), users + watchers),
    "redis_calls_by_command": stats,
    "final_state_ok": fan.get("final_state_ok", fan.get("ok")), "failures": fan.get("failures"),
}))
PY
    cleanup
}

echo "cluster bench: RATE=$RATE USERS=$USERS WATCHERS=$WATCHERS SUBS=$SUBS DURATION=$DURATION FSYNC=$FSYNC nodes: $NODES" >&2
for n in $NODES; do
    echo "--- $n node(s)" >&2
    run_one "$n"
    tail -1 "$OUT"
done
python3 - "$OUT" "$NODES" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print("\n| nodes | writes | node CPU µs/write (each node) | node CPU µs/push (all nodes) | Redis CPU µs/write | Redis cmds/write, in scripts too (EVALSHA, XREAD) | write→ack p50/p99 µs | write→watcher p50/p99 µs | RSS KB/conn (each node) |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows[-len(sys.argv[2].split()):]:
    print(f"| {r['nodes']} | {r['writes']} | {' / '.join(str(v) for v in r['node_cpu_us_per_write'])} | {r['node_cpu_us_per_push_all_nodes']} | "
          f"{r['redis_cpu_us_per_write']} | {r['redis_commands_per_write']} ({r['evalsha_per_write']}, {r['xread_per_write']}) | "
          f"{r['ack_p50_us']} / {r['ack_p99_us']} | {r['watcher_p50_us']} / {r['watcher_p99_us']} | {' / '.join(str(v) for v in r['rss_kb_per_connection_per_node'])} |")
PY
