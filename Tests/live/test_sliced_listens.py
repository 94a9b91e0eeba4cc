"""A big listen's initial data answered in slices (issue 16): the listener is registered when the
listen is accepted, its data is computed and serialized a slice at a time between other clients'
messages, and its later pushes wait behind that data on its connection, in order; the read budget
still refuses what is too big, and then drops the listen."""
import time

from conftest import Server
from test_sliced_reads import CHILDREN, preload, readable


def expected(count):
    return {f"k{i:06d}": {"name": f"user {i}", "score": i % 97} for i in range(count)}


def message_kind(message):
    body = message["d"]
    if "r" in body:
        return ("reply", body["r"], body["b"]["s"])
    return ("push", body["a"], body["b"]["p"])


def test_a_bystander_is_answered_while_a_big_listens_data_is_built_and_the_listener_gets_it_whole():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", CHILDREN)
        reader, writer, watcher = server.client(), server.client(), server.client()
        watcher.listen("/x")
        r = reader.request("q", {"p": "/big", "h": ""})
        time.sleep(0.05)  # the server is at work on the listen's data
        # Answered at once, the listen held the loop until its whole data was written: the reader
        # had its first bytes before the writer's ack. In slices, the write is handled between two.
        assert writer.call("p", {"p": "/x", "d": 1}, timeout=30)["s"] == "ok"
        assert watcher.push("x") == 1
        assert not readable(reader), "the big listen's data was sent before the bystander was served"
        first = reader.recv(timeout=120)
        assert message_kind(first) == ("push", "d", "big") and "t" not in first["d"]["b"], message_kind(first)
        assert first["d"]["b"]["d"] == expected(CHILDREN)
        assert reader.reply(r, timeout=30) == {"s": "ok", "d": {}}
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_writes_made_while_a_big_listens_data_is_built_are_pushed_after_it_in_order():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)
        reader = server.client()
        # Pipelined on one connection, so handled in this order: the writes are made (the listener
        # already registered) while the listen's data is still in slices. None may be lost, and
        # each is pushed after the data, which is the location as it was when the listen came.
        listen = reader.request("q", {"p": "/big", "h": ""})
        writes = [reader.request("p", {"p": "/big/k000001/score", "d": 1000 + value}) for value in range(3)]
        seen = [reader.recv(timeout=60) for _ in range(8)]
        kinds = [message_kind(m) for m in seen]
        assert kinds[:2] == [("push", "d", "big"), ("reply", listen, "ok")], kinds
        assert seen[0]["d"]["b"]["d"] == expected(20_000)
        pushes = [m["d"]["b"]["d"] for m in seen[2:] if message_kind(m) == ("push", "d", "big/k000001/score")]
        assert pushes == [1000, 1001, 1002], kinds
        assert sorted(kind for kind in kinds[2:] if kind[0] == "reply") == [("reply", r, "ok") for r in writes], kinds
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_a_big_tagged_query_listen_gets_its_window_in_slices_with_its_tag():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)
        reader = server.client()
        query = {"i": "score", "l": 3, "vf": "r"}
        r = reader.request("q", {"p": "/big", "q": query, "t": 7, "h": ""})
        data = reader.recv(timeout=60)
        assert message_kind(data) == ("push", "d", "big") and data["d"]["b"]["t"] == 7, data["d"]["b"].keys()
        window = sorted((i % 97, f"k{i:06d}") for i in range(20_000))[-3:]
        assert sorted(data["d"]["b"]["d"]) == sorted(key for _, key in window)
        assert reader.reply(r, timeout=30) == {"s": "ok", "d": {}}
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_a_big_listen_over_the_budget_is_refused_and_dropped():
    server = Server("--rules", "open", "--storage", "memory", "--max-read-bytes", "1000000",
                    "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 40_000)  # about 1.3 MB of JSON
        client, writer = server.client(), server.client()
        reply = client.call("q", {"p": "/big", "h": ""}, timeout=60)
        assert reply["s"] == "too_big" and "--max-read-bytes" in reply["d"] and "limitToLast" in reply["d"], reply
        # The refused listen is gone: a later write there is not pushed to it.
        assert writer.call("p", {"p": "/big/k000001/score", "d": -1}, timeout=30)["s"] == "ok"
        assert client.listen("/y") is None
        assert writer.call("p", {"p": "/y", "d": 2}, timeout=30)["s"] == "ok"
        assert message_kind(client.recv(timeout=30)) == ("push", "d", "y")
    finally:
        assert server.alive(), "the server died"
        server.stop()
    assert server.stderr.count("--max-read-bytes") == 1, "logged once per connection"
