"""REST requests that wait for the Redis log on a cluster node (issue 14, docs/scaling.md, "REST,
rules and streams on a cluster"): a client that leaves while its write waits leaves nothing
behind on the node (the write still commits, as a WebSocket write whose client left does)."""
import signal
import socket
import time

import pytest
import requests

from conftest import Server
from test_cluster import REDIS, redis  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def base(node):
    return f"http://{node.host}:{node.port}"


def metric(node, name):
    for line in requests.get(f"{base(node)}/metrics", timeout=20).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_rest_clients_that_leave_while_their_writes_wait_leave_nothing_behind(redis):
    node = Server("--storage", "redis", "--redis", redis.address, "--rules", "open", "--node-lease", "8", "--fence-after", "6")
    try:
        assert requests.put(f"{base(node)}/w/0.json", params={"ns": "leave"}, json=0, timeout=20).status_code == 200
        redis.proc.send_signal(signal.SIGSTOP)  # SEQ is sent and waits for Redis's answer
        try:
            for index in range(1, 11):
                body = str(index).encode()
                with socket.create_connection((node.host, node.port), timeout=5) as raw:
                    raw.sendall(b"PUT /w/%d.json?ns=leave HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: %d\r\n\r\n%s" % (index, len(body), body))
                    time.sleep(0.05)
                # gone before any answer (the socket closed with the request waiting)
            time.sleep(0.5)
            assert metric(node, "presence_cluster_pending_steps") > 0
        finally:
            redis.proc.send_signal(signal.SIGCONT)
        # The writes commit (their clients left, the log still has them), nothing is left waiting,
        # and the node answers the next client as usual.
        deadline = time.time() + 15
        while (value := requests.get(f"{base(node)}/w.json", params={"ns": "leave"}, timeout=20).json()) != {str(i): i for i in range(11)}:
            assert time.time() < deadline, value
            time.sleep(0.1)
        assert metric(node, "presence_cluster_pending_steps") == 0
        assert requests.put(f"{base(node)}/w/11.json", params={"ns": "leave"}, json=11, timeout=20).status_code == 200
        assert node.alive(), node.read_log()[-3000:]
        assert "fenced" not in node.read_log()
    finally:
        node.stop()
