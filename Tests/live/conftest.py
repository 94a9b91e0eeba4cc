"""Live tests: start the real presence-server binary on a free loopback port and talk to it
over WebSockets, as the official SDKs do."""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import websocket

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER = os.environ.get("PRESENCE_SERVER", os.path.join(ROOT, ".build", "debug", "presence-server"))
PRESENCE_RULES = os.path.join(ROOT, "rules", "presence.rules.json")
# The CLI next to the server unless named (e.g. a sanitizer build: PRESENCE_CLIENT=.build-asan/debug/presence-client).
CLIENT = os.environ.get("PRESENCE_CLIENT", os.path.join(os.path.dirname(SERVER) or ".", "presence-client"))


def exit_text(returncode):
    """A return code as a reader wants it: "exit 5", or "killed by SIGSEGV (returncode -11)"."""
    if returncode is None or returncode >= 0:
        return f"exit {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name} (returncode {returncode})"


def fail_if_signaled(argv, returncode, stdout, stderr):
    """A client that died from a signal is a crash, never an expected outcome: fail with everything
    it printed (a sanitizer's report is on stderr), not just the code a test compared."""
    if returncode is not None and returncode < 0:
        raise AssertionError(f"{' '.join(map(str, argv))}: {exit_text(returncode)}\n"
                             f"--- stderr ---\n{stderr}\n--- stdout ---\n{stdout}")


def run_client(argv, **kwargs):
    """subprocess.run for presence-client (output captured as text), failing on a crash."""
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    fail_if_signaled(argv, result.returncode, result.stdout, result.stderr)
    return result


def unsigned_token(uid, **claims):
    """The token the SDKs' mockUserToken produces: alg none, empty signature."""
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    payload = {"iss": "https://securetoken.google.com/demo-presence", "aud": "demo-presence",
               "iat": 0, "exp": 3600, "auth_time": 0, "sub": uid, "user_id": uid,
               "firebase": {"sign_in_provider": "custom", "identities": {}}}
    payload.update(claims)
    return part({"alg": "none", "type": "JWT"}) + "." + part(payload) + "."


class Server:
    def __init__(self, *args, data_dir=None, preexec_fn=None):
        # Each server gets its own data directory unless the test names one (or memory storage):
        # a cluster node keeps its --cluster-state file there, which must not carry over from
        # another test's Redis.
        storage = args[args.index("--storage") + 1] if "--storage" in args[:-1] else "sqlite"
        if data_dir is None and "--data-dir" not in args and storage != "memory":
            data_dir = tempfile.mkdtemp(prefix="presence-test-")
        self.data_dir = data_dir
        extra = ["--data-dir", data_dir] if data_dir and "--data-dir" not in args else []
        self.args = [SERVER, "--port", "0", *extra, *args]
        # The log goes to a file: a pipe nobody reads would fill up and stall the server.
        self.log = tempfile.NamedTemporaryFile(prefix="presence-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     preexec_fn=preexec_fn)
        line = self.proc.stdout.readline()
        match = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not match:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"server did not start: {line!r} {self.read_log()}")
        self.host, self.port = match.group(1), int(match.group(2))

    def url(self, ns="demo", **params):
        query = "&".join([f"v=5"] + [f"{k}={v}" for k, v in params.items()] + [f"ns={ns}"])
        return f"ws://{self.host}:{self.port}/.ws?{query}"

    def client(self, ns="demo", **params):
        return Client(self.url(ns, **params))

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        """SIGKILL: a crash, with no chance to say goodbye or store anything more."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr = self.read_log()
        return self.proc.returncode

    def read_log(self):
        """The server's stderr so far, read through our own handle: it survives the file being
        unlinked by a /tmp clean-up while the test runs."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


class Client:
    """A v5 client driven by hand: send requests, read messages, assert on them."""

    def __init__(self, url, timeout=5):
        self.ws = websocket.create_connection(url, timeout=timeout)
        self.next_r = 1
        self.pending = []  # messages read but not yet consumed
        hello = self.recv()
        assert hello["t"] == "c" and hello["d"]["t"] == "h", hello
        self.hello = hello["d"]["d"]
        self.session = self.hello["s"]

    def send(self, message):
        self.ws.send(json.dumps(message))

    def request(self, action, body):
        r = self.next_r
        self.next_r += 1
        self.send({"t": "d", "d": {"r": r, "a": action, "b": body}})
        return r

    def recv(self, timeout=5):
        if self.pending:
            return self.pending.pop(0)
        self.ws.settimeout(timeout)
        text = self.ws.recv()
        if re.fullmatch(r"\d{1,6}", text):  # a count-prefixed multi-frame message
            text = "".join(self.ws.recv() for _ in range(int(text)))
        return json.loads(text)

    def wait_for(self, predicate, timeout=5):
        """Reads until a message matches; keeps the others for later reads."""
        deadline = time.time() + timeout
        skipped = []
        try:
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise AssertionError(f"no matching message within {timeout}s; saw {skipped}")
                try:
                    message = self.recv(timeout=remaining)
                except websocket.WebSocketTimeoutException:
                    raise AssertionError(f"no matching message within {timeout}s; saw {skipped}")
                if predicate(message):
                    return message
                skipped.append(message)
        finally:
            self.pending = skipped + self.pending

    def reply(self, r, timeout=5):
        return self.wait_for(lambda m: m.get("t") == "d" and m["d"].get("r") == r, timeout)["d"]["b"]

    def push(self, path, timeout=5):
        return self.wait_for(lambda m: m.get("t") == "d" and m["d"].get("a") == "d" and m["d"]["b"]["p"] == path,
                             timeout)["d"]["b"]["d"]

    def call(self, action, body, timeout=5):
        return self.reply(self.request(action, body), timeout)

    def auth(self, uid):
        reply = self.call("auth", {"cred": unsigned_token(uid)})
        assert reply["s"] == "ok", reply
        return reply

    def listen(self, path):
        r = self.request("q", {"p": path, "h": ""})
        value = self.push(path.strip("/"))
        assert self.reply(r) == {"s": "ok", "d": {}}
        return value

    def close(self):
        self.ws.close()

    def drop(self):
        """Abrupt loss: the TCP socket goes away with no WebSocket close frame."""
        self.ws.sock.shutdown(socket.SHUT_RDWR)
        self.ws.sock.close()


@pytest.fixture
def presence_server():
    """Firebase's own behaviour: onDisconnect ops run the moment a connection ends."""
    server = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "0")
    yield server
    assert server.alive(), "the server died during the test"
    server.stop()


@pytest.fixture
def open_server():
    server = Server("--rules", "open", "--disconnect-grace", "0")
    yield server
    assert server.alive(), "the server died during the test"
    server.stop()
