"""Big REST reads answered in slices (issue 16): a `GET` (and a stream's first event) whose answer
passes --slice-reads-over is computed and serialized a slice at a time between other clients'
messages, then written a piece at a time; the read budget answers 413 with what to do instead;
a client that leaves mid-read costs nothing more."""
import json
import os
import select
import socket
import tempfile
import time

import requests

from conftest import Server, unsigned_token
from test_sliced_reads import preload

OWNER = {"Authorization": "Bearer owner"}
EXTRA = []


def expected(count):
    return {f"k{i:06d}": {"name": f"user {i}", "score": i % 97} for i in range(count)}


def raw_get(server, path, accept=None):
    """Sends a GET on a raw socket (nothing read yet): the socket."""
    sock = socket.create_connection((server.host, server.port), timeout=120)
    extra = f"Accept: {accept}\r\n" if accept else ""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer owner\r\n{extra}\r\n".encode())
    return sock


class RawStream:
    """An event stream on a raw socket, with what it has received so far."""

    def __init__(self, sock):
        self.sock, self.pending = sock, b""


def stream_events(stream, count, wait):
    """The first `count` events of a raw event stream, keep-alives aside (fewer if `wait` seconds
    pass first; 0: only what has arrived): [(name, data)]."""
    deadline = time.time() + wait
    while True:
        _, _, body = stream.pending.partition(b"\r\n\r\n")
        text = bytearray()
        while body:  # the chunks received whole (the stream is chunked)
            size_line, found, rest = body.partition(b"\r\n")
            if not found or len(rest) < int(size_line, 16) + 2:
                break
            text += rest[:int(size_line, 16)]
            body = rest[int(size_line, 16) + 2:]
        events = [(lines[0][len("event: "):], lines[1][len("data: "):]) for lines in
                  (block.split("\n") for block in text.decode().split("\n\n")[:-1]) if lines[0].startswith("event: ") and lines[0] != "event: keep-alive"]
        if len(events) >= count or time.time() >= deadline and not select.select([stream.sock], [], [], 0)[0]:
            return events[:count]
        if select.select([stream.sock], [], [], max(0, min(1, deadline - time.time())))[0]:
            chunk = stream.sock.recv(1 << 20)
            assert chunk, "the stream ended"
            stream.pending += chunk


def read_response(sock):
    """The whole response on `sock` (the server closes after it): status, headers, body."""
    data = bytearray()
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(lines[0].split()[1]), headers, body


def dechunk(body):
    out = bytearray()
    while True:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return bytes(out)
        out += rest[:size]
        body = rest[size + 2:]


def test_a_big_get_and_a_streams_first_event_come_whole_while_a_bystander_keeps_writing():
    # 100,000 children (3.7 MB of JSON; the 300,000 take three times as long to load and read
    # here, for the same finding).
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0", *EXTRA)
    try:
        preload(server, "/big", 100_000)
        writer, watcher = server.client(), server.client()
        assert watcher.listen("/big/k000001/score") == 1
        sock = raw_get(server, "/big.json?ns=demo")
        stream = RawStream(raw_get(server, "/big.json?ns=demo", accept="text/event-stream"))
        time.sleep(0.2)  # the server has both requests: their answers are of the data as it was then
        # Answered at once, each read held the loop until its whole answer was written: the readers
        # had their answers before the writer's first ack. In slices, the bystander's writes are
        # acknowledged and pushed between slices while nothing of either answer has been sent.
        for value in range(5):
            assert writer.call("p", {"p": "/big/k000001/score", "d": 1000 + value}, timeout=30)["s"] == "ok"
            assert watcher.push("big/k000001/score") == 1000 + value
        assert not select.select([sock], [], [], 0)[0], "the big answer was sent before the bystander was served"
        stream_events(stream, 1, wait=0)  # what has come so far
        assert b"event: put" not in stream.pending, "the stream's first event was sent before the bystander was served"
        status, headers, body = read_response(sock)
        assert status == 200 and headers["content-length"] == str(len(body)), headers
        assert json.loads(body) == expected(100_000)
        # The stream's first event is the data it opened on; the writes made meanwhile follow, in order.
        events = stream_events(stream, 6, wait=120)
        assert [name for name, _ in events] == ["put"] * 6, [name for name, _ in events]
        assert json.loads(events[0][1]) == {"path": "/", "data": expected(100_000)}
        assert [json.loads(data) for _, data in events[1:]] == [{"path": "/k000001/score", "data": 1000 + v} for v in range(5)]
        stream.sock.close()
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_shallow_queries_pretty_and_export_answers_in_slices_equal_the_data():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)  # about 0.7 MB as JSON: over the 64 KiB threshold
        base = f"http://{server.host}:{server.port}/big.json"
        assert requests.put(f"http://{server.host}:{server.port}/big/k000007/.priority.json", params={"ns": "demo"},
                            json=5, headers=OWNER, timeout=10).status_code == 200

        def get(**params):
            response = requests.get(base, params={"ns": "demo", **params}, headers=OWNER, timeout=60)
            assert response.status_code == 200, response.text
            return response

        data = expected(20_000)
        assert get().json() == data
        assert get(shallow="true").json() == {key: True for key in data}
        window = get(orderBy='"score"', limitToLast="3").json()
        last = sorted((i % 97, f"k{i:06d}") for i in range(20_000))[-3:]
        assert window == {key: data[key] for _, key in last}, window
        pretty = get(print="pretty")
        assert pretty.json() == data and pretty.headers.get("transfer-encoding") == "chunked"
        assert '{\n  "k' in pretty.text and '": {\n    "name": "user ' in pretty.text, pretty.text[:200]
        exported = get(format="export").json()
        assert exported["k000007"] == {**data["k000007"], ".priority": 5}
        assert {key: value for key, value in exported.items() if key != "k000007"} == {k: v for k, v in data.items() if k != "k000007"}
        # The ETag is a hash of the whole value, made at once: 0.7 MB is past --max-hash-bytes, so
        # such a read is refused, saying why (test_engine_limits.py has one within the budget).
        tagged = requests.get(base, params={"ns": "demo"}, headers={**OWNER, "X-Firebase-ETag": "true"}, timeout=60)
        assert tagged.status_code == 413 and "--max-hash-bytes" in tagged.json()["error"] and not tagged.headers.get("ETag"), tagged.text
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_a_big_get_over_the_budget_is_refused_413_with_what_to_do():
    server = Server("--rules", "open", "--storage", "memory", "--max-read-bytes", "1000000")
    try:
        preload(server, "/big", 40_000)  # about 1.3 MB of JSON
        base = f"http://{server.host}:{server.port}/big.json"
        refused = requests.get(base, params={"ns": "demo"}, headers=OWNER, timeout=60)
        assert refused.status_code == 413, refused.text
        message = refused.json()["error"]
        assert "--max-read-bytes" in message and "shallow=true" in message and "limitToLast" in message, message
        assert requests.get(base, params={"ns": "demo", "shallow": "true"}, headers=OWNER, timeout=60).status_code == 200
        window = requests.get(base, params={"ns": "demo", "orderBy": '"$key"', "limitToFirst": "2"}, headers=OWNER, timeout=60)
        assert window.json() == {"k000000": {"name": "user 0", "score": 0}, "k000001": {"name": "user 1", "score": 1}}
        stream = requests.get(base, params={"ns": "demo"}, headers={**OWNER, "Accept": "text/event-stream"}, timeout=60)
        assert stream.status_code == 413 and "--max-read-bytes" in stream.json()["error"], stream.text
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_a_streams_big_first_event_comes_whole_and_its_later_events_follow_in_order():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)
        stream = RawStream(raw_get(server, "/big.json?ns=demo", accept="text/event-stream"))
        writer = server.client()
        for value in range(3):
            assert writer.call("p", {"p": "/big/k000001/score", "d": 1000 + value}, timeout=30)["s"] == "ok"
        events = stream_events(stream, 4, wait=60)
        assert [name for name, _ in events] == ["put"] * 4, [name for name, _ in events]
        first = json.loads(events[0][1])
        assert first == {"path": "/", "data": expected(20_000)}
        assert [json.loads(data) for _, data in events[1:]] == [{"path": "/k000001/score", "data": 1000 + v} for v in range(3)]
        stream.sock.close()
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_clients_that_leave_mid_read_free_it_and_others_are_answered():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 100_000)
        # Eight readers leave while their answers are being made (more than the 4 built at once),
        # two more once part of their body has come.
        for sock in [raw_get(server, "/big.json?ns=demo") for _ in range(8)]:
            sock.close()
        for _ in range(2):
            sock = raw_get(server, "/big.json?ns=demo")
            assert sock.recv(65536)
            sock.close()
        status, _, body = read_response(raw_get(server, "/big.json?ns=demo"))
        assert status == 200 and json.loads(body) == expected(100_000)
        client = server.client()
        assert client.call("p", {"p": "/x", "d": 1}, timeout=30)["s"] == "ok"
    finally:
        assert server.alive(), "the server died"
        server.stop()
    assert server.stderr.count("left during a big read") >= 8, "each reader that left mid-read is dropped with its slices"


def test_big_reads_at_a_limited_location_count_one_use_each_once_answered():
    """At a location a limits file guards, a big `g` or REST `GET` is made in slices too, and its
    use is counted once its text is known to fit: the third of a limit of 2 is refused."""
    path = tempfile.NamedTemporaryFile(prefix="limits-", suffix=".json", delete=False).name
    with open(path, "w") as f:
        json.dump({"limits": {"readBig": {"location": "big", "tiers": [
            {"name": "free", "when": "auth != null", "limit": 2, "cooldownSeconds": 120}]}}}, f)
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0", "--limits", path)
    try:
        preload(server, "/big", 5_000)  # about 180 KB of JSON: over the 64 KiB threshold
        alice = server.client()
        assert alice.call("auth", {"cred": unsigned_token("alice")})["s"] == "ok"
        replies = [alice.call("g", {"p": "/big", "q": {}}, timeout=30) for _ in range(3)]
        assert [reply["s"] for reply in replies] == ["ok", "ok", "rate_limited"], [reply["s"] for reply in replies]
        assert replies[0]["d"] == expected(5_000)
        base = f"http://{server.host}:{server.port}/big.json"
        params = {"ns": "demo", "auth": unsigned_token("bob")}
        answers = [requests.get(base, params=params, timeout=30) for _ in range(3)]
        assert [answer.status_code for answer in answers] == [200, 200, 429], [answer.text[:200] for answer in answers]
        assert answers[0].json() == expected(5_000)
        assert answers[2].headers["Retry-After"] in ("120", "119") and "try again in" in answers[2].json()["error"]
    finally:
        assert server.alive(), "the server died"
        server.stop()
        os.unlink(path)


def test_a_big_event_written_at_once_is_flushed_without_waiting_for_the_keep_alive():
    # Slicing off, the first event (3.7 MB) is written at once; lws keeps what the socket does not
    # take, and the stream must stay polled until it is flushed (it waited for the next keep-alive).
    server = Server("--rules", "open", "--storage", "memory", "--slice-reads-over", "0", "--stream-keep-alive", "120")
    try:
        preload(server, "/big", 100_000)
        stream = RawStream(raw_get(server, "/big.json?ns=demo", accept="text/event-stream"))
        events = stream_events(stream, 1, wait=60)
        assert events and json.loads(events[0][1]) == {"path": "/", "data": expected(100_000)}, "the first event did not come"
        stream.sock.close()
    finally:
        assert server.alive(), "the server died"
        server.stop()
