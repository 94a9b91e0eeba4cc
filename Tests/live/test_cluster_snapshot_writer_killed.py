"""A snapshot writer killed while it writes (docs/scaling.md, "Snapshots and the bounded log"):
the node holding the `snapper` lease is `kill -9`ed with some chunks of its snapshot in Redis and
the snapshot not published. No node may load that partial snapshot; once the snapper lease
expires another node writes a complete one, the partial one is deleted, and a node that joins
then loads the new one and has the survivor's data."""
import signal
import time

import pytest

from test_cluster import REDIS, redis  # noqa: F401 - fixture
from test_cluster_snapshots import head, node, redis_call, rest_get, wait_ready

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")

NS = "killed"
BLOB = "x" * 60_000


def partial_snapshot(redis):
    """(rev, chunks stored) of a snapshot being written with at least one chunk, or None."""
    pending = head(redis, NS).get("pending")
    if not pending:
        return None
    key = f"presence:{{{NS}}}:snap:{pending}"
    fields = redis_call(redis, "HKEYS", key) or []
    if ".count" in fields or not any(":" in field for field in fields):
        return None
    return int(pending), len(fields)


def test_a_snapshot_writer_killed_halfway_leaves_nothing_partial_to_load(redis):
    nodes = {name: node(redis, name) for name in ("a", "b")}
    c = None
    try:
        clients = {name: server.client(ns=NS) for name, server in nodes.items()}
        # About 3 MB of data: each snapshot is several 512 KiB chunks, one Redis call each.
        for i in range(50):
            assert clients["a"].call("p", {"p": f"/blobs/b{i}", "d": BLOB}, timeout=30)["s"] == "ok"
        caught = None
        deadline = time.time() + 90
        step = 0
        while caught is None:
            assert time.time() < deadline, f"never saw a snapshot half written: {head(redis, NS)}"
            caught = partial_snapshot(redis)
            if caught is None:
                if int(head(redis, NS).get("snap", "0")) >= int(head(redis, NS)["rev"]):
                    step += 1  # everything is in a snapshot: give the writers something new
                    clients["b"].request("p", {"p": "/step", "d": step})
                continue
            # Freeze the writer, then check it is still halfway: it may have finished since.
            victim = redis_call(redis, "GET", f"presence:{{{NS}}}:snapper").split("#")[0]
            nodes[victim].proc.send_signal(signal.SIGSTOP)
            again = partial_snapshot(redis)
            if again is None or again[0] != caught[0] or int(head(redis, NS).get("snap", "0")) == caught[0]:
                nodes[victim].proc.send_signal(signal.SIGCONT)
                caught = None
            else:
                caught = again
        nodes[victim].kill()
        partial_rev, chunks = caught
        survivor_name = "b" if victim == "a" else "a"
        survivor = nodes[survivor_name]
        assert survivor.alive()
        assert int(head(redis, NS).get("snap", "0")) != partial_rev, "a half-written snapshot was published"

        # Something new to snapshot, then the snapper lease (10 s) runs out and the survivor writes.
        writer = survivor.client(ns=NS)
        assert writer.call("p", {"p": "/after", "d": "the kill"}, timeout=30)["s"] == "ok"
        deadline = time.time() + 60
        while True:
            state = head(redis, NS)
            published = int(state.get("snap", "0"))
            if published > partial_rev and "pending" not in state:
                break
            assert time.time() < deadline, f"no complete snapshot after the writer died: {state}"
            time.sleep(0.2)
        assert redis_call(redis, "HGET", f"presence:{{{NS}}}:snap:{published}", ".count") is not None
        assert redis_call(redis, "EXISTS", f"presence:{{{NS}}}:snap:{partial_rev}") == 0, \
            "the partial snapshot was left in Redis"

        c = node(redis, "c", "--preload", NS)
        wait_ready(c, timeout=60)
        log = c.read_log()
        loaded = [line for line in log.splitlines() if "loaded the snapshot at revision" in line]
        assert loaded and f"revision {partial_rev} " not in loaded[0], loaded
        tree = rest_get(c, NS)
        assert tree["after"] == "the kill" and len(tree["blobs"]) == 50, sorted(tree)
        assert tree == rest_get(survivor, NS)
        for server in (survivor, c):
            assert "cannot be loaded" not in server.read_log() and "cannot be served" not in server.read_log()
        print(f"killed {victim} with {chunks} chunks of snapshot {partial_rev} in Redis; {survivor_name} published {published}")
    finally:
        for server in (*nodes.values(), c):
            if server:
                server.stop()
