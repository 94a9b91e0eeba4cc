"""Hostile input against the shell (issue 16): pipelined HTTP, a stream left behind, unmasked
frames and a client that stops reading. Each must leave the loop idle and other clients served."""
import json
import os
import re
import socket
import ssl
import time

import requests
import websocket

from conftest import Server
from test_tls_and_config import pki  # noqa: F401 (a fixture)
from wsraw import read_to_close

OWNER = {"Authorization": "Bearer owner"}


def cpu_seconds(pid):
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def assert_idle(server, seconds=1.5):
    """The server's CPU time stops growing: at most 10 % of one core over `seconds`."""
    before = cpu_seconds(server.proc.pid)
    time.sleep(seconds)
    used = cpu_seconds(server.proc.pid) - before
    assert used < 0.1 * seconds, f"the server used {used:.2f} s of CPU in {seconds} s while idle"


def test_pipelined_requests_with_a_body_are_answered_and_the_loop_stays_idle():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory")
    try:
        attacker = socket.create_connection((server.host, server.port))
        attacker.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                         b"PUT /a.json HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1")
        data, closed = read_to_close(attacker, timeout=5)
        attacker.close()
        # The first request is answered, then the connection closes (the second is not read).
        assert data.startswith(b"HTTP/1.1 200") and b'{"status":"ok"}' in data, data
        assert closed, "the server kept the connection open"
        time.sleep(1)
        assert_idle(server)
        # Everyone else is still served, over HTTP and WebSocket.
        base = f"http://{server.host}:{server.port}"
        assert requests.put(f"{base}/b.json", params={"ns": "demo"}, data="2", timeout=5).status_code == 200
        assert server.client().call("g", {"p": "/b", "q": {}})["d"] == 2
        # The pipelined PUT was not executed.
        assert requests.get(f"{base}/a.json", timeout=5).json() is None
    finally:
        assert server.alive()
        server.stop()


def test_a_stream_left_by_its_client_is_closed_and_the_loop_stays_idle():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory")
    try:
        for extra in (b"", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"):
            client = socket.create_connection((server.host, server.port))
            client.sendall(b"GET /room.json HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            client.settimeout(5)
            assert client.recv(65536).startswith(b"HTTP/1.1 200")
            if extra:
                client.sendall(extra)  # bytes nobody reads on a stream must not spin the loop either
                time.sleep(0.5)
                assert_idle(server, 1)
            client.close()
            deadline = time.time() + 3
            while "stream closed" not in server.read_log() and time.time() < deadline:
                time.sleep(0.1)
            assert server.read_log().count("stream closed") == (1 if not extra else 2)
            assert_idle(server)
    finally:
        assert server.alive()
        server.stop()


def handshake(server, wrap=None):
    """A raw WebSocket connection (upgrade done), for frames the libraries will not send."""
    sock = socket.create_connection((server.host, server.port))
    if wrap:
        sock = wrap(sock)
    sock.sendall(f"GET /.ws?v=5&ns=demo HTTP/1.1\r\nHost: {server.host}:{server.port}\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, rest


def read_frames(sock, pending, timeout=5):
    """Reads server frames until the server closes; returns [(opcode, payload)]."""
    frames, data = [], pending
    sock.settimeout(timeout)
    while True:
        while len(data) >= 2:
            length, offset = data[1] & 0x7F, 2
            if length == 126:
                length, offset = int.from_bytes(data[2:4], "big"), 4
            elif length == 127:
                length, offset = int.from_bytes(data[2:10], "big"), 10
            if len(data) < offset + length:
                break
            frames.append((data[0] & 0x0F, data[offset:offset + length]))
            data = data[offset + length:]
            if frames[-1][0] == 8:
                return frames
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return frames
        if not chunk:
            return frames
        data += chunk


def test_an_unmasked_client_frame_closes_the_connection_with_1002(open_server):
    bystander = open_server.client()
    sock, pending = handshake(open_server)
    payload = json.dumps({"t": "d", "d": {"r": 1, "a": "p", "b": {"p": "/unmasked", "d": 1}}}).encode()
    assert len(payload) < 126
    sock.sendall(bytes([0x81, len(payload)]) + payload)  # FIN + text, mask bit clear
    frames = read_frames(sock, pending)
    sock.close()
    closes = [payload for opcode, payload in frames if opcode == 8]
    assert closes and int.from_bytes(closes[0][:2], "big") == 1002, frames
    assert b"mask" in closes[0][2:]
    # The unmasked request was not executed, and others are unaffected.
    assert bystander.call("g", {"p": "/unmasked", "q": {}})["d"] is None
    assert "must be masked" in open_server.read_log()


def test_an_unmasked_frame_over_tls_closes_the_connection_with_1002(pki):
    tmp, issue = pki
    cert, key = issue("server", 1)
    server = Server("--rules", "open", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        context = ssl.create_default_context(cafile=str(tmp / "ca.pem"))
        context.check_hostname = False
        sock, pending = handshake(server, wrap=lambda raw: context.wrap_socket(raw, server_hostname="localhost"))
        payload = json.dumps({"t": "d", "d": {"r": 1, "a": "p", "b": {"p": "/unmasked", "d": 1}}}).encode()
        sock.sendall(bytes([0x81, len(payload)]) + payload)
        frames = read_frames(sock, pending)
        sock.close()
        closes = [payload for opcode, payload in frames if opcode == 8]
        assert closes and int.from_bytes(closes[0][:2], "big") == 1002, frames
    finally:
        assert server.alive()
        server.stop()


def test_a_masked_frame_after_the_handshake_is_still_served(open_server):
    sock, pending = handshake(open_server)
    frame = websocket.ABNF.create_frame(json.dumps({"t": "d", "d": {"r": 1, "a": "p", "b": {"p": "/m", "d": 1}}}),
                                        websocket.ABNF.OPCODE_TEXT)
    sock.sendall(frame.format())
    sock.settimeout(5)
    data = pending
    deadline = time.time() + 5
    while b'"r":1' not in data and time.time() < deadline:
        data += sock.recv(65536)
    sock.close()
    assert b'"s":"ok"' in data


def metric(server, name):
    text = requests.get(f"http://{server.host}:{server.port}/metrics", timeout=5).text
    match = re.search(rf"^{name} (\d+(?:\.\d+)?)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_a_slow_reader_leaves_the_engine_at_once():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory")
    base = f"http://{server.host}:{server.port}"
    try:
        slow = websocket.create_connection(server.url(), timeout=5,
                                           sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
        json.loads(slow.recv())  # hello
        slow.send(json.dumps({"t": "d", "d": {"r": 1, "a": "q", "b": {"p": "/feed", "h": ""}}}))
        writer = server.client()
        stats = requests.get(f"{base}/.admin/stats", headers=OWNER, timeout=5).json()
        assert stats["connections"] == 2
        listed = requests.get(f"{base}/.admin/connections", headers=OWNER, timeout=5).json()["connections"]
        assert len(listed) == 2
        # The slow client never reads again; the writer fills its queue past 16 MiB.
        blob = "x" * 500_000
        deadline = time.time() + 60
        while "does not read fast enough" not in server.read_log():
            assert time.time() < deadline, "the slow reader was never dropped"
            assert writer.call("p", {"p": "/feed", "d": blob}, timeout=10)["s"] == "ok"
        dropped_at = time.time()
        # Within 2 s the engine no longer holds it: not listed, not counted, no pushes computed.
        while True:
            stats = requests.get(f"{base}/.admin/stats", headers=OWNER, timeout=5).json()
            listed = requests.get(f"{base}/.admin/connections", headers=OWNER, timeout=5).json()["connections"]
            if stats["connections"] == 1 and len(listed) == 1:
                break
            assert time.time() - dropped_at < 2, (stats, listed)
            time.sleep(0.1)
        pushes = metric(server, "presence_pushes_total")
        for i in range(3):
            assert writer.call("p", {"p": "/feed", "d": i})["s"] == "ok"
        assert metric(server, "presence_pushes_total") == pushes
        deadline = time.time() + 3
        while "connection closed" not in server.read_log():
            assert time.time() < deadline, "lws never closed the slow reader's socket"
            time.sleep(0.1)
        slow.close()
    finally:
        assert server.alive()
        server.stop()
