"""Redis back empty (issue 14, docs/scaling.md "Redis back empty, or with another history"): a
node with --storage redis always remembers the history of every namespace it served (by default in
its --data-dir), so that a node started against a Redis that lost its data refuses those namespaces
and says why, never serving a silently rolled-back database. Uses test_cluster.py's Redis."""
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from conftest import CLIENT, SERVER, Server
from test_cluster import REDIS, free_port, redis  # noqa: F401 - `redis` is the fixture
from test_cluster_snapshots import head, redis_call, shutil_rmtree

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def three_line_start(redis, data_dir, port):
    """The issue's start: no --node-id, no --cluster-state (a fixed port, so the default node name,
    host:port, is the same after a restart)."""
    return Server("--port", str(port), "--storage", "redis", "--redis", redis.address, "--rules", "open",
                  "--node-beat", "0.25", data_dir=data_dir)


def lose_redis_data(redis):
    """Redis restarted without its AOF: every history is gone."""
    redis.kill()
    shutil_rmtree(os.path.join(redis.dir, "appendonlydir"))
    redis.start()


def http_get(server, path, headers=None):
    """(status, JSON body) of a GET, errors included."""
    request = urllib.request.Request(f"http://{server.host}:{server.port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def assert_refused(server, ns, timeout=20):
    """A client of `ns` is told the namespace is unavailable (control `e`) and closed; a REST read
    and a REST write are answered 503 with the same reason; /readyz (200: other namespaces are served) names it."""
    deadline = time.time() + timeout
    while True:
        client = server.client(ns=ns)
        messages = []
        try:
            while True:
                messages.append(client.recv(timeout=max(0.1, deadline - time.time())))
        except Exception:  # noqa: BLE001 - closed by the server (or the deadline passed)
            pass
        errors = [m["d"]["d"] for m in messages if m.get("t") == "c" and m["d"].get("t") == "e"]
        if errors:
            assert f"Namespace {ns} is unavailable" in errors[0] and "lost its recent history" in errors[0], errors
            break
        assert time.time() < deadline, f"a client of {ns} was never told it is refused: {messages}"
    status, body = http_get(server, f"/.json?ns={ns}")
    assert status == 503 and f"Namespace {ns} is unavailable" in body["error"], (status, body)
    put = urllib.request.Request(f"http://{server.host}:{server.port}/x.json?ns={ns}", data=b"1", method="PUT")
    try:
        urllib.request.urlopen(put, timeout=10)
        raise AssertionError(f"a REST write to the refused namespace {ns} was accepted")
    except urllib.error.HTTPError as error:
        assert error.code == 503 and f"Namespace {ns} is unavailable" in error.read().decode(), error
    status, body = http_get(server, "/readyz")
    assert status == 200 and ns in body["refused"], (status, body)
    with urllib.request.urlopen(f"http://{server.host}:{server.port}/metrics", timeout=10) as response:
        assert "presence_cluster_refused_namespaces 1" in response.read().decode()


def test_the_three_line_start_remembers_its_histories_and_refuses_one_redis_lost(redis):  # noqa: F811
    """Redis back empty: the restarted node refuses the namespace it served (only that one: it
    serves a namespace it never served before), says why, and writes nothing to Redis for it."""
    data = tempfile.mkdtemp(prefix="presence-history-")
    port = free_port()
    a = three_line_start(redis, data, port)
    try:
        writer = a.client(ns="kept")
        assert writer.call("p", {"p": "/kept", "d": 1}, timeout=20)["s"] == "ok"
        state = os.path.join(data, f"cluster-state-{socket.gethostname()}:{port}.json")
        with open(state) as f:
            assert json.load(f) == {"kept": head(redis, "kept")["epoch"]}
        writer.close()
        assert a.stop() == 0
        lose_redis_data(redis)
        a = three_line_start(redis, data, port)  # restarted by its supervisor, same flags
        assert_refused(a, "kept")
        assert redis_call(redis, "EXISTS", "presence:{kept}:head") == 0  # no new, empty history
        assert "Redis lost the history of namespace kept" in a.read_log(), a.read_log()[-2000:]
        assert a.read_log().count("refusing namespace kept") == 1  # said once, not at every check
        # every other namespace is served
        other = a.client(ns="fresh")
        assert other.call("p", {"p": "/x", "d": 2}, timeout=20)["s"] == "ok"
        assert other.call("g", {"p": "/x"}, timeout=20)["d"] == 2
        deadline = time.time() + 15  # the node list is as of the last beat
        while True:
            status, nodes = http_get(a, "/.admin/nodes", {"Authorization": "Bearer owner"})
            assert status == 200, nodes
            me = next(n for n in nodes["nodes"] if n["self"])
            if me.get("refused"):
                break
            assert time.time() < deadline, nodes
            time.sleep(0.1)
        assert set(me["refused"]) == {"kept"} and "Redis lost the history" in me["refused"]["kept"], me
        cli = subprocess.run([CLIENT, "admin", "nodes", "--server", f"ws://{a.host}:{a.port}"], capture_output=True,
                             text=True, timeout=30)
        assert cli.returncode == 0 and "refuses namespace kept: Redis lost the history" in cli.stdout, (cli.stdout, cli.stderr)
        assert a.alive()
    finally:
        a.stop()


def test_a_node_that_cannot_write_its_cluster_state_does_not_start(redis):  # noqa: F811
    not_a_directory = tempfile.NamedTemporaryFile(prefix="presence-history-", delete=False).name
    with pytest.raises(RuntimeError) as failure:
        Server("--storage", "redis", "--redis", redis.address, "--node-id", "a", data_dir=not_a_directory)
    message = str(failure.value)
    assert "--cluster-state" in message and "must remember the histories it serves" in message, message


def print_config(*args):
    result = subprocess.run([SERVER, "--storage", "redis", *args, "--print-config"], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["cluster-state"]


def test_the_cluster_state_defaults_to_one_file_per_node_in_the_data_directory():
    assert print_config("--node-id", "a", "--data-dir", "/var/lib/presence") == "/var/lib/presence/cluster-state-a.json"
    assert print_config("--node-id", "b", "--data-dir", "/var/lib/presence") == "/var/lib/presence/cluster-state-b.json"
    assert print_config("--port", "9002", "--data-dir", "d") == f"d/cluster-state-{socket.gethostname()}:9002.json"
    assert print_config("--cluster-state", "/etc/x.json") == "/etc/x.json"
    assert print_config("--cluster-state", "none") == "none"


def test_cluster_state_none_keeps_no_memory(redis):  # noqa: F811
    data = tempfile.mkdtemp(prefix="presence-history-")
    a = Server("--storage", "redis", "--redis", redis.address, "--node-id", "a", "--rules", "open",
               "--cluster-state", "none", data_dir=data)
    try:
        assert a.client(ns="free").call("p", {"p": "/x", "d": 1}, timeout=20)["s"] == "ok"
        assert os.listdir(data) == []
    finally:
        a.stop()


def redis_seed(redis, ns, *flags):
    argv = [SERVER, "redis-seed", redis.address, "--ns", ns, *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def named(redis, name, data_dir, *extra):
    return Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", "open",
                  "--node-beat", "0.25", *extra, data_dir=data_dir)


def wait_served(server, ns, timeout=20):
    """A client of `ns` on `server` once the node serves it again (its refusal lifted)."""
    deadline = time.time() + timeout
    while True:
        status, body = http_get(server, "/readyz")
        if status == 200 and ns not in body.get("refused", []):
            return server.client(ns=ns)
        assert time.time() < deadline, (status, body)
        time.sleep(0.1)


def test_redis_seed_accept_empty_lets_every_node_serve_the_namespace_again(redis):  # noqa: F811
    """The way back when the data is gone: one command, and every node that refused the namespace
    serves it within a beat (a new, empty history), with no state file edited and no restart."""
    data = [tempfile.mkdtemp(prefix="presence-history-") for _ in range(2)]
    a, b = named(redis, "a", data[0]), named(redis, "b", data[1])
    try:
        assert a.client(ns="kept").call("p", {"p": "/before", "d": 1}, timeout=20)["s"] == "ok"
        assert b.client(ns="kept").call("g", {"p": "/before"}, timeout=20)["d"] == 1
        a.stop()
        b.stop()
        lose_redis_data(redis)
        a, b = named(redis, "a", data[0]), named(redis, "b", data[1])
        assert_refused(a, "kept")
        assert_refused(b, "kept")
        seeded = redis_seed(redis, "kept", "--accept-empty")
        assert seeded.returncode == 0 and "a new, empty history" in seeded.stdout, (seeded.stdout, seeded.stderr)
        epoch = head(redis, "kept")["epoch"]
        writer, reader = wait_served(a, "kept"), wait_served(b, "kept")
        assert writer.call("p", {"p": "/after", "d": 2}, timeout=20)["s"] == "ok"
        deadline = time.time() + 20
        while reader.call("g", {"p": "/"}, timeout=20)["d"] != {"after": 2}:  # the lost data is gone, on purpose
            assert time.time() < deadline
            time.sleep(0.1)
        for directory, name in zip(data, ("a", "b")):
            with open(os.path.join(directory, f"cluster-state-{name}.json")) as f:
                assert json.load(f) == {"kept": epoch}  # the accepted history is remembered
        assert "namespace kept is served again" in a.read_log(), a.read_log()[-2000:]
        again = redis_seed(redis, "kept", "--accept-empty")
        assert again.returncode == 0 and "already accepted" in again.stdout, (again.stdout, again.stderr)
        assert head(redis, "kept")["epoch"] == epoch
    finally:
        a.stop()
        b.stop()


def test_redis_seed_accept_existing_accepts_a_history_a_node_without_memory_started(redis):  # noqa: F811
    data = tempfile.mkdtemp(prefix="presence-history-")
    a = named(redis, "a", data)
    c = None
    try:
        assert a.client(ns="k").call("p", {"p": "/old", "d": 1}, timeout=20)["s"] == "ok"
        a.stop()
        lose_redis_data(redis)
        # A node with no memory (unsafe) starts a new history with its own data.
        c = named(redis, "c", tempfile.mkdtemp(prefix="presence-history-"), "--cluster-state", "none")
        assert c.client(ns="k").call("p", {"p": "/new", "d": 3}, timeout=20)["s"] == "ok"
        a = named(redis, "a", data)
        assert_refused(a, "k")
        assert "which no operator accepted" in a.read_log(), a.read_log()[-2000:]
        empty = redis_seed(redis, "k", "--accept-empty")
        assert empty.returncode == 1 and "--accept-existing" in empty.stderr, (empty.stdout, empty.stderr)
        accepted = redis_seed(redis, "k", "--accept-existing")
        assert accepted.returncode == 0 and "is accepted" in accepted.stdout, (accepted.stdout, accepted.stderr)
        client = wait_served(a, "k")
        assert client.call("g", {"p": "/"}, timeout=20)["d"] == {"new": 3}
    finally:
        a.stop()
        if c:
            c.stop()


def test_redis_seed_needs_one_choice_and_says_when_nothing_is_to_do(redis):  # noqa: F811
    neither = redis_seed(redis, "x")
    assert neither.returncode != 0 and "exactly one of --accept-empty and --accept-existing" in neither.stderr
    absent = redis_seed(redis, "x", "--accept-existing")
    assert absent.returncode == 1 and "holds no history" in absent.stderr, absent.stderr
    unreachable = subprocess.run([SERVER, "redis-seed", f"127.0.0.1:{free_port()}", "--ns", "x",
                                  "--accept-empty", "--timeout", "1"], capture_output=True, text=True, timeout=30)
    assert unreachable.returncode == 2 and "error: Redis at" in unreachable.stderr, unreachable.stderr
