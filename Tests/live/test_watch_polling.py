"""presence-client watch falls back to REST polling when WebSockets cannot get through: a proxy in front
of the real server passes plain HTTP GETs of *.json and refuses WebSocket upgrades with 403."""
import http.client
import json
import queue
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import CLIENT, PRESENCE_RULES, Server, run_client


class NoWebSocketProxy:
    """Forwards GET /….json to the server; answers WebSocket upgrades (and anything else) with an error."""

    def __init__(self, server):
        self.upgrades = 0
        self.forwarded = []
        self.authorizations = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.headers.get("Upgrade", "").lower() == "websocket":
                    proxy.upgrades += 1
                    self.send_error(403, "WebSockets are not allowed here")
                    return
                if not self.path.split("?", 1)[0].endswith(".json"):
                    self.send_error(404)
                    return
                proxy.forwarded.append(self.path)
                proxy.authorizations.append(self.headers.get("Authorization"))
                upstream = http.client.HTTPConnection(server.host, server.port, timeout=10)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "accept")}
                    upstream.request("GET", self.path, headers=headers)
                    response = upstream.getresponse()
                    body = response.read()
                finally:
                    upstream.close()
                self.send_response(response.status)
                self.send_header("Content-Type", response.getheader("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Lines:
    """A stream of a subprocess read on a thread."""

    def __init__(self, stream):
        self.queue = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def wait_for(self, predicate, timeout, other=None):
        deadline = time.time() + timeout
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise AssertionError(f"no matching line within {timeout}s; saw {self.seen[-15:]}; "
                                     f"other stream {other.seen[-15:] if other else None}")
            try:
                line = self.queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the stream ended; saw {self.seen[-15:]}; other {other.seen[-15:] if other else None}")
            self.seen.append(line)
            if predicate(line):
                return line


def put_presence(server, uid, online):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        body = json.dumps({"online": online, "lastSeen": {".sv": "timestamp"}})
        conn.request("PUT", f"/users/{uid}/presence.json?ns=demo", body=body,
                     headers={"Authorization": "Bearer owner", "Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200, (response.status, response.read())
        response.read()
    finally:
        conn.close()


@pytest.fixture
def server():
    s = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "0")
    yield s
    assert s.alive(), "the server died during the test"
    s.stop()


def test_watch_polls_over_rest_when_websockets_are_refused(server):
    proxy = NoWebSocketProxy(server)
    watch = subprocess.Popen([CLIENT, "watch", "alice", "--uid", "bob", "--server", f"ws://127.0.0.1:{proxy.port}",
                              "--ns", "demo", "--poll-interval", "3"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             bufsize=1)
    try:
        out, err = Lines(watch.stdout), Lines(watch.stderr)
        put_presence(server, "alice", True)
        online = out.wait_for(lambda l: l.startswith("alice") and l.endswith("Online"), 40, other=err)
        assert "●" in online
        err.wait_for(lambda l: "next update in" in l, 40, other=out)
        assert any("polling" in line for line in err.seen), err.seen
        # The polls went through the proxy with the watcher's credential; the WebSocket kept being tried.
        assert "/users/alice/presence.json?ns=demo" in proxy.forwarded, proxy.forwarded
        # The credential is a Bearer header, never in the URL (proxies log URLs).
        assert proxy.authorizations and all(a and a.startswith("Bearer ey") for a in proxy.authorizations), proxy.authorizations
        assert not any("auth=" in p for p in proxy.forwarded)
        assert proxy.upgrades >= 3
        # A later poll shows the change.
        put_presence(server, "alice", False)
        out.wait_for(lambda l: l.startswith("alice") and "Last seen" in l, 40, other=err)
        assert watch.poll() is None, "watch exited"
        assert proxy.upgrades >= 4  # the WebSocket is still tried in the background
    finally:
        watch.kill()
        watch.wait()
        proxy.close()


def test_watch_reports_failed_polls_once_and_keeps_going(server):
    """A credential the REST API refuses: each failed poll is reported once, nothing crashes."""
    proxy = NoWebSocketProxy(server)
    watch = subprocess.Popen([CLIENT, "watch", "alice", "--token", "not.a.jwt", "--server",
                              f"ws://127.0.0.1:{proxy.port}", "--ns", "demo", "--poll-interval", "1"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             bufsize=1)
    try:
        out, err = Lines(watch.stdout), Lines(watch.stderr)
        err.wait_for(lambda l: "failed: HTTP 401" in l, 40, other=out)
        time.sleep(8)  # several more failed polls (retried every second)
        assert watch.poll() is None, err.seen
        assert len([p for p in proxy.forwarded if "presence.json" in p]) >= 3, proxy.forwarded
        while not err.queue.empty():
            line = err.queue.get()
            if line is not None:
                err.seen.append(line)
        assert len([l for l in err.seen if "HTTP 401" in l]) == 1, err.seen
    finally:
        watch.kill()
        watch.wait()
        proxy.close()


def test_watch_exits_2_when_nothing_answers():
    r = run_client([CLIENT, "watch", "alice", "--uid", "bob", "--server", "ws://127.0.0.1:1"], timeout=40)
    assert r.returncode == 2 and "cannot connect" in r.stderr, (r.returncode, r.stderr)
