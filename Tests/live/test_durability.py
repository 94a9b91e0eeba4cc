"""Durable storage and no ghosts: restarts keep everything, and after a crash the sessions of the
previous run are held for the grace window, cancelled for clients that come back, and run for the
others with lastSeen no later than the crash."""
import json
import subprocess
import tempfile
import time

import requests
import websocket

from conftest import PRESENCE_RULES, SERVER, Client, Server, unsigned_token

OWNER = {"Authorization": "Bearer owner"}
OFFLINE = {"online": False, "lastSeen": {".sv": "timestamp"}}
ONLINE = {"online": True, "lastSeen": {".sv": "timestamp"}}


def rest(server, method, path, **kwargs):
    return requests.request(method, f"http://{server.host}:{server.port}{path}.json", params={"ns": "demo"},
                            headers=OWNER, timeout=10, **kwargs)


class FastClient:
    """A bare presence client: auth, onDisconnect, online — without waiting per step."""

    def __init__(self, server, uid, ls=None):
        query = f"v=5&ns=demo" + (f"&ls={ls}" if ls else "")
        self.ws = websocket.create_connection(f"ws://{server.host}:{server.port}/.ws?{query}", timeout=10)
        self.session = json.loads(self.ws.recv())["d"]["d"]["s"]
        self.uid = uid
        path = f"/users/{uid}/presence"
        for r, action, body in [(1, "auth", {"cred": unsigned_token(uid)}), (2, "o", {"p": path, "d": OFFLINE}),
                                (3, "p", {"p": path, "d": ONLINE})]:
            self.ws.send(json.dumps({"t": "d", "d": {"r": r, "a": action, "b": body}}))

    def wait_acked(self):
        while True:
            message = json.loads(self.ws.recv())
            if message.get("d", {}).get("r") == 3:
                assert message["d"]["b"]["s"] == "ok", message
                return


def test_data_rules_and_held_sessions_survive_a_graceful_restart():
    data_dir = tempfile.mkdtemp(prefix="presence-durable-")
    server = Server("--rules", "open", "--disconnect-grace", "3", data_dir=data_dir)
    assert rest(server, "PUT", "/config", data=json.dumps({"a": 1, "b": {".sv": "timestamp"}})).status_code == 200
    rules = '{"rules": {".read": true, ".write": "auth != null"}}'
    assert requests.put(f"http://{server.host}:{server.port}/.settings/rules.json", params={"ns": "demo"},
                        headers=OWNER, data=rules, timeout=5).status_code == 200
    alice = FastClient(server, "alice")
    alice.wait_acked()
    stored = rest(server, "GET", "/config").json()
    assert server.stop() == 0  # SIGTERM: alice's socket is closed with 1001, her ops are held and stored

    again = Server("--rules", "open", "--disconnect-grace", "3", data_dir=data_dir)
    try:
        assert rest(again, "GET", "/config").json() == stored
        assert requests.get(f"http://{again.host}:{again.port}/.settings/rules.json", params={"ns": "demo"},
                            headers=OWNER, timeout=5).text == rules
        # alice comes straight back naming her session: she never goes offline.
        back = FastClient(again, "alice", ls=alice.session)
        back.wait_acked()
        time.sleep(3.5)
        assert rest(again, "GET", "/users/alice/presence").json()["online"] is True
    finally:
        again.stop()


def test_crash_with_1000_users_leaves_no_ghosts_and_loses_no_acknowledged_write():
    data_dir = tempfile.mkdtemp(prefix="presence-crash-")
    server = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "3", data_dir=data_dir)
    users = [FastClient(server, f"user{i}") for i in range(1000)]
    for client in users:
        client.wait_acked()
    before_crash = int(time.time() * 1000)
    server.kill()
    crashed_at = int(time.time() * 1000)
    for client in users:
        client.ws.sock.close()

    again = Server("--rules", PRESENCE_RULES, "--disconnect-grace", "3", data_dir=data_dir)
    try:
        started = time.time()
        # Every acknowledged write is there: all 1000 users are (still) online right after restart.
        assert len([1 for v in rest(again, "GET", "/users").json().values() if v["presence"]["online"]]) == 1000
        watcher = Client(again.url("demo"))
        assert watcher.call("gauth", {"cred": "owner"})["s"] == "ok"  # an operator's view of everyone
        assert watcher.listen("/users") is not None
        # Half of the users come back in time, naming their old session.
        returning = [FastClient(again, f"user{i}", ls=users[i].session) for i in range(0, 1000, 2)]
        for client in returning:
            client.wait_acked()
        # Watch until grace + 1 s after start-up: who went offline?
        went_offline = {}
        deadline = started + 4.0
        while time.time() < deadline:
            try:
                message = watcher.recv(timeout=max(0.05, deadline - time.time()))
            except Exception:
                break
            body = message.get("d", {}).get("b", {})
            if message.get("d", {}).get("a") == "d" and body.get("p", "").startswith("users/"):
                parts = body["p"].split("/")
                if len(parts) == 3 and body["d"] and body["d"].get("online") is False:
                    went_offline[parts[1]] = body["d"]["lastSeen"]
            elif message.get("d", {}).get("a") == "m":
                for key, value in body["d"].items():
                    if value and value.get("online") is False:
                        went_offline[key.split("/")[0]] = value["lastSeen"]
        final = rest(again, "GET", "/users").json()
        offline = {uid for uid, v in final.items() if not v["presence"]["online"]}
        assert offline == {f"user{i}" for i in range(1, 1000, 2)}
        assert not any(int(uid[4:]) % 2 == 0 for uid in went_offline), "a returning user flapped offline"
        for uid in offline:
            assert final[uid]["presence"]["lastSeen"] <= crashed_at
            assert final[uid]["presence"]["lastSeen"] >= before_crash - 2000
    finally:
        again.stop()


def test_export_and_import_move_a_database_as_json(tmp_path):
    data_dir = str(tmp_path / "source")
    server = Server("--rules", "open", data_dir=data_dir)
    rest(server, "PUT", "/users", data=json.dumps({"alice": {"presence": {"online": True, "lastSeen": 5}}}))
    server.stop()
    exported = subprocess.run([SERVER, "export", data_dir], capture_output=True, text=True, timeout=30)
    assert exported.returncode == 0, exported.stderr
    (tmp_path / "dump.json").write_text(exported.stdout)
    target = str(tmp_path / "target")
    imported = subprocess.run([SERVER, "import", target, str(tmp_path / "dump.json")],
                              capture_output=True, text=True, timeout=30)
    assert imported.returncode == 0, imported.stderr
    restored = Server("--rules", "open", data_dir=target)
    try:
        assert rest(restored, "GET", "/users/alice/presence").json() == {"online": True, "lastSeen": 5}
    finally:
        restored.stop()
    bad = subprocess.run([SERVER, "import", target, "/nonexistent.json"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0


def test_a_second_server_on_the_same_data_dir_is_refused():
    data_dir = tempfile.mkdtemp(prefix="presence-lock-")
    first = Server("--rules", "open", data_dir=data_dir)
    try:
        second = subprocess.run([SERVER, "--port", "0", "--rules", "open", "--data-dir", data_dir],
                                capture_output=True, text=True, timeout=15)
        assert second.returncode != 0 and "storage" in second.stderr
    finally:
        first.stop()
