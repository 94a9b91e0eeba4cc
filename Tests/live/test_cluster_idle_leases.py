"""Idle leases (docs/scaling.md, "Idle leases"): a node that followed many namespaces and no
longer does releases their leases after --release-idle, so its Redis calls per beat stop growing
with the namespaces it ever served; a released namespace is joined again when a client comes."""
import re
import subprocess
import time

import pytest

from conftest import Server
from test_cluster import REDIS, redis  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def script_calls(redis):
    """EVALSHA + EVAL calls Redis has run so far (INFO commandstats)."""
    info = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"], capture_output=True, text=True,
                          check=True).stdout
    return sum(int(n) for n in re.findall(r"cmdstat_eval(?:sha)?:calls=(\d+)", info))


def calls_per_beat(redis, beats, beat_seconds=1.0):
    before = script_calls(redis)
    time.sleep(beats * beat_seconds)
    return (script_calls(redis) - before) / beats


def test_a_node_that_followed_many_namespaces_beats_only_where_it_still_serves(redis):
    count = 200
    node = Server("--storage", "redis", "--redis", redis.address, "--rules", "open", "--release-idle", "2")
    try:
        clients = []
        for i in range(count):
            clients.append(node.client(ns=f"idle{i}"))
        # Every namespace joined: one BEAT each per beat, plus the node list.
        deadline = time.time() + 30
        while (following := calls_per_beat(redis, 2)) < 0.8 * count:  # beats slip on a busy machine
            assert time.time() < deadline, f"only {following} script calls per beat with {count} namespaces joined"
        for client in clients:
            client.close()
        # Released after --release-idle: the calls per beat no longer depend on the namespaces.
        deadline = time.time() + 30
        while (idle := calls_per_beat(redis, 2)) > 5:
            assert time.time() < deadline, f"still {idle} script calls per beat after the namespaces went idle"
        assert node.alive()
        # A released namespace is joined again on demand, and serves.
        back = node.client(ns="idle7")
        assert back.call("p", {"p": "/here", "d": True}, timeout=15)["s"] == "ok"
        assert back.call("g", {"p": "/here"}, timeout=15)["d"] is True
        log = node.read_log()
        assert "fenced" not in log and "cannot be served" not in log, log[-2000:]
    finally:
        node.stop()
