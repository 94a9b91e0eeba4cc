"""Redis commands per second from one idle node that followed N namespaces (docs/scaling.md,
"Idle leases" and "Idle namespaces"): starts its own redis-server and one presence-server, opens a
WebSocket client in each of N namespaces (with --data, each writes a value there, so the namespace
holds data), closes them, waits WAIT seconds, then reads INFO commandstats deltas over SECONDS.
Usage: PRESENCE_SERVER=... python3 bench/idle-leases.py N [--data] [--release-idle S] [server flags]"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "live"))
from conftest import Server  # noqa: E402
from test_cluster import Redis  # noqa: E402

SECONDS, WAIT = 10, 8


def commandstats(redis):
    info = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"], capture_output=True,
                          text=True, check=True).stdout
    return {name: int(calls) for name, calls in re.findall(r"cmdstat_([a-z|]+):calls=(\d+)", info)}


def main():
    count = int(sys.argv[1])
    data = "--data" in sys.argv[2:]
    flags = [arg for arg in sys.argv[2:] if arg != "--data"]
    redis = Redis()
    node = Server("--storage", "redis", "--redis", redis.address, "--rules", "open", *flags)
    try:
        clients = [node.client(ns=f"idle{i}") for i in range(count)]
        for i, client in enumerate(clients):
            if data:
                assert client.call("p", {"p": "/v", "d": i}, timeout=30)["s"] == "ok"
            client.close()
        time.sleep(WAIT)
        before = commandstats(redis)
        time.sleep(SECONDS)
        after = commandstats(redis)
        delta = {k: (after[k] - before.get(k, 0)) / SECONDS for k in after if after[k] != before.get(k, 0)}
        total = sum(v for k, v in delta.items() if k not in ("info",))
        print(f"N={count} {' '.join(sys.argv[2:]) or '(default)'}: {total:.1f} commands/s "
              + " ".join(f"{k}={v:.1f}" for k, v in sorted(delta.items()) if k != "info"))
    finally:
        node.stop()
        redis.stop()


main()
