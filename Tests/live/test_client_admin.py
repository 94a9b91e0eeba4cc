"""presence-client admin: connections, user, kick and stats against the real server's admin API."""
import json

import websocket

from conftest import CLIENT, run_client


def admin(server, *args, scheme="ws", timeout=15):
    argv = [CLIENT, "admin", *args]
    if server is not None:
        argv += ["--server", f"{scheme}://{server.host}:{server.port}"]
    return run_client(argv, timeout=timeout)


def test_connections_table_and_json_with_filters(open_server):
    alice = open_server.client()
    alice.auth("alice")
    bob = open_server.client(ns="other")
    bob.auth("bob")
    anonymous = open_server.client()

    table = admin(open_server, "connections")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "UID", "NS", "REMOTE"]
    assert any(line.startswith(alice.session) and " alice " in line and " demo " in line for line in lines)
    assert any(line.startswith(anonymous.session) and "(anonymous)" in line for line in lines)
    assert lines[-1] == "3 connections"

    listing = json.loads(admin(open_server, "connections", "--json", scheme="http").stdout)
    assert listing["total"] == 3
    assert [c["session"] for c in listing["connections"]] == [alice.session, bob.session, anonymous.session]

    only_alice = json.loads(admin(open_server, "connections", "--uid", "alice", "--json").stdout)
    assert [c["uid"] for c in only_alice["connections"]] == ["alice"]
    other = json.loads(admin(open_server, "connections", "--ns", "other", "--json").stdout)
    assert [c["session"] for c in other["connections"]] == [bob.session]
    none = admin(open_server, "connections", "--uid", "nobody")
    assert none.returncode == 0 and none.stdout.strip() == "no connections match"
    for client in (alice, bob, anonymous):
        client.close()


def test_connections_follow_pages(open_server):
    clients = [open_server.client() for _ in range(3)]
    for i, client in enumerate(clients):
        client.auth(f"user{i}")
    listing = json.loads(admin(open_server, "connections", "--json").stdout)
    assert [c["session"] for c in listing["connections"]] == [c.session for c in clients]
    limited = json.loads(admin(open_server, "connections", "--limit", "2", "--json").stdout)
    assert len(limited["connections"]) == 2 and limited["total"] == 3
    for client in clients:
        client.close()


def test_user_shows_connections_and_presence(open_server):
    alice = open_server.client()
    alice.auth("alice")
    assert alice.call("p", {"p": "/users/alice/presence", "d": {"online": True}})["s"] == "ok"
    assert alice.call("o", {"p": "/users/alice/presence", "d": {"online": False}})["s"] == "ok"

    user = json.loads(admin(open_server, "user", "alice", "--json").stdout)
    assert user["uid"] == "alice" and [c["session"] for c in user["connections"]] == [alice.session]
    assert user["presence"] == {"demo": {"online": True}}
    assert user["connections"][0]["onDisconnectOps"] == 1

    text = admin(open_server, "user", "alice", "--ns", "demo")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == "alice"
    assert alice.session in text.stdout and 'demo: {"online":true}' in text.stdout
    assert "held sessions: none" in text.stdout
    alice.close()


def test_kick_closes_with_4002_and_the_reason(open_server):
    bob = open_server.client()
    bob.auth("bob")
    r = admin(open_server, "kick", bob.session, "--reason", "cli test")
    assert r.returncode == 0 and r.stdout.strip() == f"closed {bob.session}", r.stderr
    bob.ws.settimeout(5)
    close = None
    for _ in range(10):
        try:
            opcode, data = bob.ws.recv_data(control_frame=True)
        except websocket.WebSocketConnectionClosedException:
            break
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            close = data
            break
    assert close is not None and int.from_bytes(close[:2], "big") == 4002 and close[2:] == b"cli test"

    again = admin(open_server, "kick", bob.session)
    assert again.returncode == 3 and "no such session" in again.stderr


def test_stats(open_server):
    alice = open_server.client()
    alice.auth("alice")
    stats = json.loads(admin(open_server, "stats", "--json").stdout)
    assert stats["connections"] == 1 and stats["messagesIn"] >= 1 and stats["time"] > 0
    text = admin(open_server, "stats")
    assert text.returncode == 0, text.stderr
    rows = dict(line.split(None, 1) if not line.startswith(("sessions", "messages", "bytes", "server"))
                else (" ".join(line.split()[:2]), " ".join(line.split()[2:])) for line in text.stdout.splitlines())
    assert rows["connections"] == "1" and rows["sessions held"] == "0" and "uptime" in rows
    alice.close()


def test_credential_refused_exits_4(open_server, tmp_path):
    r = admin(open_server, "stats", "--admin-token", "not-the-admin")
    assert r.returncode == 4 and "credential refused" in r.stderr
    token = tmp_path / "admin.txt"
    token.write_text("owner\n")
    ok = admin(open_server, "stats", "--admin-token-file", str(token))
    assert ok.returncode == 0, ok.stderr


def test_connection_refused_exits_2():
    r = run_client([CLIENT, "admin", "stats", "--server", "ws://127.0.0.1:1"], timeout=15)
    assert r.returncode == 2 and "connection refused" in r.stderr


def test_bad_arguments_exit_64(tmp_path):
    for argv in (["stats", "--server", "wss://127.0.0.1:9000"], ["stats", "--server", "ftp://x:1"],
                 ["stats", "--server", "ws://host:notaport"], ["kick"], ["user"],
                 ["stats", "--admin-token", "a", "--admin-token-file", "b"],
                 ["stats", "--admin-token-file", str(tmp_path / "missing")], ["connections", "--limit", "0"],
                 ["nonsense"]):
        r = run_client([CLIENT, "admin", *argv], timeout=10)
        assert r.returncode == 64, (argv, r.returncode, r.stderr)


def test_help_has_examples():
    r = run_client([CLIENT, "admin", "--help"], timeout=10)
    assert r.returncode == 0 and "presence-client admin kick" in r.stdout
    for sub in ("connections", "user", "kick", "stats"):
        h = run_client([CLIENT, "admin", sub, "--help"], timeout=10)
        assert h.returncode == 0 and "Examples:" in h.stdout, sub
