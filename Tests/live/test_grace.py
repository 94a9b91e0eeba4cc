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
