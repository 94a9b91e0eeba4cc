"""The operator API, health, readiness and metrics."""
import json
import time

import requests
import websocket

from conftest import Server

OWNER = {"Authorization": "Bearer owner"}


def base(server):
    return f"http://{server.host}:{server.port}"


def test_admin_endpoints_need_admin_credentials_and_leak_nothing(open_server):
    alice = open_server.client()
    alice.auth("alice")
    for method, path in [("GET", "/.admin/"), ("GET", "/.admin/connections"), ("GET", "/.admin/users/alice"),
                         ("GET", "/.admin/stats"), ("POST", f"/.admin/connections/{alice.session}/close"),
                         ("GET", "/.admin/anything")]:
        for headers, params in [({}, {}), ({"Authorization": "Bearer nope"}, {}), ({}, {"auth": "not-admin"})]:
            response = requests.request(method, base(open_server) + path, headers=headers, params=params, timeout=5)
            assert response.status_code == 401, (method, path, response.status_code)
            assert set(response.json()) == {"error"} and "alice" not in response.text
    assert alice.call("s", {})["s"] == "ok"  # the attempted kick did nothing


def test_connections_list_filters_and_pages(open_server):
    clients = []
    for uid in ["alice", "bob", "carol"]:
        client = open_server.client(ns="ops")
        client.request("s", {"c": {"sdk.js.9-23-0": 1}})
        client.auth(uid)
        assert client.listen(f"/users/{uid}/presence") is None
        assert client.call("o", {"p": f"/users/{uid}/presence", "d": {"online": False}})["s"] == "ok"
        clients.append(client)
    listing = requests.get(base(open_server) + "/.admin/connections", headers=OWNER, timeout=5).json()
    assert listing["total"] == 3 and listing["nextCursor"] is None
    alice = next(c for c in listing["connections"] if c["uid"] == "alice")
    assert alice["session"] == clients[0].session and alice["namespace"] == "ops" and alice["auth"] == "user"
    assert alice["sdk"] == "js 9.23.0" and alice["listeners"] == 1 and alice["onDisconnectOps"] == 1
    assert alice["bytesIn"] > 0 and alice["bytesOut"] > 0 and alice["connectedAt"] <= alice["lastFrameAt"]
    assert "127.0.0.1" in alice["remote"]
    only_bob = requests.get(base(open_server) + "/.admin/connections", params={"uid": "bob"}, headers=OWNER, timeout=5).json()
    assert [c["uid"] for c in only_bob["connections"]] == ["bob"]
    page = requests.get(base(open_server) + "/.admin/connections", params={"limit": 2}, headers=OWNER, timeout=5).json()
    assert len(page["connections"]) == 2 and page["nextCursor"]
    rest = requests.get(base(open_server) + "/.admin/connections", params={"limit": 2, "cursor": page["nextCursor"]},
                        headers=OWNER, timeout=5).json()
    assert len(rest["connections"]) == 1
    assert {c["session"] for c in page["connections"] + rest["connections"]} == {c.session for c in clients}
    other_ns = requests.get(base(open_server) + "/.admin/connections", params={"ns": "elsewhere"}, headers=OWNER, timeout=5).json()
    assert other_ns["total"] == 0


def test_kick_closes_the_connection_and_its_ops_are_held_then_run():
    server = Server("--rules", "open", "--disconnect-grace", "1")
    try:
        alice = server.client()
        alice.auth("alice")
        assert alice.call("o", {"p": "/users/alice/presence", "d": {"online": False, "lastSeen": {".sv": "timestamp"}}})["s"] == "ok"
        assert alice.call("p", {"p": "/users/alice/presence", "d": {"online": True, "lastSeen": 1}})["s"] == "ok"
        kicked = requests.post(base(server) + f"/.admin/connections/{alice.session}/close", headers=OWNER,
                               data=json.dumps({"reason": "maintenance"}), timeout=5)
        assert kicked.json() == {"closed": True}
        alice.ws.settimeout(5)
        while True:
            opcode, data = alice.ws.recv_data(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                assert int.from_bytes(data[:2], "big") == 4002 and b"maintenance" in data
                break
        user = requests.get(base(server) + "/.admin/users/alice", headers=OWNER, timeout=5).json()
        assert user["connections"] == [] and user["presence"]["demo"]["online"] is True
        assert len(user["held"]) == 1 and user["held"][0]["ops"][0]["path"] == "/users/alice/presence"
        time.sleep(1.5)
        user = requests.get(base(server) + "/.admin/users/alice", headers=OWNER, timeout=5).json()
        assert user["held"] == [] and user["presence"]["demo"]["online"] is False
        missing = requests.post(base(server) + "/.admin/connections/nope/close", headers=OWNER, timeout=5)
        assert missing.status_code == 404
    finally:
        assert server.alive()
        server.stop()


def test_health_readiness_stats_and_metrics(open_server):
    assert requests.get(base(open_server) + "/healthz", timeout=5).json() == {"status": "ok"}
    assert requests.get(base(open_server) + "/readyz", timeout=5).json() == {"status": "ready"}
    writer = open_server.client()
    watcher = open_server.client()
    assert watcher.listen("/room") is None
    assert writer.call("p", {"p": "/room", "d": 1})["s"] == "ok"
    assert writer.call("auth", {"cred": "garbage"})["s"] == "invalid_token"
    stats = requests.get(base(open_server) + "/.admin/stats", headers=OWNER, timeout=5).json()
    assert stats["connections"] == 2 and stats["writes"] >= 1 and stats["pushes"] >= 2 and stats["messagesIn"] >= 3
    text = requests.get(base(open_server) + "/metrics", timeout=5).text
    samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line and not line.startswith("#")}
    assert samples["presence_connections"] == 2
    assert samples['presence_writes_total{kind="set"}'] >= 1
    assert samples["presence_pushes_total"] >= 2
    assert samples["presence_auth_failures_total"] >= 1
    assert samples["presence_write_to_ack_seconds_count"] >= 1
    assert samples["presence_write_to_push_seconds_count"] >= 1
    assert samples["presence_messages_received_total"] >= 3 and samples["presence_bytes_sent_total"] > 0
    writer.close()
    time.sleep(0.3)
    text = requests.get(base(open_server) + "/metrics", timeout=5).text
    assert 'presence_connections_closed_total{reason="client_close"} 1' in text
