"""Idle namespaces with data (docs/scaling.md, "Idle namespaces"): a node that served many
namespaces holding data stops following them once nothing uses them for --release-idle, then
releases their leases, so it goes quiet in Redis; a client that comes back loads the namespace
again (snapshot, then the log) and sees what the other nodes have."""
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import Server
from test_cluster import REDIS, redis  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def commands(redis):
    """Commands Redis has run so far, all kinds but INFO (INFO commandstats)."""
    info = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"], capture_output=True, text=True,
                          check=True).stdout
    return sum(int(n) for name, n in re.findall(r"cmdstat_([a-z|]+):calls=(\d+)", info) if name != "info")


def commands_per_second(redis, seconds):
    before = commands(redis)
    time.sleep(seconds)
    return (commands(redis) - before) / seconds


def test_a_node_that_served_many_namespaces_with_data_goes_quiet_and_loads_one_back(redis):
    count = 200
    flags = ("--storage", "redis", "--redis", redis.address, "--rules", "open", "--release-idle", "1",
             "--snapshot-every", "0.5", "--log-keep", "0")
    a = Server(*flags, "--node-id", "a")
    b = Server(*flags, "--node-id", "b")
    try:
        def write(i):
            client = a.client(ns=f"data{i}")
            assert client.call("p", {"p": "/v", "d": i}, timeout=30)["s"] == "ok"
            client.close()

        started = time.time()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, range(count)))
        print(f"written in {time.time() - started:.1f}s")
        # While node a lets them go, node b writes into one of them.
        other = b.client(ns="data7")
        assert other.call("p", {"p": "/w", "d": "from b"}, timeout=15)["s"] == "ok"
        other.close()
        # Both nodes unfollow after --release-idle and release the leases after as long again:
        # what is left is the node list's beat (a few commands per second per node).
        deadline = time.time() + 60
        while (rate := commands_per_second(redis, 3)) > 30:
            assert time.time() < deadline, f"still {rate} Redis commands/s after the {count} namespaces went idle"
        print(f"quiet after {time.time() - started:.1f}s: {rate} commands/s")
        assert a.alive() and b.alive()

        back = a.client(ns="data7")
        assert back.call("g", {"p": "/"}, timeout=15)["d"] == {"v": 7, "w": "from b"}
        watcher = b.client(ns="data7")
        assert watcher.listen("/v") == 7
        assert back.call("p", {"p": "/v", "d": 1007}, timeout=15)["s"] == "ok"
        assert watcher.push("v", timeout=15) == 1007
        another = a.client(ns="data8")
        assert another.call("g", {"p": "/v"}, timeout=15)["d"] == 8
        for node in (a, b):
            log = node.read_log()
            assert "fenced" not in log and "cannot be served" not in log, log[-2000:]
        assert "namespace data7: loaded the snapshot" in a.read_log(), "data7 was not loaded from its snapshot"
    finally:
        a.stop()
        b.stop()
