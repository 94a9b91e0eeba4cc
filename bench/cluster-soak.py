"""Redis memory over a long run (issue 14: "the log stays bounded (snapshots and trimming), so Redis
memory is flat over a long run"; docs/scaling.md, "Snapshots and the bounded log").

Starts its own redis-server and 3 presence-server nodes with short snapshot periods, so trimming
happens often. For DURATION seconds, USERS simulated users each connect to a node in turn, sign in,
set an onDisconnect op, go online, write a few values (a bounded key space: the data does not grow),
and leave (half close cleanly, half drop the socket). Every SAMPLE seconds it records Redis
`used_memory` (and its `used_memory_dataset` part), the summed `XLEN` of the namespaces' logs, the number of Redis keys, and each node's
RSS. At the end it prints the series and a verdict: after a warm-up, is each measure flat (the
mean of the last third of the samples within TOLERANCE of the mean of the first third, or within a
small absolute slack)?

The warm-up lasts until every namespace's log has passed WINDOW revisions (and at least a quarter
of the run): until then each namespace's version window (VersionWindow.defaultCapacity, 10,000
revisions) is still filling, and with it the history every snapshot carries and every node holds,
so memory grows by design. With the defaults (one namespace, about 50 revisions a second) that
takes about 200 s.

Usage: PRESENCE_SERVER=.build/debug/presence-server nice -n 10 python3 bench/cluster-soak.py \\
           [--duration 600] [--sample 10] [--users 24] [--namespaces 3]
Exit status 0 when everything is flat, 1 when something grew."""
import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "live"))
from conftest import Server  # noqa: E402
from test_cluster import Redis  # noqa: E402

TOLERANCE = 0.10           # relative growth allowed between the first and last third after warm-up
XLEN_SLACK = 300           # entries: XTRIM MINID ~ removes whole stream nodes (about 100 entries each)
WINDOW = 10_000            # VersionWindow.defaultCapacity: the history a replica and a snapshot keep


def redis_cli(redis, *args):
    return subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True, text=True,
                          check=True).stdout


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1))


def sample(redis, nodes, namespaces):
    info = redis_cli(redis, "INFO", "memory")
    memory, dataset = (int(re.search(rf"{field}:(\d+)", info).group(1)) for field in ("used_memory", "used_memory_dataset"))
    xlen = sum(int(redis_cli(redis, "XLEN", f"presence:{{{ns}}}:log").strip() or 0) for ns in namespaces)
    keys = int(redis_cli(redis, "DBSIZE").strip())
    revs = [int(redis_cli(redis, "HGET", f"presence:{{{ns}}}:head", "rev").strip() or 0) for ns in namespaces]
    return {"used_memory": memory, "dataset": dataset, "xlen": xlen, "keys": keys, "min_rev": min(revs),
            "rss_kib": [rss_kib(node.proc.pid) for node in nodes]}


class Load:
    """Users coming and going on every node, writing a bounded set of values."""

    def __init__(self, nodes, namespaces, users):
        self.nodes, self.namespaces, self.users = nodes, namespaces, users
        self.stop = threading.Event()
        self.writes = 0
        self.errors = []
        self.lock = threading.Lock()

    def user(self, index):
        rng = random.Random(index)
        visit = 0
        while not self.stop.is_set():
            node = self.nodes[(index + visit) % len(self.nodes)]
            ns = self.namespaces[index % len(self.namespaces)]
            uid = f"u{index}"
            visit += 1
            try:
                client = node.client(ns=ns)
                client.auth(uid)
                offline = {"online": False, "lastSeen": {".sv": "timestamp"}}
                assert client.call("o", {"p": f"/users/{uid}", "d": offline}, timeout=30)["s"] == "ok"
                assert client.call("p", {"p": f"/users/{uid}", "d": {"online": True}}, timeout=30)["s"] == "ok"
                for _ in range(rng.randint(3, 12)):
                    if self.stop.wait(rng.uniform(0.1, 0.6)):
                        break
                    path = f"/data/{uid}/k{rng.randint(0, 9)}"
                    assert client.call("p", {"p": path, "d": "x" * rng.randint(1, 200)}, timeout=30)["s"] == "ok"
                    with self.lock:
                        self.writes += 1
                client.close() if rng.random() < 0.5 else client.drop()
            except Exception as error:  # noqa: BLE001 - reported, the run goes on
                with self.lock:
                    self.errors.append(f"{uid} on port {node.port}: {error!r}")
                self.stop.wait(1)
            self.stop.wait(rng.uniform(0.2, 1.5))

    def start(self):
        self.threads = [threading.Thread(target=self.user, args=(i,), daemon=True) for i in range(self.users)]
        for thread in self.threads:
            thread.start()

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def slope_per_minute(times, values):
    """Least-squares slope, in units per minute."""
    n = len(values)
    mt, mv = sum(times) / n, sum(values) / n
    var = sum((t - mt) ** 2 for t in times)
    return 0.0 if var == 0 else 60 * sum((t - mt) * (v - mv) for t, v in zip(times, values)) / var


def flat(values, relative, absolute=0):
    third = max(1, len(values) // 3)
    first = sum(values[:third]) / third
    last = sum(values[-third:]) / third
    return last <= first * (1 + relative) + absolute, first, last


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--sample", type=float, default=10)
    parser.add_argument("--users", type=int, default=24)
    parser.add_argument("--namespaces", type=int, default=1)
    args = parser.parse_args()
    namespaces = [f"soak{i}" for i in range(args.namespaces)]
    redis = Redis()
    flags = ("--storage", "redis", "--redis", redis.address, "--rules", "open", "--snapshot-every", "5",
             "--log-keep", "5")
    nodes = [Server(*flags, "--node-id", name) for name in ("a", "b", "c")]
    load = Load(nodes, namespaces, args.users)
    series = []
    try:
        load.start()
        started = time.time()
        while (elapsed := time.time() - started) < args.duration:
            time.sleep(max(0, args.sample - (time.time() - started - elapsed)))
            point = sample(redis, nodes, namespaces)
            point["t"] = round(time.time() - started)
            point["writes"] = load.writes
            series.append(point)
            print(f"t={point['t']:4d}s writes={point['writes']:6d} used_memory={point['used_memory']:9d} "
                  f"dataset={point['dataset']:9d} min_rev={point['min_rev']:6d} xlen={point['xlen']:5d} keys={point['keys']:4d} rss_kib={point['rss_kib']}", flush=True)
        load.finish()
        alive = [node.alive() for node in nodes]
    finally:
        load.stop.set()
        for node in nodes:
            node.stop()
        redis.stop()

    full = [p["t"] for p in series if p["min_rev"] > WINDOW]
    warm = max(args.duration / 4, full[0] if full else args.duration)
    after = [p for p in series if p["t"] >= warm]
    print(f"\n{load.writes} writes in {args.duration:.0f} s ({load.writes / args.duration:.1f}/s), "
          f"{len(load.errors)} client errors, nodes alive at the end: {alive}")
    for error in load.errors[:10]:
        print("  error:", error)
    if len(after) < 3:
        print(f"VERDICT: too short to judge (fewer than 3 samples after the warm-up; the logs reached "
              f"{series[-1]['min_rev'] if series else 0} revisions of the {WINDOW} that fill the version window)")
        return 1
    checks = [("used_memory", [p["used_memory"] for p in after], TOLERANCE, 64 * 1024),
              ("used_memory_dataset", [p["dataset"] for p in after], TOLERANCE, 64 * 1024),
              ("xlen", [p["xlen"] for p in after], TOLERANCE, XLEN_SLACK),
              ("keys", [p["keys"] for p in after], TOLERANCE, 5)]
    for index, name in enumerate(("a", "b", "c")):
        checks.append((f"rss node {name} (KiB)", [p["rss_kib"][index] for p in after], TOLERANCE, 2048))
    grew = []
    print(f"after the warm-up ({warm:.0f} s: every log past {WINDOW} revisions, {len(after)} samples): mean of the first third -> mean of the last third")
    times = [p["t"] for p in after]
    for name, values, relative, absolute in checks:
        ok, first, last = flat(values, relative, absolute)
        print(f"  {name}: {first:.0f} -> {last:.0f} (max {max(values)}, trend {slope_per_minute(times, values):+.0f}/min) "
              f"{'flat' if ok else 'GREW'}")
        if not ok:
            grew.append(name)
    if not all(alive):
        grew.append("a node died")
    print("VERDICT:", "flat" if not grew else "grew: " + ", ".join(grew))
    return 0 if not grew else 1


sys.exit(main())
