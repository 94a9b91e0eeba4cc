"""Past saturation the server sheds writes (issue 17): it answers a share of data writes at once
with `unavailable` (REST 503 + Retry-After) instead of queueing them, the heaviest writers first.
A refused write changes nothing; every accepted one is stored, acknowledged and pushed in order;
a quiet writer, onDisconnect registrations and the onDisconnect write of a dropped socket go on;
and shedding stops when the flood does. The saturation here is cheap: --shed-busy-percent 50 with
--shed-read-delay-ms 10 is crossed by a steady flood of a debug build; the real one is a benchmark
(docs/performance.md)."""
import json
import re
import threading
import time

import requests

from conftest import Server
from wsraw import TEXT, Reader, frame, request, upgrade

OVERLOADED = "server overloaded, retry later"


def metric(server, name):
    text = requests.get(f"http://{server.host}:{server.port}/metrics", timeout=5).text
    match = re.search(rf"^{name} (\d+(?:\.\d+)?)$", text, re.M)
    return float(match.group(1)) if match else 0.0


class Replies(threading.Thread):
    """Reads a raw connection's frames: replies by request number, pushes in order."""

    def __init__(self, reader):
        super().__init__(daemon=True)
        self.reader = reader
        self.replies = []  # (r, status, data) in arrival order
        self.pushes = []   # (path, data) in arrival order
        self.stop = False

    def run(self):
        while not self.stop:
            got = self.reader.next(timeout=0.5)
            if got is None:
                if self.reader.closed:
                    return
                continue
            if got[0] != TEXT:
                continue
            message = json.loads(got[1])
            body = message.get("d", {})
            if "r" in body:
                self.replies.append((body["r"], body["b"]["s"], body["b"].get("d")))
            elif body.get("a") == "d":
                self.pushes.append((body["b"]["p"], body["b"]["d"]))


def stored_keys(value):
    """The integer keys of a stored object (or of an array, which is how integer keys may come back)."""
    if value is None:
        return []
    if isinstance(value, list):
        return sorted(i for i, v in enumerate(value) if v is not None)
    return sorted(int(key) for key in value)


def connect(server):
    sock, pending = upgrade(server.host, server.port)
    reader = Reader(sock, pending)
    reader.next()  # hello
    return sock, reader


def test_a_flood_is_shed_fairly_nothing_refused_is_stored_and_the_server_recovers():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--max-messages-per-second", "0",
                    "--shed-busy-percent", "50", "--shed-read-delay-ms", "10")
    base = f"http://{server.host}:{server.port}"
    try:
        # A watcher of everything the flood writes, read as fast as it comes.
        watch_sock, watch_reader = connect(server)
        watch_sock.sendall(frame(TEXT, request(1, "q", {"p": "/flood", "h": ""})))
        watcher = Replies(watch_reader)
        watcher.start()
        deadline = time.time() + 10
        while not any(r == 1 for r, _, _ in watcher.replies):
            assert time.time() < deadline, "the watcher's listen was not answered"
            time.sleep(0.05)

        # The flood: one connection writing as fast as the socket takes it (open loop), until
        # shedding has begun and the other clients below are done.
        flood_sock, flood_reader = connect(server)
        flood = Replies(flood_reader)
        flood.start()
        sent = 0
        flooding = True

        # Its own socket object for sending: the reader thread sets short timeouts on the other.
        flood_out = flood_sock.dup()
        flood_out.settimeout(60)

        def write_flood():
            nonlocal sent
            while flooding:
                flood_out.sendall(b"".join(frame(TEXT, request(r, "p", {"p": f"/flood/{r}", "d": r}))
                                            for r in range(sent + 1, sent + 201)))
                sent += 200

        flooder = threading.Thread(target=write_flood)
        flooder.start()

        deadline = time.time() + 30
        while metric(server, "presence_writes_shed_total") == 0:
            assert time.time() < deadline, f"{sent} writes sent in 30 s and none shed"
            time.sleep(0.1)
        # Meanwhile: a quiet writer, an onDisconnect registration and a socket that drops, and REST writes.
        quiet = server.client()
        for i in range(5):
            assert quiet.call("p", {"p": f"/quiet/{i}", "d": i}, timeout=20)["s"] == "ok", "a quiet writer was refused"
            time.sleep(0.2)
        leaving = server.client()
        assert leaving.call("o", {"p": "/status/leaving", "d": "offline"}, timeout=20)["s"] == "ok"
        assert leaving.call("p", {"p": "/status/leaving", "d": "online"}, timeout=20)["s"] == "ok"
        leaving.drop()
        rest = requests.Session()
        rest_statuses = {}
        for i in range(20):
            response = rest.put(f"{base}/rest/{i}.json?ns=demo", data=json.dumps(i), timeout=20)
            assert response.status_code in (200, 503), response.text
            if response.status_code == 503:
                assert response.headers.get("Retry-After") == "1" and OVERLOADED in response.text
            rest_statuses[i] = response.status_code
        flooding = False
        flooder.join(timeout=60)
        deadline = time.time() + 60
        while len(flood.replies) < sent:
            assert time.time() < deadline, f"only {len(flood.replies)} of {sent} writes answered"
            time.sleep(0.1)
        statuses = {status for _, status, _ in flood.replies}
        assert statuses <= {"ok", "unavailable"}, statuses
        refused = [r for r, status, _ in flood.replies if status == "unavailable"]
        accepted = [r for r, status, _ in flood.replies if status == "ok"]
        assert refused, f"nothing of {sent} writes was shed"
        assert accepted, "every write was shed"
        assert all(data == OVERLOADED for _, status, data in flood.replies if status == "unavailable")
        assert accepted == sorted(accepted), "acknowledgements in order"
        assert sorted(accepted + refused) == list(range(1, sent + 1)), "every write answered once"
        assert metric(server, "presence_writes_shed_total") >= len(refused)
        print(f"{sent} writes: {len(accepted)} accepted, {len(refused)} refused")

        # Every acknowledged write was pushed to the watcher, in order; nothing refused was.
        deadline = time.time() + 30
        def flood_pushes():
            return [data for path, data in watcher.pushes if path.startswith("flood/")]
        while len(flood_pushes()) < len(accepted):
            assert time.time() < deadline, f"the watcher got {len(flood_pushes())} of {len(accepted)} acked writes"
            time.sleep(0.1)
        time.sleep(0.3)
        assert flood_pushes() == accepted
        # Stored: exactly the acknowledged writes.
        stored = requests.get(f"{base}/flood.json?ns=demo", timeout=30).json()
        assert stored_keys(stored) == accepted
        rest_stored = requests.get(f"{base}/rest.json?ns=demo", timeout=10).json()
        assert stored_keys(rest_stored) == sorted(i for i, code in rest_statuses.items() if code == 200)
        assert stored_keys(requests.get(f"{base}/quiet.json?ns=demo", timeout=10).json()) == [0, 1, 2, 3, 4]
        # The dropped socket's onDisconnect write ran.
        deadline = time.time() + 10
        while requests.get(f"{base}/status/leaving.json?ns=demo", timeout=10).json() != "offline":
            assert time.time() < deadline, "the onDisconnect write did not run"
            time.sleep(0.1)

        # The flood is over: shedding stops (logged once each way), and writes are accepted again.
        deadline = time.time() + 15
        while metric(server, "presence_write_shedding") != 0:
            assert time.time() < deadline, "shedding did not stop after the flood"
            time.sleep(0.1)
        log = server.read_log()
        starts, stops = log.count("refusing a share of data writes"), log.count("write shedding stopped")
        assert 1 <= starts <= 20 and stops == starts, log[-3000:]
        assert log.count(OVERLOADED) == 0, "not one log line per refused write"
        before = len(flood.replies)
        for r in range(sent + 1, sent + 51):
            flood_out.sendall(frame(TEXT, request(r, "p", {"p": f"/after/{r}", "d": r})))
            time.sleep(0.01)
        deadline = time.time() + 20
        while len(flood.replies) < before + 50:
            assert time.time() < deadline, "writes after the flood were not answered"
            time.sleep(0.05)
        assert {status for _, status, _ in flood.replies[before:]} == {"ok"}, "writes refused after the flood"
        flood.stop = watcher.stop = True
        flood.join(timeout=5)
        watcher.join(timeout=5)
        flood_out.close()
        flood_sock.close()
        watch_sock.close()
        assert server.alive()
    finally:
        server.stop()


def test_with_shedding_off_the_same_flood_is_never_refused():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--max-messages-per-second", "0", "--storage", "memory",
                    "--shed-busy-percent", "0", "--shed-pending-writes", "0")
    try:
        sock, reader = connect(server)
        replies = Replies(reader)
        replies.start()
        count = 3_000
        sock.sendall(b"".join(frame(TEXT, request(r, "p", {"p": f"/flood/{r}", "d": r})) for r in range(1, count + 1)))
        deadline = time.time() + 60
        while len(replies.replies) < count:
            assert time.time() < deadline, f"only {len(replies.replies)} answered"
            time.sleep(0.1)
        assert {status for _, status, _ in replies.replies} == {"ok"}
        assert metric(server, "presence_writes_shed_total") == 0
        replies.stop = True
        replies.join(timeout=5)
        sock.close()
    finally:
        server.stop()
