"""A cluster node started while Redis is down (issue 14, docs/scaling.md, "Redis down when a node
starts"): it starts, says so once, answers /readyz 503 with the reason and requests `unavailable`
after a bounded wait, and serves once Redis is up; stopped meanwhile it exits cleanly."""
import json
import signal
import time
import urllib.error
import urllib.request

import pytest

from conftest import Server
from test_cluster import REDIS, Redis

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


class RedisLater(Redis):
    """A Redis whose free port is chosen now, and that starts only when asked."""

    def __init__(self):
        self.proc = None
        self.deferred = True
        super().__init__()

    def start(self):
        if self.deferred:
            self.deferred = False
            return
        super().start()

    def stop(self):
        if self.proc is None:
            self.log.close()
            return
        super().stop()


@pytest.fixture
def redis_later():
    server = RedisLater()
    yield server
    server.stop()


def http(server, method, path, body=None):
    request = urllib.request.Request(f"http://{server.host}:{server.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def wait_log(server, text, timeout):
    deadline = time.time() + timeout
    while text not in server.read_log():
        assert time.time() < deadline and server.alive(), f"no {text!r} in the log within {timeout}s: {server.read_log()[-3000:]}"
        time.sleep(0.05)


def node_without_redis(redis, name):
    return Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", "open", "--redis-timeout", "1")


def test_a_node_started_while_redis_is_down_serves_once_redis_is_up(redis_later):
    a = node_without_redis(redis_later, "a")
    b = None
    try:
        wait_log(a, f"cannot reach Redis at {redis_later.address}", 10)
        assert http(a, "GET", "/healthz")[0] == 200
        status, body = http(a, "GET", "/readyz")
        assert status == 503 and f"Redis at {redis_later.address} unreachable" in body, body

        # Clients connect and sign in; what needs the namespace is answered unavailable after a
        # bounded wait (--redis-timeout 1 s plus a beat), never left hanging.
        client = a.client()
        client.auth("alice")
        started = time.time()
        write = client.request("p", {"p": "/x", "d": 1})
        listen = client.request("q", {"p": "/x", "h": ""})
        assert client.reply(write, timeout=10)["s"] == "unavailable"
        assert client.reply(listen, timeout=10)["s"] == "unavailable"
        assert time.time() - started < 5
        started = time.time()
        status, body = http(a, "PUT", "/y.json", 2)
        assert status == 503 and "not loaded on this node yet" in body, (status, body)
        assert time.time() - started < 5

        redis_later.start()
        deadline = time.time() + 15
        while http(a, "GET", "/readyz")[0] != 200:
            assert time.time() < deadline, a.read_log()[-3000:]
            time.sleep(0.1)
        wait_log(a, f"Redis {redis_later.address} reachable after", 1)
        log = a.read_log()
        # Said once, not per attempt (the connection retried every 100 ms to 2 s meanwhile).
        assert log.count("cannot reach Redis") == 1 and "still unreachable" not in log, log[-3000:]

        # Serving: a write through a reaches a listener on a second node, and the same client
        # (still signed in) writes and reads as on any node.
        b = Server("--storage", "redis", "--redis", redis_later.address, "--node-id", "b", "--rules", "open")
        watcher = b.client()
        assert watcher.listen("/x") is None
        assert client.call("p", {"p": "/x", "d": 1}, timeout=15)["s"] == "ok"
        assert watcher.push("x", timeout=15) == 1
        assert client.call("g", {"p": "/x"}, timeout=15) == {"s": "ok", "d": 1}
        assert http(b, "PUT", "/y.json", 2)[0] == 200
        assert http(a, "GET", "/y.json") == (200, "2")
    finally:
        for node in (a, b):
            if node is not None:
                assert node.alive(), node.read_log()[-3000:]
                node.stop()


def test_a_node_started_while_redis_is_down_stops_cleanly_on_sigterm(redis_later):
    a = node_without_redis(redis_later, "a")
    wait_log(a, "cannot reach Redis", 10)
    client = a.client()
    client.request("p", {"p": "/x", "d": 1})  # waiting for a namespace that cannot load
    time.sleep(0.2)
    started = time.time()
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=10) == 0, a.read_log()[-3000:]
    assert time.time() - started < 5
    a.stop()
