"""HTTP floods and slow clients (issue 16): a request with a body is judged from its head before a
byte of the body is buffered, bodies in flight share a bounded room, and slow heads and bodies are
dropped. Each refusal is an answer with a reason, and everyone else stays served."""
import socket
import time

import pytest
import requests

from conftest import PRESENCE_RULES, Server, unsigned_token
from wsraw import read_to_close

ADMIN = b"Authorization: Bearer owner\r\n"


@pytest.fixture
def server():
    server = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "0", "--storage", "memory", "--http-timeout", "2",
                    "--max-pending-body-bytes", "2000000")
    yield server
    assert server.alive(), "the server died"
    server.stop()


def connect(server):
    sock = socket.create_connection((server.host, server.port))
    sock.settimeout(5)
    return sock


def head(path, length, extra=b"", method=b"PUT"):
    return method + b" " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"Content-Length: " + str(length).encode() + b"\r\n\r\n"


def status_line(sock):
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed without an answer: {data!r}"
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def trickle(sock, pieces, pause=0.5):
    """Sends `pieces` one at a time, `pause` apart, until the server closes the connection:
    seconds until it did, or None if it never did."""
    started = time.time()
    for piece in pieces:
        try:
            sock.sendall(piece)
            sock.settimeout(pause)
            if sock.recv(1) == b"":
                return time.time() - started
        except socket.timeout:
            continue
        except OSError:
            return time.time() - started
    return None


def still_served(server):
    base = f"http://{server.host}:{server.port}"
    assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
    reply = requests.put(f"{base}/users/bob/presence.json", headers={"Authorization": "Bearer owner"},
                         json={"online": True, "lastSeen": 1}, timeout=5)
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("path,extra,status", [
    (b"/users/alice/presence.json", b"", "401"),  # anonymous: the rules refuse any value
    (b"/users/alice/presence.json", b"Authorization: Bearer not-a-token\r\n", "401"),  # a bad token
    (b"/users/alice/presence", ADMIN, "404"),  # not a data path
    (b"/.admin/connections/x/close", b"", "401"),  # operators need the admin credential
])
def test_a_body_nobody_may_send_is_refused_from_its_head_and_dropped(server, path, extra, status):
    sock = connect(server)
    sock.sendall(head(path, 800_000, extra) + b"x" * 1000)
    assert status_line(sock).split()[1] == status
    # The rest of the body is read and dropped; then the connection closes cleanly.
    sock.sendall(b"y" * 799_000)
    _, closed = read_to_close(sock)
    assert closed is True
    sock.close()
    assert "from its head" in server.read_log()
    still_served(server)


def test_a_body_the_rules_could_allow_is_read_then_judged_with_its_value(server):
    token = b"Authorization: Bearer " + unsigned_token("alice").encode() + b"\r\n"
    for value, status in ((b'{"online":true,"lastSeen":1}', "200"), (b'{"online":"yes","lastSeen":1}', "401")):
        sock = connect(server)
        sock.sendall(head(b"/users/alice/presence.json", len(value), token) + value)
        assert status_line(sock).split()[1] == status
        sock.close()


def test_a_body_over_the_limit_is_refused_from_its_content_length(server):
    sock = connect(server)
    sock.sendall(head(b"/a.json", 5_000_000, ADMIN) + b"x" * 10)
    data = b""
    while b"--max-message-bytes" not in data:
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    assert data.startswith(b"HTTP/1.1 413"), data
    sock.close()
    still_served(server)


def test_bodies_in_flight_share_a_bounded_room(server):
    # 2,000,000 bytes of room: two bodies of 900,000 are read, a third is told to come back.
    held = [connect(server) for _ in range(2)]
    for sock in held:
        sock.sendall(head(b"/a.json", 900_000, ADMIN) + b"x" * 10)
    # Both heads read (a request on another connection answered after them), with time to spare.
    time.sleep(1)
    still_served(server)
    third = connect(server)
    third.sendall(head(b"/a.json", 900_000, ADMIN) + b"x" * 10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += third.recv(4096)
    assert data.startswith(b"HTTP/1.1 503"), data
    assert b"retry-after: 1" in data.lower()
    third.close()
    # A small body still fits, and finishing one of the held bodies frees its room.
    still_served(server)
    held[0].sendall(b"1" * (900_000 - 10))
    assert status_line(held[0]).split()[1] == "400"  # "111…x" is not JSON: judged once whole
    for sock in held:
        sock.close()


def test_a_body_trickled_byte_by_byte_is_dropped_at_its_deadline(server):
    sock = connect(server)
    sock.sendall(head(b"/a.json", 100, ADMIN) + b"1")
    # --http-timeout 2, plus 1 s per 64 KiB of body, checked once a second (generous bound: the
    # machine may be busy; without a deadline a byte every half second would keep it open forever).
    dropped_after = trickle(sock, [b" "] * 60)
    assert dropped_after is not None and dropped_after < 20, dropped_after
    sock.close()
    assert "not received in time" in server.read_log()
    still_served(server)


def test_a_slow_head_is_dropped(server):
    sock = connect(server)
    # --http-timeout 2; the head would take 30 s at this pace. Generous bound: the machine may be busy.
    slow_head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 120
    dropped_after = trickle(sock, [bytes([byte]) for byte in slow_head], pause=0.2)
    assert dropped_after is not None, "a head trickled for 30 s was still being read"
    assert dropped_after < 20, dropped_after
    sock.close()
    still_served(server)


def test_a_head_over_4_kib_is_answered_431_and_closed_without_harm(server):
    # lws 4.1.6 alone dropped such a head without a word; the server's read tap answers it.
    for extra in (20_000, 4_200):
        sock = connect(server)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * extra + b"\r\n\r\n")
        data, closed = read_to_close(sock)
        assert closed
        assert data.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), data[:200]
        assert b"over 4096 bytes" in data and b"HTTP/1.1 200" not in data
        sock.close()
    # A head just under the cap is served as usual, and a head sent in pieces is counted whole.
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3_500 + b"\r\n\r\n")
    assert status_line(sock) == "HTTP/1.1 200 OK"
    sock.close()
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x")
    for _ in range(4):
        time.sleep(0.05)
        sock.sendall(b"\r\nX-Piece: " + b"b" * 1_000)
    sock.sendall(b"\r\nX-Last: " + b"c" * 1_000 + b"\r\n\r\n")
    data, closed = read_to_close(sock)
    assert closed and data.startswith(b"HTTP/1.1 431"), data[:200]
    sock.close()
    still_served(server)
