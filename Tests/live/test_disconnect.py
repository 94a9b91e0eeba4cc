"""onDisconnect runs exactly once, whatever ends the connection: close frame, TCP close,
a killed process, liveness timeout, or a reconnect that names the old session with ls."""
import subprocess
import sys
import textwrap
import time

from conftest import Server, unsigned_token

OFFLINE = {"online": False, "lastSeen": {".sv": "timestamp"}}
ONLINE = {"online": True, "lastSeen": {".sv": "timestamp"}}


def register(client, uid):
    client.auth(uid)
    assert client.call("o", {"p": f"/users/{uid}/presence", "d": OFFLINE})["s"] == "ok"
    assert client.call("p", {"p": f"/users/{uid}/presence", "d": ONLINE})["s"] == "ok"


def watcher_of(server, uid):
    watcher = server.client()
    watcher.auth("watcher")
    value = watcher.listen(f"/users/{uid}/presence")
    return watcher, value


def test_clean_close_runs_ondisconnect(presence_server):
    alice = presence_server.client()
    register(alice, "alice")
    watcher, value = watcher_of(presence_server, "alice")
    assert value["online"] is True
    alice.close()
    assert watcher.push("users/alice/presence")["online"] is False


def test_killed_client_process_goes_offline(presence_server):
    script = textwrap.dedent(f"""
        import json, sys, websocket
        ws = websocket.create_connection("{presence_server.url()}")
        ws.recv()
        def call(r, a, b):
            ws.send(json.dumps({{"t": "d", "d": {{"r": r, "a": a, "b": b}}}}))
            while json.loads(ws.recv())["d"].get("r") != r: pass
        call(1, "auth", {{"cred": "{unsigned_token('carol')}"}})
        call(2, "o", {{"p": "/users/carol/presence", "d": {{"online": False, "lastSeen": {{".sv": "timestamp"}}}}}})
        call(3, "p", {{"p": "/users/carol/presence", "d": {{"online": True, "lastSeen": {{".sv": "timestamp"}}}}}})
        print("ready", flush=True)
        sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        watcher, value = watcher_of(presence_server, "carol")
        assert value["online"] is True
        killed_at = int(time.time() * 1000)
        child.kill()  # SIGKILL: the kernel closes the socket, no WebSocket close frame
        offline = watcher.push("users/carol/presence", timeout=5)
        assert offline["online"] is False and offline["lastSeen"] >= killed_at - 5
    finally:
        child.kill()
        child.wait()


def test_silent_peer_is_dropped_by_the_liveness_check():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--ping-interval", "1", "--idle-timeout", "3")
    try:
        silent = server.client()
        assert silent.call("o", {"p": "/users/dave/presence", "d": OFFLINE})["s"] == "ok"
        assert silent.call("p", {"p": "/users/dave/presence", "d": ONLINE})["s"] == "ok"
        watcher = server.client()
        assert watcher.listen("/users/dave/presence")["online"] is True
        # The silent client never reads again, so it answers no ping: a vanished network.
        went_quiet = time.time()
        # The watcher reads (and so answers pings) while it waits.
        offline = watcher.push("users/dave/presence", timeout=8)
        waited = time.time() - went_quiet
        assert offline["online"] is False
        assert 2.0 <= waited <= 6.0, waited
    finally:
        assert server.alive()
        server.stop()


def test_reconnect_with_ls_closes_the_old_session_first(presence_server):
    old = presence_server.client()
    register(old, "erin")
    # The new connection names the old session; the old one is closed and its ops run before
    # the new connection's first request is handled.
    new = presence_server.client(ls=old.session)
    new.auth("erin")
    value = new.listen("/users/erin/presence")
    assert value["online"] is False
    # The new connection can then register again and come back online; the old session's ops
    # do not run a second time.
    register(new, "erin")
    watcher, now_value = watcher_of(presence_server, "erin")
    assert now_value["online"] is True
    old.ws.settimeout(2)
    try:
        while old.ws.recv():
            pass
    except Exception:
        pass
    time.sleep(0.3)
    assert watcher.call("g", {"p": "/users/erin/presence", "q": {}})["d"]["online"] is True


def test_ondisconnect_cancel_forgets_the_path_and_below(open_server):
    client = open_server.client()
    assert client.call("o", {"p": "/users/fay", "d": {"presence": {"online": False}, "profile": {"x": 1}}})["s"] == "ok"
    assert client.call("oc", {"p": "/users/fay/presence", "d": None})["s"] == "ok"
    watcher = open_server.client()
    assert watcher.listen("/users/fay") is None
    client.close()
    # Only the sibling that was not cancelled is written (pushed at the write's own path).
    assert watcher.push("users/fay/profile") == {"x": 1}
    assert watcher.call("g", {"p": "/users/fay", "q": {}})["d"] == {"profile": {"x": 1}}
