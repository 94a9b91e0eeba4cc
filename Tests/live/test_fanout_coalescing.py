"""Coalesced sends (issue 17): the server writes each connection's messages of one loop turn in one
send. A burst of pushes to one watcher must still arrive whole (each frame parses), complete and
in write order, acks in order and only after their write is durable; frames that do not fit one
send, or find the watcher's socket full, follow in order."""
import json

from conftest import Server
from test_floods import metric
from wsraw import TEXT, Reader, frame, request, upgrade


def connect(server):
    sock, pending = upgrade(server.host, server.port)
    reader = Reader(sock, pending)
    hello = json.loads(reader.next()[1])
    assert hello["d"]["t"] == "h", hello
    return sock, reader


def messages(reader, count, timeout=20):
    """The next `count` text messages, parsed (a frame that is not whole JSON fails here)."""
    got = []
    while len(got) < count:
        item = reader.next(timeout=timeout)
        assert item, f"only {len(got)} of {count} messages"
        if item[0] == TEXT:
            got.append(json.loads(item[1]))
    return got


def listen(sock, reader, path):
    sock.sendall(frame(TEXT, request(1, "q", {"p": path, "h": ""})))
    while True:
        message = json.loads(reader.next()[1])
        if message["d"].get("r") == 1:
            assert message["d"]["b"]["s"] == "ok"
            return


def burst(sock, count, value):
    """`count` writes in one TCP send: /burst/u0..u9 in turn, each carrying its request number."""
    sock.sendall(b"".join(frame(TEXT, request(r, "p", {"p": f"/burst/u{r % 10}", "d": value(r)}))
                          for r in range(1, count + 1)))


def test_a_burst_of_pushes_arrives_whole_complete_and_in_order_in_fewer_sends():
    server = Server("--rules", "open", "--disconnect-grace", "0")  # durable (SQLite)
    try:
        watcher_sock, watcher = connect(server)
        listen(watcher_sock, watcher, "/burst")
        writer_sock, writer = connect(server)
        writes_before, messages_before = (metric(server, "presence_websocket_writes_total"),
                                          metric(server, "presence_messages_sent_total"))
        burst(writer_sock, 400, lambda r: {"seq": r})
        acks = messages(writer, 400)
        assert [a["d"]["r"] for a in acks] == list(range(1, 401))
        assert all(a["d"]["b"]["s"] == "ok" for a in acks)
        pushes = messages(watcher, 400)
        assert all(p["d"]["a"] == "d" for p in pushes)
        assert [p["d"]["b"]["d"]["seq"] for p in pushes] == list(range(1, 401))
        assert [p["d"]["b"]["p"] for p in pushes] == [f"burst/u{r % 10}" for r in range(1, 401)]
        # 800 messages (400 acks, 400 pushes) went out in far fewer socket writes.
        writes = metric(server, "presence_websocket_writes_total") - writes_before
        sent = metric(server, "presence_messages_sent_total") - messages_before
        assert sent == 800
        assert 0 < writes <= sent / 2, (writes, sent)
        # What was acknowledged is stored: a fresh client reads the last values.
        reader = server.client()
        assert reader.call("g", {"p": "/burst", "q": {}})["d"] == {f"u{k}": {"seq": 390 + (k or 10)} for k in range(10)}
    finally:
        assert server.alive()
        server.stop()


def test_pushes_beyond_one_send_and_a_watcher_that_reads_late_keep_their_order():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory")
    try:
        watcher_sock, watcher = connect(server)
        listen(watcher_sock, watcher, "/burst")
        late_sock, late = connect(server)
        listen(late_sock, late, "/burst")
        writer_sock, writer = connect(server)
        # 600 pushes of ~4 KiB to each watcher: many sends' worth, more than the late watcher's
        # socket takes while it does not read, so its frames wait in the server's queue.
        padding = "x" * 4000
        burst(writer_sock, 600, lambda r: {"seq": r, "pad": padding})
        assert [a["d"]["r"] for a in messages(writer, 600)] == list(range(1, 601))
        for reader in (watcher, late):
            pushes = messages(reader, 600)
            assert [p["d"]["b"]["d"]["seq"] for p in pushes] == list(range(1, 601))
            assert all(p["d"]["b"]["d"]["pad"] == padding for p in pushes)
        assert "does not read fast enough" not in server.read_log()
    finally:
        assert server.alive()
        server.stop()
