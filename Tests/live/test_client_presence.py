"""presence-client against the real server: simulate (the app lifecycle) and watch (the app's UI),
two processes at a time, asserting on their --json output."""
import json
import queue
import subprocess
import threading
import time

import pytest

from conftest import CLIENT, PRESENCE_RULES, Server, exit_text, fail_if_signaled


class Proc:
    """A presence-client process whose stdout JSON lines are read on a thread."""

    def __init__(self, *args, stdin=False):
        self.args = [CLIENT, *args]
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.seen = []
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                try:
                    self.lines.put(json.loads(line))
                except ValueError:
                    self.lines.put({"raw": line})
        self.lines.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_for(self, predicate, timeout):
        """The first new line matching predicate; the lines read meanwhile stay in self.seen."""
        deadline = time.time() + timeout
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise AssertionError(f"no matching line within {timeout}s from {self.args[1]}; saw {self.seen[-15:]}; "
                                     f"stderr {''.join(self.stderr)[-800:]}")
            try:
                item = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if item is None:
                code = self.proc.wait()
                fail_if_signaled(self.args, code, self.seen, self.stderr_text())
                raise AssertionError(f"{self.args[1]} exited ({exit_text(code)}); saw {self.seen[-15:]}; "
                                     f"stderr {self.stderr_text()[-800:]}")
            self.seen.append(item)
            if predicate(item):
                return item

    def drain(self, seconds):
        """Everything printed within the next `seconds`."""
        got = []
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                item = self.lines.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                continue
            if item is None:
                break
            self.seen.append(item)
            got.append(item)
        return got

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stderr_text(self):
        return "".join(self.stderr)

    def wait(self, timeout):
        """The exit code; a crash fails with the whole stderr."""
        code = self.proc.wait(timeout=timeout)
        fail_if_signaled(self.args, code, self.seen, self.stderr_text())
        return code

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def procs():
    started = []

    def start(*args, stdin=False):
        p = Proc(*args, stdin=stdin)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def server_url(server):
    return f"ws://{server.host}:{server.port}"


def watch(start, server, *users):
    w = start("watch", *users, "--uid", "watcher", "--json", "--server", server_url(server), "--ns", "demo")
    return w


def simulate(start, server, uid="alice", *extra):
    return start("simulate", "--uid", uid, "--json", "--server", server_url(server), "--ns", "demo", *extra, stdin=True)


def online(uid, value=True):
    return lambda row: row.get("uid") == uid and row.get("online") is value


def test_watch_sees_alice_online_after_foreground(presence_server, procs):
    w = watch(procs, presence_server, "alice")
    sim = simulate(procs, presence_server)
    sim.wait_for(lambda e: e.get("event") == "connection" and e.get("state") == "connected", 5)
    sim.send("foreground")
    write = sim.wait_for(lambda e: e.get("event") == "write", 6)
    assert write["online"] is True and write["value"] == {"online": True, "lastSeen": {".sv": "timestamp"}}
    # The onDisconnect registration went out first, and both were acknowledged.
    assert any(e.get("event") == "ondisconnect" for e in sim.seen)
    sim.wait_for(lambda e: e.get("event") == "ack" and e.get("id") == write["id"] and e.get("status") == "ok", 5)
    row = w.wait_for(online("alice"), 5)
    assert row["status"] == "Online" and isinstance(row["lastSeen"], (int, float))


def test_background_then_foreground_within_the_window_writes_nothing(presence_server, procs):
    w = watch(procs, presence_server, "alice")
    sim = simulate(procs, presence_server)
    sim.send("foreground")
    w.wait_for(online("alice"), 8)
    sim.send("background")
    time.sleep(1)
    sim.send("foreground")
    later = w.drain(4.5)  # past the 3 s window of the background
    assert not [row for row in later if row.get("uid") == "alice" and row.get("online") is False], later
    writes = [e for e in (sim.drain(0.2), sim.seen)[1] if e.get("event") == "write"]
    assert len(writes) == 1, writes  # only the first online write
    # A background that stands for the window is written.
    sim.send("background")
    row = w.wait_for(online("alice", False), 6)
    assert row["status"].startswith("Last seen")


def test_kill_is_shown_offline_with_lastseen_at_the_kill(presence_server, procs):
    w = watch(procs, presence_server, "alice")
    sim = simulate(procs, presence_server, "alice", "--debounce", "0")
    sim.send("foreground")
    w.wait_for(online("alice"), 5)
    time.sleep(0.5)
    killed_at = time.time() * 1000
    sim.send("kill")
    assert sim.wait(timeout=5) == 0
    row = w.wait_for(online("alice", False), 5)
    assert abs(row["lastSeen"] - killed_at) < 1500, (row, killed_at)
    assert row["status"] == "Last seen just now"


def test_network_off_is_detected_by_liveness_and_network_on_reconnects(procs):
    server = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "0", "--ping-interval", "1", "--idle-timeout", "3")
    try:
        w = watch(procs, server, "alice")
        sim = simulate(procs, server, "alice", "--debounce", "0")
        first = sim.wait_for(lambda e: e.get("state") == "connected", 5)["session"]
        sim.send("foreground")
        w.wait_for(online("alice"), 5)
        off_at = time.time()
        sim.send("network-off")
        row = w.wait_for(online("alice", False), 8)
        assert 2 <= time.time() - off_at <= 7.5  # the server's idle timeout, not a close from the client
        sim.send("network-on")
        back = sim.wait_for(lambda e: e.get("state") == "connected", 8)
        assert back["session"] != first
        w.wait_for(online("alice"), 5)
        assert row["lastSeen"] <= time.time() * 1000
        assert server.alive()
    finally:
        server.stop()


def test_terminate_writes_offline_and_closes_cleanly(presence_server, procs):
    w = watch(procs, presence_server, "alice")
    sim = simulate(procs, presence_server, "alice", "--debounce", "0")
    sim.send("foreground")
    w.wait_for(online("alice"), 5)
    sim.send("terminate")
    write = sim.wait_for(lambda e: e.get("event") == "write" and e.get("online") is False, 5)
    sim.wait_for(lambda e: e.get("event") == "ack" and e.get("id") == write["id"], 5)
    assert sim.wait(timeout=5) == 0
    w.wait_for(online("alice", False), 5)


def test_script_file_drives_the_lifecycle(presence_server, procs, tmp_path):
    script = tmp_path / "day.txt"
    script.write_text("# quick day\nforeground\n+1.5s background\n+2s quit\n")
    w = watch(procs, presence_server, "alice")
    sim = simulate(procs, presence_server, "alice", "--debounce", "500ms", "--script", str(script))
    w.wait_for(online("alice"), 5)
    w.wait_for(online("alice", False), 5)
    assert sim.wait(timeout=8) == 0
    commands = [e["command"] for e in (sim.drain(0.2), sim.seen)[1] if e.get("event") == "lifecycle"]
    assert commands == ["foreground", "background", "quit"]
