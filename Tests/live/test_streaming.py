"""REST streaming (protocol doc 9.4): put first, then put/patch, keep-alive, cancel, auth_revoked."""
import json
import threading
import time

import requests

from conftest import Server

OWNER = {"Authorization": "Bearer owner"}


class Stream:
    """Reads Server-Sent Events on a thread; `events` fills as they arrive."""

    def __init__(self, url, params, headers=None):
        self.response = requests.get(url, params=params, stream=True, timeout=10,
                                     headers={"Accept": "text/event-stream", **(headers or {})})
        self.events = []
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        name = None
        try:
            for line in self.response.iter_lines(decode_unicode=True):
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    self.events.append((name, line[len("data: "):]))
        except Exception:
            pass
        self.ended.set()

    def wait(self, count, timeout=5):
        deadline = time.time() + timeout
        while len(self.events) < count and time.time() < deadline:
            time.sleep(0.02)
        return self.events[:count]

    def close(self):
        self.response.close()


def test_stream_sends_the_value_then_changes_and_keep_alives():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--stream-keep-alive", "1")
    base = f"http://{server.host}:{server.port}"
    try:
        requests.put(f"{base}/room.json", params={"ns": "demo"}, data=json.dumps({"a": 1}), timeout=5)
        stream = Stream(f"{base}/room.json", {"ns": "demo"})
        first = stream.wait(1)
        assert first[0][0] == "put" and json.loads(first[0][1]) == {"path": "/", "data": {"a": 1}}
        requests.put(f"{base}/room/b.json", params={"ns": "demo"}, data='"x"', timeout=5)
        requests.patch(f"{base}/room/c.json", params={"ns": "demo"}, data=json.dumps({"d": 1, "e": 2}), timeout=5)
        requests.post(f"{base}/room.json", params={"ns": "demo"}, data='""', timeout=5)
        events = stream.wait(6, timeout=4)
        kinds = [name for name, _ in events]
        assert ("put", json.dumps({"path": "/b", "data": "x"}, separators=(",", ":"))) in events
        assert {"path": "/c", "data": {"d": 1, "e": 2}} in [json.loads(d) for n, d in events if n == "patch"]
        pushed = [json.loads(d) for n, d in events if n == "put"][-1]
        assert pushed["path"].startswith("/") and len(pushed["path"]) == 21 and pushed["data"] == ""
        assert "keep-alive" in kinds and all("\n" not in data for _, data in events)
        stream.close()
    finally:
        assert server.alive()
        server.stop()


def test_stream_is_cancelled_when_the_rules_stop_allowing_the_read(open_server):
    base = f"http://{open_server.host}:{open_server.port}"
    stream = Stream(f"{base}/secret.json", {"ns": "demo"})
    assert stream.wait(1)[0][0] == "put"
    rules = json.dumps({"rules": {".write": True}})
    assert requests.put(f"{base}/.settings/rules.json", params={"ns": "demo"}, headers=OWNER, data=rules, timeout=5).status_code == 200
    events = stream.wait(2)
    assert events[1][0] == "cancel"
    assert stream.ended.wait(5), "the stream stays open after cancel"


def test_stream_without_permission_is_refused(presence_server):
    base = f"http://{presence_server.host}:{presence_server.port}"
    response = requests.get(f"{base}/users/alice/presence.json", params={"ns": "demo"},
                            headers={"Accept": "text/event-stream"}, timeout=5)
    assert response.status_code == 401 and response.json() == {"error": "Permission denied"}


def test_many_streams_at_once_all_receive_writes_and_websockets_keep_working(open_server):
    base = f"http://{open_server.host}:{open_server.port}"
    streams = [Stream(f"{base}/hub.json", {"ns": "demo"}) for _ in range(50)]
    for stream in streams:
        assert stream.wait(1)[0][0] == "put"
    writer = open_server.client()
    watcher = open_server.client()
    assert watcher.listen("/hub") is None
    for i in range(20):
        assert writer.call("p", {"p": f"/hub/k{i}", "d": i})["s"] == "ok"
    assert watcher.push("hub/k19") == 19
    for stream in streams:
        events = stream.wait(21)
        assert len(events) == 21 and json.loads(events[-1][1]) == {"path": "/k19", "data": 19}
    # (No per-stream close here: a requests response closes slowly while its reader thread is
    # blocked; the server's stop at teardown ends them all.)


def test_streams_of_one_location_share_an_event_and_each_location_gets_its_own(open_server):
    # The server makes a message's event once per location and shares its bytes between the
    # streams there: each location must still get its own path, and each message its own event.
    base = f"http://{open_server.host}:{open_server.port}"
    locations = ["hub", "hub/k1", "hub", "hub/k1"]
    streams = [Stream(f"{base}/{location}.json", {"ns": "demo"}) for location in locations]
    for stream in streams:
        assert stream.wait(1)[0][0] == "put"
    writer = open_server.client()
    for value in (5, 6):
        assert writer.call("p", {"p": "/hub/k1", "d": value})["s"] == "ok"
    for location, stream in zip(locations, streams):
        events = [json.loads(data) for _, data in stream.wait(3)[1:]]
        path = "/k1" if location == "hub" else "/"
        assert events == [{"path": path, "data": 5}, {"path": path, "data": 6}], (location, events)
