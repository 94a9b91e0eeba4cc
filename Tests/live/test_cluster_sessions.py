"""Session records on a cluster (docs/scaling.md, SESSION `change`): a connection holding
thousands of onDisconnect ops registers each one as an O(1) append to its record in Redis, and
all of them still run when its node is killed (the survivor adopts the record, put + changes)."""
import json
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import Server
from test_cluster import REDIS, redis  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def open_rules():
    path = tempfile.NamedTemporaryFile(prefix="open-rules-", suffix=".json", delete=False).name
    with open(path, "w") as f:
        json.dump({"rules": {".read": True, ".write": True}}, f)
    return path


def answer_all(client, requests_sent, timeout=120):
    """Reads replies until every request in requests_sent is answered; returns {r: body}."""
    answers = {}
    deadline = time.time() + timeout
    while len(answers) < len(requests_sent):
        assert time.time() < deadline, f"{len(answers)} of {len(requests_sent)} answered"
        message = client.recv(timeout=max(0.1, deadline - time.time()))
        if message.get("t") == "d" and message["d"].get("r") in requests_sent:
            answers[message["d"]["r"]] = message["d"]["b"]
    return answers


def redis_cli(redis, *args):
    return subprocess.run(["redis-cli", "-p", str(redis.port), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_thousands_of_ondisconnect_ops_on_a_killed_node_all_run(redis):
    rules = open_rules()
    a, b = (Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", rules,
                   "--max-ondisconnect-ops", "5000")
            for name in ("a", "b"))
    try:
        dave = a.client()
        count, cancelled = 2000, set(range(0, 2000, 20))
        sent = [dave.request("o", {"p": f"/slots/dave/{i}", "d": i}) for i in range(count)]
        refused = [body for body in answer_all(dave, sent).values() if body["s"] != "ok"]
        assert not refused, refused[:3]
        sent = [dave.request("oc", {"p": f"/slots/dave/{i}"}) for i in sorted(cancelled)]
        assert all(body["s"] == "ok" for body in answer_all(dave, sent).values())
        # The record holds a whole put plus appended changes, not the ops sent whole each time.
        key = f"presence:{{demo}}:s:{dave.session}"
        assert int(redis_cli(redis, "HGET", key, "n") or 0) > 0, redis_cli(redis, "HGETALL", key)
        assert requests.get(f"http://{b.host}:{b.port}/slots/dave.json", params={"ns": "demo"}, timeout=20).json() is None
        a.kill()
        # lease (5 s) + reap period (1 s) + grace (3 s) ≈ 9 s; generous on a busy machine
        expected = {str(i): i for i in range(count) if i not in cancelled}
        deadline = time.time() + 60
        while True:
            value = requests.get(f"http://{b.host}:{b.port}/slots/dave.json", params={"ns": "demo"}, timeout=20).json()
            if value is not None:
                got = value if isinstance(value, dict) else {str(i): v for i, v in enumerate(value) if v is not None}
                assert got == expected, f"{len(got)} ops ran, {len(expected)} expected"
                break
            assert time.time() < deadline, "the killed node's ops never ran on the survivor"
            time.sleep(0.2)
    finally:
        for node in (a, b):
            node.stop()
