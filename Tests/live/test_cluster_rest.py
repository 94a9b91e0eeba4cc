"""Scale-out, the REST side (issue 14, docs/scaling.md): REST writes, conditional writes and rules
uploads go through the Redis log and are answered once committed on the node that took them; REST
reads and Server-Sent Events streams work on a node that has no WebSocket client of the namespace
(it follows the namespace for them); limited reads count once in the whole cluster. Three nodes on
one real redis-server, as in test_cluster.py (whose fixtures these reuse)."""
import json
import os
import tempfile
import time

import pytest
import requests

from conftest import PRESENCE_RULES, Server, unsigned_token
from test_cluster import ONLINE, REDIS, on_every_node, redis, wait_presence, watch  # noqa: F401 - fixtures
from test_limits import write_limits
from test_streaming import Stream

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")

OWNER = {"Authorization": "Bearer owner"}


def base(node):
    return f"http://{node.host}:{node.port}"


def nodes_on(redis, count, *args):
    return [Server("--storage", "redis", "--redis", redis.address, *args) for _ in range(count)]


def wait_rest_value(node, path, ns, expected, timeout=15):
    """REST reads of path on node until they answer expected (nodes apply the log at their pace)."""
    deadline = time.time() + timeout
    while (value := requests.get(f"{base(node)}{path}.json", params={"ns": ns}, timeout=20).json()) != expected:
        assert time.time() < deadline, f"node {node.port} answers {value} for {path}, not {expected}"
        time.sleep(0.1)


def stop_all(nodes):
    for node in nodes:
        node.stop()


def test_a_rest_write_on_one_node_is_seen_by_a_listener_on_another(redis):
    a, b, c = nodes_on(redis, 3, "--rules", PRESENCE_RULES)
    try:
        watcher = watch(c, "alice")
        params = {"ns": "demo", "auth": unsigned_token("alice")}
        # Node a has no client of the namespace: it follows it for this request.
        response = requests.put(f"{base(a)}/users/alice/presence.json", params=params, json=ONLINE, timeout=20)
        assert response.status_code == 200, response.text
        stored = response.json()
        assert stored["online"] is True and isinstance(stored["lastSeen"], int), stored
        seen = wait_presence(watcher, "alice", lambda v: v and v.get("online") is True, 15)
        assert seen == stored
        # The same mapping of refusals as a single node: another user's node is refused.
        refused = requests.put(f"{base(a)}/users/bob/presence.json", params=params, json=ONLINE, timeout=20)
        assert refused.status_code == 401, refused.text
        # PATCH, print=silent and DELETE, from node b.
        patched = requests.patch(f"{base(b)}/users/alice/presence.json", params={**params, "print": "silent"},
                                 json={"online": False}, timeout=20)
        assert patched.status_code == 204 and patched.text == ""
        assert watcher.push("users/alice/presence/online", timeout=15) is False
        deleted = requests.delete(f"{base(b)}/users/alice/presence.json", params=params, timeout=20)
        assert deleted.status_code == 200 and deleted.json() is None
        wait_presence(watcher, "alice", lambda v: v is None, 15)
    finally:
        stop_all([a, b, c])


def test_a_rest_post_is_ordered_once_and_read_back_on_every_node(redis):
    nodes = nodes_on(redis, 3, "--rules", "open")
    try:
        names = []
        for index, node in enumerate(nodes):
            posted = requests.post(f"{base(node)}/messages.json", params={"ns": "posts"}, json={"from": index}, timeout=20)
            assert posted.status_code == 200, posted.text
            names.append(posted.json()["name"])
        expected = {name: {"from": index} for index, name in enumerate(names)}
        for node in nodes:  # each one acknowledged its own write after applying it, in the log's order
            wait_rest_value(node, "/messages", "posts", expected)
    finally:
        stop_all(nodes)


def test_rules_uploaded_over_rest_on_one_node_are_enforced_on_the_others(redis):
    a, b, c = nodes_on(redis, 3, "--rules", "open")
    try:
        clients = [b.client(), c.client()]
        for client in clients:  # both nodes follow the namespace before the upload
            assert client.call("p", {"p": "/locked/before", "d": 1}, timeout=15)["s"] == "ok"
        rules = '{"rules": {".read": true, "open": {".write": true}, "locked": {".write": false}}}'
        uploaded = requests.put(f"{base(a)}/.settings/rules.json", params={"ns": "demo"}, data=rules, headers=OWNER, timeout=20)
        assert uploaded.status_code == 200, uploaded.text
        for index, client in enumerate(clients):
            assert client.call("p", {"p": f"/locked/after{index}", "d": 1}, timeout=15)["s"] == "permission_denied"
            assert client.call("p", {"p": f"/open/{index}", "d": 1}, timeout=15)["s"] == "ok"
        refused = requests.put(f"{base(c)}/locked/rest.json", params={"ns": "demo"}, json=1, timeout=20)
        assert refused.status_code == 401, refused.text
        d, = nodes_on(redis, 1, "--rules", "open")  # never followed the namespace before
        try:
            for node in (b, c, d):
                shown = requests.get(f"{base(node)}/.settings/rules.json", params={"ns": "demo"}, headers=OWNER, timeout=20)
                assert shown.status_code == 200 and shown.text == rules
        finally:
            d.stop()
        # A document that does not parse is refused where it arrives, and changes nothing.
        broken = requests.put(f"{base(b)}/.settings/rules.json", params={"ns": "demo"}, data="{", headers=OWNER, timeout=20)
        assert broken.status_code == 400
        assert clients[1].call("p", {"p": "/locked/again", "d": 1}, timeout=15)["s"] == "permission_denied"
    finally:
        stop_all([a, b, c])


def test_rest_if_match_increments_from_three_nodes_end_exact(redis):
    nodes = nodes_on(redis, 3, "--rules", "open")
    rounds = 10

    def increment(node):
        url, params = f"{base(node)}/counter.json", {"ns": "count"}
        read = requests.get(url, params=params, headers={"X-Firebase-ETag": "true"}, timeout=20)
        value, etag = read.json(), read.headers["ETag"]
        done = 0
        while done < rounds:
            answer = requests.put(url, params=params, json=(value or 0) + 1, headers={"if-match": etag}, timeout=20)
            assert answer.status_code in (200, 412), (answer.status_code, answer.text)
            done += answer.status_code == 200
            # 200: the value written; 412: the current one. Either way with its ETag.
            value, etag = answer.json(), answer.headers["ETag"]

    try:
        on_every_node(increment, nodes)
        for node in nodes:
            wait_rest_value(node, "/counter", "count", 3 * rounds)
    finally:
        stop_all(nodes)


def test_rest_reads_and_a_stream_on_a_node_with_no_websocket_client_of_the_namespace(redis):
    a, b, c = nodes_on(redis, 3, "--rules", "open")
    try:
        writer = a.client(ns="sse")
        assert writer.call("p", {"p": "/s", "d": 1}, timeout=15)["s"] == "ok"
        # b has no client of "sse": it follows the namespace, catches up, then answers.
        assert requests.get(f"{base(b)}/s.json", params={"ns": "sse"}, timeout=20).json() == 1
        stream = Stream(f"{base(c)}/s.json", {"ns": "sse"})
        first = stream.wait(1, timeout=20)
        assert first and first[0][0] == "put" and json.loads(first[0][1]) == {"path": "/", "data": 1}, first
        assert writer.call("p", {"p": "/s", "d": 2}, timeout=15)["s"] == "ok"
        events = stream.wait(2, timeout=20)
        assert len(events) >= 2 and json.loads(events[1][1]) == {"path": "/", "data": 2}, events
    finally:
        stop_all([a, b, c])


def test_limited_reads_are_counted_once_in_the_whole_cluster(redis):
    limits = tempfile.NamedTemporaryFile(prefix="limits-", suffix=".json", delete=False).name
    write_limits(limits, 2)
    nodes = nodes_on(redis, 3, "--rules", PRESENCE_RULES, "--limits", limits)
    try:
        params = {"ns": "demo", "auth": unsigned_token("dora")}
        first = requests.get(f"{base(nodes[0])}/online-users.json", params=params, timeout=20)
        second = requests.get(f"{base(nodes[1])}/online-users.json", params=params, timeout=20)
        assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
        third = requests.get(f"{base(nodes[2])}/online-users.json", params=params, timeout=20)
        assert third.status_code == 429, third.text
        assert third.headers["Retry-After"] in ("120", "119")
        # The wire path counts in the same place: a refresh over a WebSocket on any node is refused too.
        client = nodes[1].client()
        assert client.call("auth", {"cred": unsigned_token("dora")}, timeout=15)["s"] == "ok"
        assert client.call("g", {"p": "/online-users", "q": {}}, timeout=15)["s"] == "rate_limited"
        # Another user still has both refreshes, wherever they go.
        other = {"ns": "demo", "auth": unsigned_token("erin")}
        for node in nodes[1:]:
            assert requests.get(f"{base(node)}/online-users.json", params=other, timeout=20).status_code == 200
        # An operator's reset on one node holds on every node (a limitUsage entry in the log). The
        # route answers once it committed there, so a refresh there right after is served; another
        # node applies it at its own pace, so a refresh there may need another try.
        reset = requests.delete(f"{base(nodes[0])}/.admin/users/dora/limits/refreshOnlineUsers", params={"ns": "demo"},
                                headers=OWNER, timeout=20)
        assert reset.status_code == 200 and reset.json() == {"reset": True}, reset.text
        assert requests.get(f"{base(nodes[0])}/online-users.json", params=params, timeout=20).status_code == 200
        deadline = time.time() + 10
        while (again := requests.get(f"{base(nodes[2])}/online-users.json", params=params, timeout=20)).status_code == 429:
            assert time.time() < deadline, "the reset never reached node c"
            time.sleep(0.1)
        assert again.status_code == 200, again.text
        for node in nodes:  # an empty namespace let go right after a request is not an error
            assert "cannot be served" not in node.read_log()
    finally:
        stop_all(nodes)
        os.unlink(limits)


def test_a_namespace_name_too_long_for_redis_keys_is_refused_over_rest(redis):
    node, = nodes_on(redis, 1, "--rules", "open")
    try:
        for answer in (requests.get(f"{base(node)}/x.json", params={"ns": "n" * 600}, timeout=20),
                       requests.put(f"{base(node)}/x.json", params={"ns": "n" * 600}, json=1, timeout=20)):
            assert answer.status_code == 400 and "at most 512 bytes" in answer.json()["error"], answer.text
    finally:
        node.stop()


def test_a_rest_write_while_redis_is_down_is_answered_503_after_the_bounded_wait(redis):
    node, = nodes_on(redis, 1, "--rules", "open", "--node-lease", "8", "--fence-after", "6")
    try:
        assert requests.put(f"{base(node)}/x.json", params={"ns": "down"}, json=1, timeout=20).status_code == 200
        redis.kill()
        started = time.time()
        answer = requests.put(f"{base(node)}/x.json", params={"ns": "down"}, json=2, timeout=20)
        waited = time.time() - started
        assert answer.status_code == 503, answer.text
        assert waited < 5, f"answered after {waited:.1f} s (--redis-timeout is 2 s)"
        # Reads keep working from the replica.
        assert requests.get(f"{base(node)}/x.json", params={"ns": "down"}, timeout=20).json() == 1
    finally:
        redis.start()
        node.stop()
