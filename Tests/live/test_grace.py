"""The disconnect grace window in real time (the default 3 s): no offline flap for a client that
comes straight back; exactly one offline event, with lastSeen at the drop, for one that does not."""
import time

import pytest

from conftest import PRESENCE_RULES, Server

OFFLINE = {"online": False, "lastSeen": {".sv": "timestamp"}}
ONLINE = {"online": True, "lastSeen": {".sv": "timestamp"}}


@pytest.fixture
def grace_server():
    server = Server("--rules", PRESENCE_RULES)  # default --disconnect-grace 3
    yield server
    assert server.alive()
    server.stop()


def online(client, uid):
    client.auth(uid)
    assert client.call("o", {"p": f"/users/{uid}/presence", "d": OFFLINE})["s"] == "ok"
    assert client.call("p", {"p": f"/users/{uid}/presence", "d": ONLINE})["s"] == "ok"


def presence_events(watcher, uid, seconds):
    """Every push for uid's presence within `seconds`."""
    events = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            events.append(watcher.push(f"users/{uid}/presence", timeout=max(0.05, deadline - time.time())))
        except AssertionError:
            break
    return events


def test_quick_reconnect_with_ls_shows_no_offline(grace_server):
    watcher = grace_server.client()
    watcher.auth("watcher")
    alice = grace_server.client()
    online(alice, "alice")
    assert watcher.listen("/users/alice/presence")["online"] is True
    session = alice.session
    alice.drop()
    time.sleep(1.0)
    back = grace_server.client(ls=session)
    online(back, "alice")
    events = presence_events(watcher, "alice", 4.5)
    assert all(event["online"] is True for event in events), events


def test_no_return_means_one_offline_after_the_window_with_the_drop_time(grace_server):
    watcher = grace_server.client()
    watcher.auth("watcher")
    bob = grace_server.client()
    online(bob, "bob")
    assert watcher.listen("/users/bob/presence")["online"] is True
    dropped_at = time.time()
    bob.drop()
    events = presence_events(watcher, "bob", 5.0)
    assert len(events) == 1, events
    arrived_after = time.time() - dropped_at
    assert events[0]["online"] is False
    assert abs(events[0]["lastSeen"] / 1000 - dropped_at) < 0.5
    assert arrived_after >= 2.9


def test_multi_device_recipe_keeps_the_user_online_while_a_device_remains(tmp_path):
    import os
    from conftest import ROOT
    server = Server("--rules", os.path.join(ROOT, "rules", "multi-device.rules.json"), "--disconnect-grace", "1")
    try:
        devices = []
        for name in ["phone", "laptop"]:
            device = server.client()
            device.auth("alice")
            assert device.call("o", {"p": f"/users/alice/connections/{name}", "d": None})["s"] == "ok"
            assert device.call("o", {"p": "/users/alice/lastSeen", "d": {".sv": "timestamp"}})["s"] == "ok"
            assert device.call("p", {"p": f"/users/alice/connections/{name}", "d": True})["s"] == "ok"
            devices.append(device)
        watcher = server.client()
        watcher.auth("watcher")
        assert watcher.listen("/users/alice") == {"connections": {"laptop": True, "phone": True}}
        devices[0].drop()  # the phone leaves; the laptop is still there
        update = watcher.wait_for(lambda m: m.get("d", {}).get("a") in ("d", "m"), timeout=4)
        state = watcher.call("g", {"p": "/users/alice", "q": {}})["d"]
        assert state["connections"] == {"laptop": True} and isinstance(state["lastSeen"], int)
        devices[1].close()  # the last one out
        time.sleep(1.5)
        state = watcher.call("g", {"p": "/users/alice", "q": {}})["d"]
        assert "connections" not in state and state["lastSeen"] >= 0
    finally:
        assert server.alive()
        server.stop()
