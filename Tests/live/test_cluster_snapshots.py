"""Snapshots and the bounded log (issue 14, docs/scaling.md "Snapshots and the bounded log"):
nodes on one real redis-server write snapshots of their replicas, trim the log behind them, and a
node that joins or restarts loads the newest snapshot, then the log after it, and reports ready on
/readyz only once caught up. Uses test_cluster.py's Redis (a free port, a temporary directory,
AOF with appendfsync always); skipped only when redis-server is not installed."""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import Server
from test_cluster import REDIS, redis  # noqa: F401 - `redis` is the fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")

# Small intervals, so that a test sees several snapshots and trims.
SNAPSHOTS = ("--snapshot-every", "0.5", "--snapshot-entries", "100", "--log-keep", "1", "--node-beat", "0.25")


def node(redis, name, *extra):
    return Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", "open", *SNAPSHOTS, *extra)


def redis_call(redis, *args):
    """One command over RESP; the reply as Python values (errors raise)."""
    def encode(part):
        data = part if isinstance(part, bytes) else str(part).encode()
        return b"$%d\r\n%s\r\n" % (len(data), data)
    with socket.create_connection(("127.0.0.1", redis.port), timeout=10) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(encode(a) for a in args))
        reader = s.makefile("rb")

        def read():
            line = reader.readline()[:-2]
            kind, rest = line[:1], line[1:]
            if kind == b"+":
                return rest.decode()
            if kind == b"-":
                raise RuntimeError(rest.decode())
            if kind == b":":
                return int(rest)
            if kind == b"$":
                if int(rest) < 0:
                    return None
                data = reader.read(int(rest) + 2)[:-2]
                return data.decode("utf-8", "replace")
            if kind == b"*":
                return None if int(rest) < 0 else [read() for _ in range(int(rest))]
            raise RuntimeError(f"unexpected reply {line!r}")
        return read()


def head(redis, ns):
    fields = redis_call(redis, "HGETALL", f"presence:{{{ns}}}:head")
    return {fields[i]: fields[i + 1] for i in range(0, len(fields), 2)}


def log_length(redis, ns):
    return redis_call(redis, "XLEN", f"presence:{{{ns}}}:log")


def rest_get(server, ns, path="/"):
    with urllib.request.urlopen(f"http://{server.host}:{server.port}{path}.json?ns={ns}", timeout=10) as response:
        return json.loads(response.read())


def wait_ready(server, timeout=30):
    """Polls /readyz until 200; the time it took."""
    started = time.time()
    while True:
        try:
            with urllib.request.urlopen(f"http://{server.host}:{server.port}/readyz", timeout=5) as response:
                if response.status == 200:
                    return time.time() - started
        except urllib.error.HTTPError as error:
            assert error.code == 503, error
        assert server.alive(), server.read_log()
        assert time.time() - started < timeout, f"not ready within {timeout}s: {server.read_log()[-2000:]}"
        time.sleep(0.05)


class Writers:
    """Threads writing /w/<writer>/k<i> = i through their node until stopped; what was acknowledged."""

    def __init__(self, ns, servers):
        self.ns = ns
        self.acked = [[] for _ in servers]
        self.errors = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(index, server)) for index, server in enumerate(servers)]
        for thread in self.threads:
            thread.start()

    def write(self, index, server):
        try:
            client = server.client(ns=self.ns)
            i = 0
            while not self.stopping.is_set():
                reply = client.call("p", {"p": f"/w/n{index}/k{i}", "d": i}, timeout=20)
                assert reply["s"] == "ok", reply
                self.acked[index].append(i)
                i += 1
            client.close()
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            self.errors.append(repr(error))

    def count(self):
        return sum(len(done) for done in self.acked)

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not self.errors, self.errors

    def missing(self, tree, acked=None):
        acked = self.acked if acked is None else acked
        w = (tree or {}).get("w") or {}
        return [(index, i) for index, done in enumerate(acked) for i in done if (w.get(f"n{index}") or {}).get(f"k{i}") != i]


def settle_on_marker(ns, servers, clients):
    """A last write through the first node, once every writer stopped, then each node's whole tree
    once it has applied it: every node's data at one common revision (the marker's)."""
    marker = f"m{time.time()}"
    assert clients[0].call("p", {"p": "/marker", "d": marker}, timeout=20)["s"] == "ok"
    trees = []
    for server, client in zip(servers, clients):
        deadline = time.time() + 20
        while True:
            tree = client.call("g", {"p": "/"}, timeout=20)["d"] or {}
            if tree.get("marker") == marker:
                break
            assert time.time() < deadline, f"{server.port} never applied the marker"
            time.sleep(0.05)
        trees.append(tree)
    return trees


def test_a_node_joining_while_writes_continue_ends_with_the_others_data(redis):  # noqa: F811
    ns = "join"
    a, b = node(redis, "a"), node(redis, "b")
    c = None
    try:
        keep = [a.client(ns=ns), b.client(ns=ns)]  # a and b serve the namespace throughout
        writers = Writers(ns, [a, b])
        deadline = time.time() + 30
        while int(head(redis, ns).get("snap", "0")) == 0 or writers.count() < 200:
            assert time.time() < deadline, f"no snapshot published: {head(redis, ns)}"
            time.sleep(0.1)
        before = [list(done) for done in writers.acked]
        c = node(redis, "c", "--preload", ns)
        wait_ready(c)
        # ready means caught up: everything acknowledged before c started is there at once
        assert writers.missing(rest_get(c, ns), before) == []
        log = c.read_log()
        assert "loaded the snapshot at revision" in log, log
        time.sleep(1.0)  # c keeps up with the writes that follow
        writers.stop()
        assert writers.count() > 300, writers.count()
        trees = settle_on_marker(ns, [a, b, c], keep + [c.client(ns=ns)])
        assert trees[0] == trees[1] == trees[2]
        assert writers.missing(trees[2]) == []
        assert all(server.alive() for server in (a, b, c))
    finally:
        for server in (a, b, c):
            if server:
                server.stop()


def test_the_log_stays_bounded_and_a_new_node_still_catches_up(redis):  # noqa: F811
    """Six seconds of writes from three clients on two nodes, a snapshot every 0.5 s keeping 0.5 s
    of log: at every moment the stream holds at most the entries of the last few seconds (what a
    snapshot may not trim yet, and what XTRIM ~ leaves: whole stream nodes of 100 entries)."""
    ns = "bounded"
    keep_seconds, every_seconds = 0.5, 0.5
    flags = ("--snapshot-every", str(every_seconds), "--log-keep", str(keep_seconds))
    a, b = node(redis, "a", *flags), node(redis, "b", *flags)
    c = None
    try:
        keep = [a.client(ns=ns), b.client(ns=ns)]
        writers = Writers(ns, [a, b, a])
        samples = []  # (time, head revision, stream length)
        started = time.time()
        while time.time() - started < 6:
            time.sleep(0.2)
            samples.append((time.time(), int(head(redis, ns).get("rev", "0")), log_length(redis, ns)))
        writers.stop()

        def rev_at(moment):
            return max([rev for at, rev, _ in samples if at <= moment] or [0])
        window = keep_seconds + every_seconds + 1.5  # + the beat that checks, and slack for a busy machine
        for at, rev, length in samples:
            assert length <= rev - rev_at(at - window) + 250, (at - started, rev, length, samples)
        state = head(redis, ns)
        rev, length = int(state["rev"]), log_length(redis, ns)
        assert int(state["min"]) > 1 and int(state["snap"]) > 0, state
        assert length < rev / 2, (length, state, samples)
        # only the published snapshot and the one before it are kept (and one being written)
        snaps = redis_call(redis, "KEYS", f"presence:{{{ns}}}:snap:*")
        assert 1 <= len(snaps) <= 3, snaps
        c = node(redis, "c")
        reader = c.client(ns=ns)
        trees = settle_on_marker(ns, [a, b, c], keep + [reader])
        assert trees[0] == trees[1] == trees[2]
        assert writers.missing(trees[2]) == []
        assert "loaded the snapshot at revision" in c.read_log()
    finally:
        for server in (a, b, c):
            if server:
                server.stop()


def test_a_node_restarted_after_the_log_was_trimmed_catches_up(redis):  # noqa: F811
    ns = "restart"
    a, b = node(redis, "a"), node(redis, "b")
    try:
        keep = b.client(ns=ns)
        writer = a.client(ns=ns)
        for i in range(50):
            assert writer.call("p", {"p": f"/before/k{i}", "d": i}, timeout=20)["s"] == "ok"
        keep.close()
        assert b.stop() == 0
        stopped_at = int(head(redis, ns)["rev"])
        i = 0
        deadline = time.time() + 60
        while int(head(redis, ns).get("min", "1")) <= stopped_at + 1:
            assert time.time() < deadline, f"the log was never trimmed past the stopped node: {head(redis, ns)}"
            assert writer.call("p", {"p": f"/after/k{i % 300}", "d": i}, timeout=20)["s"] == "ok"
            i += 1
        b = node(redis, "b", "--preload", ns)
        wait_ready(b)
        assert rest_get(b, ns) == rest_get(a, ns)
        trees = settle_on_marker(ns, [a, b], [writer, b.client(ns=ns)])
        assert trees[0] == trees[1]
        assert trees[1]["before"] == {f"k{k}": k for k in range(50)}
        assert "loaded the snapshot at revision" in b.read_log()
        assert "cannot be served" not in b.read_log()
    finally:
        a.stop()
        b.stop()


def test_nodes_refuse_writes_when_redis_comes_back_without_its_history(redis):  # noqa: F811
    """Redis restarted empty (its AOF lost): the running nodes never write into the new, empty
    history; a write is refused with the reason, and each node stops (EX_TEMPFAIL, fenced) saying
    Redis lost its data, rather than serve a silently rolled-back database."""
    import os
    ns = "epoch"
    a, b = node(redis, "a"), node(redis, "b")
    try:
        writer, other = a.client(ns=ns), b.client(ns=ns)
        assert writer.call("p", {"p": "/kept", "d": 1}, timeout=20)["s"] == "ok"
        assert other.call("p", {"p": "/also", "d": 2}, timeout=20)["s"] == "ok"
        redis.kill()
        shutil_rmtree(os.path.join(redis.dir, "appendonlydir"))
        redis.start()
        assert redis_call(redis, "EXISTS", f"presence:{{{ns}}}:head") == 0
        try:
            reply = writer.call("p", {"p": "/lost", "d": 3}, timeout=20)
            assert reply["s"] == "unavailable" and "another history" in reply["d"], reply
        except json.JSONDecodeError as closed:  # the close frame (empty) came first: the node fenced
            assert closed.doc == "", repr(closed)
        except Exception as closed:  # noqa: BLE001 - the node may have fenced itself first
            assert "closed" in repr(closed).lower() or "Connection" in repr(closed), repr(closed)
        deadline = time.time() + 30
        while (a.alive() or b.alive()) and time.time() < deadline:
            time.sleep(0.1)
        for server in (a, b):
            assert not server.alive(), "a node kept serving after Redis lost its history"
            assert server.proc.returncode == 75
            assert "Redis lost its data" in server.read_log(), server.read_log()[-2000:]
        # nothing was written into the new, empty history
        assert redis_call(redis, "EXISTS", f"presence:{{{ns}}}:head") == 0
        assert redis_call(redis, "EXISTS", f"presence:{{{ns}}}:log") == 0
    finally:
        a.stop()
        b.stop()


def shutil_rmtree(path):
    import shutil
    shutil.rmtree(path, ignore_errors=True)


def test_a_node_restarted_against_a_redis_that_lost_its_data_refuses_to_serve_it(redis):  # noqa: F811
    """With --cluster-state a node remembers the history of each namespace it served: restarted
    (as its supervisor would) against a Redis that came back empty, it refuses to serve that
    namespace rather than create a new, empty history, and says why (to its log and its clients)."""
    import os
    import tempfile
    ns = "remembered"
    state = os.path.join(tempfile.mkdtemp(prefix="presence-cluster-state-"), "history.json")
    a = node(redis, "a", "--cluster-state", state)
    try:
        writer = a.client(ns=ns)
        assert writer.call("p", {"p": "/kept", "d": 1}, timeout=20)["s"] == "ok"
        with open(state) as f:
            assert json.load(f) == {ns: head(redis, ns)["epoch"]}
        redis.kill()
        shutil_rmtree(os.path.join(redis.dir, "appendonlydir"))
        redis.start()
        deadline = time.time() + 30
        while a.alive() and time.time() < deadline:
            time.sleep(0.1)
        assert not a.alive() and a.proc.returncode == 75  # fenced: Redis lost its data
        a = node(redis, "a", "--cluster-state", state)  # the supervisor starts it again
        from test_cluster_history import assert_refused
        assert_refused(a, ns)  # that namespace only: the node keeps running (test_cluster_history.py)
        assert a.alive(), "the restarted node stopped instead of refusing the namespace"
        assert f"Redis lost the history of namespace {ns}" in a.read_log(), a.read_log()[-2000:]
        assert redis_call(redis, "EXISTS", f"presence:{{{ns}}}:head") == 0  # no new, empty history
    finally:
        a.stop()
