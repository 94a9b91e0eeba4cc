"""Scale-out (issue 14, docs/scaling.md): three presence-server nodes with --storage redis on one
real redis-server (a free port, a temporary directory, AOF with appendfsync always). Skipped only
when redis-server is not installed; scripts/install-deps.sh installs it."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import PRESENCE_RULES, Server

REDIS = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")

OFFLINE = {"online": False, "lastSeen": {".sv": "timestamp"}}
ONLINE = {"online": True, "lastSeen": {".sv": "timestamp"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="presence-redis-")
        self.port = free_port()
        args = [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", self.dir]
        if os.path.exists("/usr/bin/setpriv"):  # dies with the test process
            args = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] + args
        self.args = args
        self.log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis():
    server = Redis()
    yield server
    server.stop()


@pytest.fixture
def cluster(redis):
    """Three nodes on one Redis, default grace (3 s) and lease timings (5 s lease, 1 s beat)."""
    nodes = [Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", PRESENCE_RULES)
             for name in ("a", "b", "c")]
    yield nodes
    for node in nodes:
        node.stop()


def online(client, uid):
    client.auth(uid)
    assert client.call("o", {"p": f"/users/{uid}/presence", "d": OFFLINE}, timeout=15)["s"] == "ok"
    assert client.call("p", {"p": f"/users/{uid}/presence", "d": ONLINE}, timeout=15)["s"] == "ok"


def watch(server, uid, watcher_uid="watcher"):
    watcher = server.client()
    watcher.auth(watcher_uid)
    r = watcher.request("q", {"p": f"/users/{uid}/presence", "h": ""})
    assert watcher.reply(r, timeout=15)["s"] == "ok"
    return watcher


def wait_presence(watcher, uid, predicate, timeout):
    """The first push of uid's presence that satisfies predicate."""
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        try:
            value = watcher.push(f"users/{uid}/presence", timeout=max(0.05, deadline - time.time()))
        except AssertionError:
            break
        seen.append(value)
        if predicate(value):
            return value
    raise AssertionError(f"no matching presence of {uid} within {timeout}s; saw {seen}")


def online_and_watched(node, uid, watcher_nodes):
    """uid online through `node`, seen online by a watcher on each of `watcher_nodes`."""
    watchers = [watch(other, uid, f"watcher-{index}") for index, other in enumerate(watcher_nodes)]
    user = node.client()
    online(user, uid)
    for watcher in watchers:
        wait_presence(watcher, uid, lambda v: v and v.get("online") is True, 15)
    return user, watchers


def assert_never_offline(watcher, uid, seconds):
    """No push of uid's presence shows offline (or deleted) for `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            value = watcher.push(f"users/{uid}/presence", timeout=max(0.05, deadline - time.time()))
        except AssertionError:
            break
        assert value is not None and value.get("online") is True, value


def test_a_write_through_one_node_is_seen_by_a_listener_on_another(cluster):
    a, _, c = cluster
    listener = watch(c, "alice")
    alice = a.client()
    online(alice, "alice")
    value = wait_presence(listener, "alice", lambda v: v and v.get("online") is True, 15)
    assert isinstance(value["lastSeen"], (int, float))
    # and the writer reads its own write back on its node
    assert alice.call("g", {"p": "/users/alice/presence"}, timeout=15)["d"]["online"] is True
    import urllib.request
    metrics = urllib.request.urlopen(f"http://{a.host}:{a.port}/metrics", timeout=10).read().decode()
    assert "presence_cluster_redis_up 1" in metrics, metrics
    assert "presence_cluster_lag_revisions" in metrics and "presence_cluster_pending_steps" in metrics


def test_ondisconnect_on_one_node_runs_after_the_grace_and_is_seen_on_the_others(cluster):
    a, b, c = cluster
    bob, watchers = online_and_watched(b, "bob", (a, c))
    dropped = time.time()
    bob.drop()
    for watcher in watchers:
        value = wait_presence(watcher, "bob", lambda v: v and v.get("online") is False, 20)
        # not before the grace window (3 s), and dated at the drop, not at the run
        assert time.time() - dropped >= 2.5
        assert abs(value["lastSeen"] / 1000 - dropped) < 1.5, (value, dropped)


def test_a_killed_nodes_users_go_offline_on_the_survivors(cluster):
    a, b, c = cluster
    _, watchers = online_and_watched(b, "carol", (a, c))
    killed = time.time()
    b.kill()
    # lease (5 s) + reap period (1 s) + grace (3 s) ≈ 9 s; generous on a busy machine
    for watcher in watchers:
        value = wait_presence(watcher, "carol", lambda v: v and v.get("online") is False, 40)
        assert value["lastSeen"] / 1000 <= killed + 0.5, (value, killed)
    assert a.alive() and c.alive()


def test_a_user_who_returns_to_another_node_after_a_kill_never_shows_offline(cluster):
    a, b, c = cluster
    dave, (on_a,) = online_and_watched(b, "dave", (a,))
    session = dave.session
    b.kill()
    time.sleep(0.5)
    back = c.client(ls=session)  # TAKEOVER: the session moves to c, held, and is cancelled on sign-in
    online(back, "dave")
    # past lease + reap + grace: the adopter must not run the ops of a session that came back
    assert_never_offline(on_a, "dave", 14)
    assert back.call("g", {"p": "/users/dave/presence"}, timeout=15)["d"]["online"] is True


def number_hash(value):
    """Firebase's hash of a number leaf: base64(SHA-1("number:" + IEEE 754 big-endian hex))."""
    import base64
    import hashlib
    import struct
    text = "number:" + struct.pack(">d", float(value)).hex()
    return base64.b64encode(hashlib.sha1(text.encode()).digest()).decode()


def on_every_node(function, nodes, timeout=180):
    """function(node) for every node at once, one thread each; fails with what any of them raised."""
    import threading
    errors = []

    def run(node):
        try:
            function(node)
        except Exception as error:  # noqa: BLE001 - reported by the calling thread
            errors.append(repr(error))

    threads = [threading.Thread(target=run, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not errors, errors


def test_transactions_from_three_nodes_lose_no_increment(redis):
    nodes = [Server("--storage", "redis", "--redis", redis.address, "--rules", "open") for _ in range(3)]
    try:
        rounds = 15

        def increment(server):
            client = server.client()
            done = 0
            while done < rounds:
                current = client.call("g", {"p": "/counter"}, timeout=15)["d"]
                h = "" if current is None else number_hash(current)
                reply = client.call("p", {"p": "/counter", "d": (current or 0) + 1, "h": h}, timeout=15)
                if reply["s"] == "ok":
                    done += 1
                else:
                    assert reply["s"] == "datastale", reply
            client.close()

        on_every_node(increment, nodes)
        for node in nodes:
            reader = node.client()
            deadline = time.time() + 15
            while reader.call("g", {"p": "/counter"}, timeout=15)["d"] != 3 * rounds and time.time() < deadline:
                time.sleep(0.2)
            assert reader.call("g", {"p": "/counter"}, timeout=15)["d"] == 3 * rounds
    finally:
        for node in nodes:
            node.stop()


def test_a_rolling_restart_flaps_nobody(redis):
    """SIGTERM one node (LEAVE); its user comes back with ls= to the node restarted under the
    same name within the grace window: no offline on the other nodes."""
    def start(name):
        return Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", PRESENCE_RULES)
    a, b = start("a"), start("b")
    try:
        erin, (on_a,) = online_and_watched(b, "erin", (a,))
        session = erin.session
        assert b.stop() == 0
        b = start("b")
        back = b.client(ls=session)
        online(back, "erin")
        assert_never_offline(on_a, "erin", 10)  # lease (5 s) + reap + grace (3 s) have passed by then
        ready = __import__("urllib.request").request.urlopen(f"http://{b.host}:{b.port}/readyz", timeout=10)
        assert ready.status == 200
    finally:
        a.stop()
        b.stop()


def test_a_node_cut_off_from_redis_fences_itself(redis):
    node = Server("--storage", "redis", "--redis", redis.address, "--rules", "open",
                  "--node-lease", "3", "--fence-after", "1.5", "--node-beat", "0.5")
    try:
        client = node.client()
        assert client.call("p", {"p": "/x", "d": 1}, timeout=15)["s"] == "ok"
        os.kill(redis.proc.pid, 19)  # SIGSTOP: Redis holds the beats without answering
        try:
            deadline = time.time() + 30
            while node.alive() and time.time() < deadline:
                time.sleep(0.1)
            assert not node.alive(), "the node kept serving without a lease"
            assert node.proc.returncode == 75, "a fenced node exits with EX_TEMPFAIL so that its supervisor restarts it"
            assert "fenced" in node.read_log()
        finally:
            os.kill(redis.proc.pid, 18)  # SIGCONT
    finally:
        node.stop()


def test_a_node_whose_clients_come_and_go_keeps_serving_the_current_data(redis):
    a = Server("--storage", "redis", "--redis", redis.address, "--rules", "open")
    b = Server("--storage", "redis", "--redis", redis.address, "--rules", "open")
    try:
        writer = b.client(ns="churn")
        for round in range(6):
            assert writer.call("p", {"p": "/n", "d": round}, timeout=15)["s"] == "ok"
            visitor = a.client(ns="churn")  # a follows the namespace, then may release it again
            deadline = time.time() + 15
            while visitor.call("g", {"p": "/n"}, timeout=15)["d"] != round:
                assert time.time() < deadline, f"node a never saw round {round}"
                time.sleep(0.1)
            assert visitor.call("p", {"p": f"/seen/{round}", "d": True}, timeout=15)["s"] == "ok"
            visitor.close()
        expected = {str(i): True for i in range(6)}
        deadline = time.time() + 15  # b may lag behind what a acknowledged (no read barrier)
        while writer.call("g", {"p": "/seen"}, timeout=15)["d"] != expected:
            assert time.time() < deadline, "node b never saw every write made through node a"
            time.sleep(0.1)
    finally:
        a.stop()
        b.stop()


def test_a_namespace_released_and_followed_again_replays_its_log(redis):
    """An empty namespace with no client is released (unfollow); the next client follows it again
    from the first revision while another node keeps writing."""
    a = Server("--storage", "redis", "--redis", redis.address, "--rules", "open", "--log-level", "debug")
    b = Server("--storage", "redis", "--redis", redis.address, "--rules", "open")
    try:
        writer = b.client(ns="empty")
        for round in range(5):
            visitor = a.client(ns="empty")
            assert visitor.call("p", {"p": "/tmp", "d": round}, timeout=15)["s"] == "ok"
            assert visitor.call("p", {"p": "/tmp", "d": None}, timeout=15)["s"] == "ok"
            visitor.close()
            assert writer.call("p", {"p": "/count", "d": round}, timeout=15)["s"] == "ok"
            assert writer.call("p", {"p": "/count", "d": None}, timeout=15)["s"] == "ok"
            time.sleep(0.2)
        assert writer.call("p", {"p": "/last", "d": "b"}, timeout=15)["s"] == "ok"
        reader = a.client(ns="empty")
        deadline = time.time() + 15
        while reader.call("g", {"p": "/"}, timeout=15)["d"] != {"last": "b"}:
            assert time.time() < deadline, "node a did not catch up after following the namespace again"
            time.sleep(0.1)
        assert a.read_log().count("following the log of namespace empty") >= 2, "the namespace was never released"
        assert "cannot be served" not in a.read_log()
    finally:
        a.stop()
        b.stop()


def test_a_namespace_name_too_long_for_redis_keys_is_refused_clearly(redis):
    import websocket
    node = Server("--storage", "redis", "--redis", redis.address, "--rules", "open")
    try:
        ws = websocket.create_connection(node.url(ns="n" * 600), timeout=10)
        messages = []
        try:
            while True:
                messages.append(ws.recv())
        except websocket.WebSocketConnectionClosedException:
            pass
        assert any("at most 512 bytes" in message for message in messages), messages
        assert node.client().call("p", {"p": "/ok", "d": 1}, timeout=15)["s"] == "ok"
    finally:
        node.stop()


def test_redis_killed_and_restarted_under_writes_loses_no_acknowledged_write(redis):
    """kill -9 of Redis (AOF, appendfsync always) while three nodes write: the nodes reconnect by
    themselves, and every write acknowledged before, during or after is on every node."""
    import threading
    nodes = [Server("--storage", "redis", "--redis", redis.address, "--rules", "open") for _ in range(3)]
    try:
        acked = [[] for _ in nodes]
        errors = []
        stop = threading.Event()

        def write(index):
            try:
                client = nodes[index].client()
                i = 0
                while not stop.is_set():
                    reply = client.call("p", {"p": f"/w/n{index}/k{i}", "d": i}, timeout=20)
                    if reply["s"] == "ok":
                        acked[index].append(i)
                    else:
                        assert reply["s"] == "unavailable", reply
                    i += 1
            except Exception as error:  # noqa: BLE001 - reported by the main thread
                errors.append(repr(error))

        threads = [threading.Thread(target=write, args=(index,)) for index in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        redis.kill()
        time.sleep(0.3)
        redis.start()
        time.sleep(2.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors
        assert all(node.alive() for node in nodes), "a node stopped over a short Redis restart"
        assert all(len(done) > 3 for done in acked), [len(done) for done in acked]
        for node in nodes:
            reader = node.client()
            deadline = time.time() + 20
            while True:
                tree = reader.call("g", {"p": "/w"}, timeout=20)["d"] or {}
                missing = [(index, i) for index, done in enumerate(acked) for i in done
                           if tree.get(f"n{index}", {}).get(f"k{i}") != i]
                if not missing:
                    break
                assert time.time() < deadline, f"acknowledged writes missing on a node: {missing[:10]}"
                time.sleep(0.2)
    finally:
        for node in nodes:
            node.stop()
