"""The REST API on the same port (protocol doc section 9): same rules, same writes, same pushes."""
import json

import requests

from conftest import unsigned_token

OWNER = {"Authorization": "Bearer owner"}


def url(server, path, **params):
    params.setdefault("ns", "demo")
    return f"http://{server.host}:{server.port}{path}", params


def test_put_get_patch_post_delete_round_trip(open_server):
    u, p = url(open_server, "/users/alice/presence.json")
    put = requests.put(u, params=p, data=json.dumps({"online": True, "lastSeen": {".sv": "timestamp"}}), timeout=5)
    assert put.status_code == 200 and put.json()["online"] is True and isinstance(put.json()["lastSeen"], int)
    assert requests.get(u, params=p, timeout=5).json() == put.json()
    u_users, p_users = url(open_server, "/users.json")
    patch = requests.patch(u_users, params=p_users, data=json.dumps({"alice/presence/online": False, "bob": {"x": 1}}), timeout=5)
    assert patch.status_code == 200 and patch.json() == {"alice/presence/online": False, "bob": {"x": 1}}
    assert requests.get(u_users, params={**p_users, "shallow": "true"}, timeout=5).json() == {"alice": True, "bob": True}
    u_msgs, p_msgs = url(open_server, "/msgs.json")
    first = requests.post(u_msgs, params=p_msgs, data='"one"', timeout=5).json()["name"]
    second = requests.post(u_msgs, params=p_msgs, data='"two"', timeout=5).json()["name"]
    assert len(first) == 20 and first < second
    assert requests.get(u_msgs, params=p_msgs, timeout=5).json() == {first: "one", second: "two"}
    u_bob, p_bob = url(open_server, "/users/bob.json")
    assert requests.delete(u_bob, params=p_bob, timeout=5).json() is None
    assert requests.get(u_bob, params=p_bob, timeout=5).json() is None
    silent = requests.put(u_bob, params={**p_bob, "print": "silent"}, data="1", timeout=5)
    assert silent.status_code == 204 and silent.content == b""
    override = requests.post(u_bob, params=p_bob, headers={"X-HTTP-Method-Override": "DELETE"}, timeout=5)
    assert override.status_code == 200 and requests.get(u_bob, params=p_bob, timeout=5).json() is None


def test_rest_writes_reach_websocket_listeners(open_server):
    watcher = open_server.client()
    assert watcher.listen("/users/carol/presence") is None
    u, p = url(open_server, "/users/carol/presence.json")
    requests.put(u, params=p, data=json.dumps({"online": True, "lastSeen": 1}), timeout=5)
    assert watcher.push("users/carol/presence") == {"online": True, "lastSeen": 1}


def test_rules_apply_to_rest_with_the_documented_statuses(presence_server):
    u, p = url(presence_server, "/users/alice/presence.json")
    body = json.dumps({"online": True, "lastSeen": {".sv": "timestamp"}})
    denied = requests.put(u, params=p, data=body, timeout=5)
    assert denied.status_code == 401 and denied.json() == {"error": "Permission denied"}
    as_alice = requests.put(u, params={**p, "auth": unsigned_token("alice")}, data=body, timeout=5)
    assert as_alice.status_code == 200
    as_bob = requests.put(u, params={**p, "auth": unsigned_token("bob")}, data=body, timeout=5)
    assert as_bob.status_code == 401
    # The admin may act as a user with auth_variable_override (the Admin SDK's route).
    override = {"auth_variable_override": json.dumps({"uid": "bob"})}
    assert requests.get(u, params={**p, **override}, headers=OWNER, timeout=5).status_code == 200
    assert requests.put(u, params={**p, **override}, headers=OWNER, data=body, timeout=5).status_code == 401
    assert requests.get(u, params={**p, "auth_variable_override": "null"}, headers=OWNER, timeout=5).status_code == 401
    assert requests.put(u, params=p, headers=OWNER, data=json.dumps({"anything": "goes"}), timeout=5).status_code == 200


def test_bad_rest_requests_get_json_errors(open_server):
    u, p = url(open_server, "/x.json")
    bad = requests.put(u, params=p, data="{not json", timeout=5)
    assert bad.status_code == 400 and "error" in bad.json()
    bad_key = requests.put(u, params=p, data=json.dumps({"a.b": 1}), timeout=5)
    assert bad_key.status_code == 400 and "a.b" in bad_key.json()["error"]
    bad_token = requests.get(u, params={**p, "auth": "garbage"}, timeout=5)
    assert bad_token.status_code == 401 and "error" in bad_token.json()
    assert requests.get(f"http://{open_server.host}:{open_server.port}/nothing", timeout=5).status_code == 404
    assert requests.get(f"http://{open_server.host}:{open_server.port}/healthz", timeout=5).json() == {"status": "ok"}


def test_rules_endpoint_per_namespace_admin_only_and_atomic(open_server):
    base = f"http://{open_server.host}:{open_server.port}/.settings/rules.json"
    assert requests.get(base, params={"ns": "a"}, timeout=5).status_code == 401
    assert requests.get(base, params={"ns": "a", "format": "strict"}, headers=OWNER, timeout=5).json() == {
        "rules": {".read": True, ".write": True}}
    rules = '{\n  // only signed-in users\n  "rules": {".read": "auth != null", ".write": "auth != null"}\n}'
    assert requests.put(base, params={"ns": "a"}, headers=OWNER, data=rules, timeout=5).status_code == 200
    assert requests.get(base, params={"ns": "a"}, headers=OWNER, timeout=5).text == rules
    assert requests.get(base, params={"ns": "a", "format": "strict"}, headers=OWNER, timeout=5).json() == {
        "rules": {".read": "auth != null", ".write": "auth != null"}}
    # Namespace a is now closed to anonymous clients; namespace b is not affected.
    a_url = f"http://{open_server.host}:{open_server.port}/x.json"
    assert requests.get(a_url, params={"ns": "a"}, timeout=5).status_code == 401
    assert requests.get(a_url, params={"ns": "b"}, timeout=5).status_code == 200
    # A document that does not load is refused whole with the loader's error; the old rules stay.
    bad = requests.put(base, params={"ns": "a"}, headers=OWNER, data='{"rules": {".read": "nope =="}}', timeout=5)
    assert bad.status_code == 400 and "/rules/.read" in bad.json()["error"]
    assert requests.get(base, params={"ns": "a"}, headers=OWNER, timeout=5).text == rules
