"""Floods and slow clients on WebSockets and streams (issue 16): a message storm is slowed by its
budget and loses nothing, a client that never reads is dropped with a reason (WebSocket and
Server-Sent Events), half-open handshakes are dropped. Each time another client stays served and
the offender leaves the engine. Behaviour only: the latency bounds are benchmarks (bench/attack.py)."""
import json
import re
from contextlib import contextmanager
import socket
import time

import requests

from conftest import Server
from wsraw import TEXT, Reader, frame, request, upgrade

OWNER = {"Authorization": "Bearer owner"}


@contextmanager
def serving(*flags):
    """A server (open rules, no grace, in memory) with these flags that must still be alive at the end."""
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory", *flags)
    try:
        yield server
    finally:
        assert server.alive()
        server.stop()


def stats(server):
    return requests.get(f"http://{server.host}:{server.port}/.admin/stats", headers=OWNER, timeout=5).json()


def metric(server, name):
    text = requests.get(f"http://{server.host}:{server.port}/metrics", timeout=5).text
    match = re.search(rf"^{name} (\d+(?:\.\d+)?)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_a_message_storm_is_slowed_by_its_budget_loses_nothing_and_others_are_served():
    with serving("--max-messages-per-second", "100", "--message-burst", "50") as server:
        bystander = server.client()
        sock, pending = upgrade(server.host, server.port)
        storm = Reader(sock, pending)
        storm.next()  # hello
        sock.sendall(b"".join(frame(TEXT, request(r, "p", {"p": f"/storm/{r % 10}", "d": r})) for r in range(1, 501)))
        # The storm is read 50 at once, then 100 a second: it cannot all be answered yet, while the
        # bystander is answered at once (each of its calls waits only for its own reply).
        for i in range(5):
            assert bystander.call("p", {"p": "/bystander", "d": i})["s"] == "ok"
        assert "sends more than 100 messages a second" in server.read_log()
        assert metric(server, "presence_connections_throttled_total") >= 1
        # Nothing of the storm is lost or reordered: every write is acknowledged, in order.
        acked = []
        while len(acked) < 500:
            got = storm.next(timeout=15)
            assert got, f"only {len(acked)} acks"
            if got[0] == TEXT:
                message = json.loads(got[1])
                if "r" in message.get("d", {}):
                    acked.append(message["d"]["r"])
        assert acked == list(range(1, 501))
        assert bystander.call("g", {"p": "/storm/0", "q": {}})["d"] == 500
        sock.close()


def test_requests_that_make_the_server_work_hard_spend_the_budget_faster_than_their_count():
    # Ten reads are far below a burst of 50 messages, but each read of 20,000 children holds the
    # loop for milliseconds (a token per 100 µs): the reader is paused, the bystander is served.
    with serving("--max-messages-per-second", "100", "--message-burst", "50") as server:
        base = f"http://{server.host}:{server.port}"
        children = {f"k{i:05d}": f"value {i}" for i in range(20_000)}
        assert requests.patch(f"{base}/big.json", params={"ns": "demo"}, json=children, headers=OWNER, timeout=60).status_code == 200
        bystander = server.client()
        sock, pending = upgrade(server.host, server.port)
        reader = Reader(sock, pending)
        reader.next()  # hello
        sock.sendall(b"".join(frame(TEXT, request(r, "g", {"p": "/big", "q": {}})) for r in range(1, 11)))
        deadline = time.time() + 60
        while "sends more than 100 messages a second" not in server.read_log():
            assert time.time() < deadline, "ten costly reads never spent the budget"
            time.sleep(0.1)
        assert metric(server, "presence_connections_throttled_total") >= 1
        assert bystander.call("p", {"p": "/bystander", "d": 1})["s"] == "ok"
        sock.close()


def test_a_websocket_client_that_never_reads_is_dropped_at_the_queue_limit():
    with serving("--max-queued-bytes", "2097152") as server:
        sock, pending = upgrade(server.host, server.port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(frame(TEXT, request(1, "q", {"p": "/feed", "h": ""})))
        writer = server.client()
        assert stats(server)["connections"] == 2
        blob = "x" * 200_000
        deadline = time.time() + 60
        while "does not read fast enough" not in server.read_log():
            assert time.time() < deadline, "the slow reader was never dropped"
            assert writer.call("p", {"p": "/feed", "d": blob}, timeout=10)["s"] == "ok"
        # 2 MiB, not the default 16 MiB: the flag is in force.
        queued = int(re.search(r"does not read fast enough \((\d+) bytes queued\)", server.read_log()).group(1))
        assert 2_097_152 < queued < 4_000_000
        deadline = time.time() + 20  # within a second on an idle machine
        while stats(server)["connections"] != 1:
            assert time.time() < deadline
            time.sleep(0.1)
        assert writer.call("g", {"p": "/feed", "q": {}})["s"] == "ok"
        sock.close()


def test_a_stream_that_never_reads_is_dropped_and_leaves_the_engine():
    with serving("--max-queued-bytes", "2097152") as server:
        base = f"http://{server.host}:{server.port}"
        stream = socket.create_connection((server.host, server.port))
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stream.sendall(b"GET /feed.json?ns=demo HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        stream.settimeout(5)
        assert stream.recv(4096).startswith(b"HTTP/1.1 200")
        writer = server.client()
        pushes_at_start = metric(server, "presence_pushes_total")
        blob = "y" * 200_000
        deadline = time.time() + 60
        while "closing stream" not in server.read_log():
            assert time.time() < deadline, "the slow stream was never dropped"
            assert writer.call("p", {"p": "/feed", "d": blob}, timeout=10)["s"] == "ok"
        assert "does not read fast enough" in server.read_log()
        assert metric(server, "presence_pushes_total") > pushes_at_start
        # It left the engine at once: writes compute no more pushes for it.
        pushes = metric(server, "presence_pushes_total")
        for i in range(3):
            assert writer.call("p", {"p": "/feed", "d": i})["s"] == "ok"
        assert metric(server, "presence_pushes_total") == pushes
        # And its socket is closed within a couple of seconds, though it never read.
        deadline = time.time() + 20  # within a second or two on an idle machine
        while "stream closed" not in server.read_log():
            assert time.time() < deadline, "the slow stream's socket was never closed"
            time.sleep(0.1)
        assert requests.get(f"{base}/feed.json", params={"ns": "demo"}, timeout=5).json() == 2
        stream.close()


def test_half_open_handshakes_are_dropped_and_others_are_served():
    with serving("--http-timeout", "2") as server:
        silent = [socket.create_connection((server.host, server.port)) for _ in range(100)]
        partial = []
        for _ in range(100):
            sock = socket.create_connection((server.host, server.port))
            sock.sendall(b"GET /.ws?v=5&ns=demo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
            partial.append(sock)
        client = server.client()
        assert client.call("p", {"p": "/ok", "d": 1})["s"] == "ok"
        assert server.client().call("g", {"p": "/ok", "q": {}})["d"] == 1
        # --http-timeout 2: every half-open connection is closed by the server soon after
        # (generous timeouts: the machine may be busy).
        time.sleep(2)
        for sock in silent + partial:
            sock.settimeout(20)
            try:
                assert sock.recv(100) == b""
            except ConnectionResetError:
                pass
            sock.close()
        assert client.call("g", {"p": "/ok", "q": {}})["d"] == 1
