"""The presence recipe of protocol doc section 16, with two users and the shipped rules."""
import time

from conftest import unsigned_token

SV_TIMESTAMP = {".sv": "timestamp"}


def go_online(client, uid):
    r_stats = client.request("s", {"c": {"sdk.js.8-10-1": 1}})
    r_auth = client.request("auth", {"cred": unsigned_token(uid)})
    r_listen = client.request("q", {"p": f"/users/{uid}/presence", "h": ""})
    assert client.reply(r_stats) == {"s": "ok", "d": ""}
    auth = client.reply(r_auth)
    assert auth["s"] == "ok" and auth["d"]["auth"]["uid"] == uid and auth["d"]["auth"]["provider"] == "custom"
    assert client.reply(r_listen) == {"s": "ok", "d": {}}
    assert client.push(f"users/{uid}/presence") is None  # the listen's initial data, sent before its ok
    ondisconnect = client.call("o", {"p": f"/users/{uid}/presence", "d": {"online": False, "lastSeen": SV_TIMESTAMP}})
    assert ondisconnect == {"s": "ok", "d": ""}
    r_set = client.request("p", {"p": f"/users/{uid}/presence", "d": {"online": True, "lastSeen": SV_TIMESTAMP}})
    return r_set


def test_two_users_see_each_other_and_a_dropped_socket_goes_offline(presence_server):
    alice = presence_server.client()
    bob = presence_server.client()
    bob.auth("bob")
    assert bob.listen("/users/alice/presence") is None

    before = int(time.time() * 1000)
    r_set = go_online(alice, "alice")
    # The writer receives its echo before its ack (protocol doc 4.3).
    messages = [alice.recv(), alice.recv()]
    echo = [m for m in messages if m["d"].get("a") == "d" and m["d"]["b"]["p"] == "users/alice/presence"
            and m["d"]["b"]["d"] is not None]
    assert echo, messages
    assert messages.index(echo[0]) < [i for i, m in enumerate(messages) if m["d"].get("r") == r_set][0]
    online = echo[0]["d"]["b"]["d"]
    assert online["online"] is True and isinstance(online["lastSeen"], int)
    assert before <= online["lastSeen"] <= int(time.time() * 1000)

    # Bob's listener sees alice online with the same server timestamp.
    seen = bob.push("users/alice/presence")
    assert seen == online

    # Alice may not write bob's presence; nothing changes for anyone.
    denied = alice.call("p", {"p": "/users/bob/presence", "d": {"online": True, "lastSeen": SV_TIMESTAMP}})
    assert denied == {"s": "permission_denied", "d": "Permission denied"}

    # Alice's socket vanishes without a close frame: her onDisconnect write runs.
    dropped_at = int(time.time() * 1000)
    alice.drop()
    offline = bob.push("users/alice/presence")
    assert offline["online"] is False
    assert isinstance(offline["lastSeen"], int) and offline["lastSeen"] >= dropped_at - 5
    bob.close()


def test_unauthenticated_client_cannot_read_presence(presence_server):
    anonymous = presence_server.client()
    reply = anonymous.call("q", {"p": "/users/alice/presence", "h": ""})
    assert reply == {"s": "permission_denied", "d": "Permission denied"}
    assert anonymous.call("g", {"p": "/users/alice/presence", "q": {}})["s"] == "permission_denied"


def test_validate_rejects_wrong_shape_and_future_last_seen(presence_server):
    alice = presence_server.client()
    alice.auth("alice")
    path = "/users/alice/presence"
    assert alice.call("p", {"p": path, "d": {"online": "yes", "lastSeen": SV_TIMESTAMP}})["s"] == "permission_denied"
    assert alice.call("p", {"p": path, "d": {"online": True, "lastSeen": 99999999999999}})["s"] == "permission_denied"
    assert alice.call("p", {"p": path, "d": {"online": True, "lastSeen": SV_TIMESTAMP, "extra": 1}})["s"] == "permission_denied"
    # A registration the rules deny is refused and stores nothing.
    assert alice.call("o", {"p": "/users/bob/presence", "d": {"online": False, "lastSeen": SV_TIMESTAMP}})["s"] == "permission_denied"
    assert alice.call("p", {"p": path, "d": {"online": True, "lastSeen": SV_TIMESTAMP}})["s"] == "ok"
    assert alice.call("g", {"p": path, "q": {}})["d"]["online"] is True


def test_namespaces_are_independent_databases(open_server):
    one = open_server.client(ns="one")
    two = open_server.client(ns="two")
    assert one.call("p", {"p": "/x", "d": 1})["s"] == "ok"
    assert one.call("g", {"p": "/x", "q": {}})["d"] == 1
    assert two.call("g", {"p": "/x", "q": {}})["d"] is None


def test_server_values_increment_and_one_now_per_write(open_server):
    client = open_server.client()
    assert client.call("p", {"p": "/counter", "d": {".sv": {"increment": 2}}})["s"] == "ok"
    assert client.call("p", {"p": "/counter", "d": {".sv": {"increment": 3}}})["s"] == "ok"
    assert client.call("g", {"p": "/counter", "q": {}})["d"] == 5
    update = {"a/t": SV_TIMESTAMP, "b/t": SV_TIMESTAMP, "c": {"deep": {"t": SV_TIMESTAMP}}}
    assert client.call("m", {"p": "/stamps", "d": update})["s"] == "ok"
    stamps = client.call("g", {"p": "/stamps", "q": {}})["d"]
    assert stamps["a"]["t"] == stamps["b"]["t"] == stamps["c"]["deep"]["t"]


def test_listener_never_receives_data_outside_its_path(open_server):
    writer = open_server.client()
    watcher = open_server.client()
    assert watcher.listen("/users/alice") is None
    assert writer.call("p", {"p": "/users", "d": {"alice": {"presence": {"online": True}}, "bob": {"secret": 1}}})["s"] == "ok"
    pushed = watcher.push("users/alice")
    assert pushed == {"presence": {"online": True}}
    # A write below the listen is pushed at the write's own path.
    assert writer.call("p", {"p": "/users/alice/presence/online", "d": False})["s"] == "ok"
    assert watcher.push("users/alice/presence/online") is False


def test_who_is_online_now_over_the_wire_and_rest(presence_server):
    import requests
    for uid, online in [("ann", True), ("ben", False), ("cat", True)]:
        client = presence_server.client()
        client.auth(uid)
        assert client.call("p", {"p": f"/users/{uid}/presence", "d": {"online": online, "lastSeen": SV_TIMESTAMP}})["s"] == "ok"
    reader = presence_server.client()
    assert reader.call("g", {"p": "/online-users", "q": {}})["s"] == "permission_denied"  # rules apply
    reader.auth("reader")
    listing = reader.call("g", {"p": "/online-users", "q": {}})
    assert listing["s"] == "ok" and set(listing["d"]) == {"ann", "cat"}
    assert listing["d"]["ann"]["online"] is True and isinstance(listing["d"]["ann"]["lastSeen"], int)
    url = f"http://{presence_server.host}:{presence_server.port}/online-users.json"
    assert requests.get(url, params={"ns": "demo"}, timeout=5).status_code == 401
    rest = requests.get(url, params={"ns": "demo", "auth": unsigned_token("reader")}, timeout=5)
    assert rest.status_code == 200 and set(rest.json()) == {"ann", "cat"}
