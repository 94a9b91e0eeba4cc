"""Operating a cluster (issue 14, docs/scaling.md "Operators"): three nodes on a real Redis (the
fixtures of test_cluster.py): the node list at /.admin/nodes, in /metrics and through
`presence-client admin nodes`; the node each connection is on; a kick sent to one node for a
connection on another, carried through Redis."""
import json
import os
import subprocess
import time

import pytest
import requests
import websocket

from conftest import SERVER
from test_cluster import REDIS, cluster, online, redis, watch, wait_presence  # noqa: F401 - fixtures
from test_dashboard import OUTPUT, browser, open_dashboard, severe_console_errors  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")
OWNER = {"Authorization": "Bearer owner"}
CLIENT = os.environ.get("PRESENCE_CLIENT", os.path.join(os.path.dirname(SERVER) or ".", "presence-client"))


def base(node):
    return f"http://{node.host}:{node.port}"


def nodes_of(node):
    return requests.get(base(node) + "/.admin/nodes", headers=OWNER, timeout=10).json()


def wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def close_code(client, timeout=10):
    """The close code the server sent (None if the socket ended without a close frame)."""
    client.ws.settimeout(timeout)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            opcode, data = client.ws.recv_data(control_frame=True)
        except websocket.WebSocketConnectionClosedException:
            return None
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(data[:2], "big") if len(data) >= 2 else None
    raise AssertionError("the connection was not closed")


def test_every_node_lists_the_cluster_with_connections_and_lag(cluster, redis):
    a, b, c = cluster
    clients = [b.client(), b.client(), c.client()]
    for index, client in enumerate(clients):
        online(client, f"user{index}")

    def listed():
        view = nodes_of(a)
        rows = {row["name"]: row for row in view["nodes"]}
        if set(rows) != {"a", "b", "c"} or rows["b"]["connections"] != 2 or rows["c"]["connections"] != 1:
            return None
        return view
    view = wait_until(listed, 15, "the three nodes with their connections")
    assert view["cluster"] is True and view["redisUp"] is True and view["redis"] == redis.address
    rows = {row["name"]: row for row in view["nodes"]}
    for name, node in zip("abc", cluster):
        row = rows[name]
        assert row["id"].startswith(name + "#") and row["address"] == f"{node.host}:{node.port}"
        assert row["state"] == "alive" and 0 <= row["beatAgeMs"] < 5000 and row["lag"] >= 0
        assert isinstance(row["lastBeat"], (int, float)) and row["self"] == (name == "a")
    # Each connection names its node (scope=node: this node's alone); the stats too.
    listing = requests.get(base(b) + "/.admin/connections?scope=node", headers=OWNER, timeout=10).json()
    assert listing["node"] == rows["b"]["id"]
    assert {conn["session"] for conn in listing["connections"]} == {clients[0].session, clients[1].session}
    assert all(conn["node"] == rows["b"]["id"] for conn in listing["connections"])
    assert requests.get(base(c) + "/.admin/stats", headers=OWNER, timeout=10).json()["node"] == rows["c"]["id"]
    # The CLI shows the same list.
    out = subprocess.run([CLIENT, "admin", "nodes", "--server", f"ws://{a.host}:{a.port}"], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    for name, node in zip("abc", cluster):
        assert rows[name]["id"] in out.stdout and f"{node.host}:{node.port}" in out.stdout
    assert "3 nodes on Redis" in out.stdout
    conns = subprocess.run([CLIENT, "admin", "connections", "--server", f"ws://{b.host}:{b.port}"], capture_output=True,
                           text=True, timeout=20)
    assert conns.returncode == 0 and "NODE" in conns.stdout and rows["b"]["id"] in conns.stdout, conns.stdout
    # /metrics: the Redis round trip, and every node's lag, connections and beat age.
    text = requests.get(base(a) + "/metrics", timeout=10).text
    assert "presence_cluster_redis_round_trip_seconds_bucket" in text and "presence_cluster_redis_round_trip_seconds_count" in text
    for name in "abc":
        node_id = rows[name]["id"]
        assert f'presence_cluster_node_lag_revisions{{node="{node_id}"}}' in text
        assert f'presence_cluster_node_beat_age_seconds{{node="{node_id}"}}' in text
    assert f'presence_cluster_node_connections{{node="{rows["b"]["id"]}"}} 2' in text
    # A graceful stop leaves the list at once; a killed node turns silent after the lease.
    b.stop()
    c.kill()
    wait_until(lambda: "b" not in {row["name"] for row in nodes_of(a)["nodes"]}, 10, "b to leave the list")
    silent = wait_until(lambda: [row for row in nodes_of(a)["nodes"] if row["name"] == "c" and row["state"] == "silent"], 15,
                        "c to show silent")
    assert silent[0]["beatAgeMs"] > 5000


def test_a_kick_sent_to_one_node_closes_the_connection_on_another(cluster):
    a, _, c = cluster
    watcher = watch(a, "kim")
    kim = c.client()
    online(kim, "kim")
    wait_presence(watcher, "kim", lambda v: v and v.get("online") is True, 15)
    wait_until(lambda: all(row["state"] == "alive" for row in nodes_of(a)["nodes"]) and len(nodes_of(a)["nodes"]) == 3, 15,
               "every node alive in a's list")
    c_id = next(row["id"] for row in nodes_of(a)["nodes"] if row["name"] == "c")
    kicked = requests.post(base(a) + f"/.admin/connections/{kim.session}/close", headers=OWNER,
                           data=json.dumps({"reason": "spam"}), timeout=10)
    # Node c answered that it closed it.
    assert kicked.status_code == 200 and kicked.json() == {"closed": True, "node": c_id}, kicked.text
    assert close_code(kim, timeout=10) == 4002
    # Its onDisconnect ops run as for any disconnect: offline on the other node after the grace.
    wait_presence(watcher, "kim", lambda v: v and v.get("online") is False, 20)
    assert "through node a#" in c.read_log()
    # A session that is nowhere: every live node said "not here", so 404; nothing happens anywhere.
    other = a.client()
    nowhere = requests.post(base(c) + "/.admin/connections/nosuchsession/close", headers=OWNER, timeout=10)
    assert nowhere.status_code == 404 and "no such session on any node" in nowhere.text, nowhere.text
    online(other, "olga")  # the connections elsewhere are untouched
    # The CLI says where the kick went.
    bob = c.client()
    out = subprocess.run([CLIENT, "admin", "kick", bob.session, "--server", f"ws://{a.host}:{a.port}"], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0 and f"closed {bob.session} on node {c_id}" in out.stdout, out
    assert close_code(bob, timeout=10) == 4002
    out = subprocess.run([CLIENT, "admin", "kick", "nosuchsession", "--server", f"ws://{a.host}:{a.port}"], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 3 and "no such session on any node" in out.stderr, out



def test_the_dashboard_shows_the_nodes_and_the_node_of_each_connection(browser, cluster):
    a, b, c = cluster
    alice = b.client()
    online(alice, "alice")
    carl = c.client()
    online(carl, "carl")
    open_dashboard(browser, b)

    def node_rows():
        found = {}
        for tr in browser.find_elements("css selector", "#node-rows tr[data-node]"):
            found[tr.find_element("css selector", "td.node").text.split(" ")[0]] = {
                cls: tr.find_element("css selector", "td." + cls).text for cls in ("address", "conns", "lag", "beat")}
        return found if set(found) == {"a", "b", "c"} else None
    rows = dashboard_wait(node_rows, "the three nodes on the dashboard")
    assert browser.find_element("id", "nodes-panel").is_displayed()
    assert rows["b"]["address"] == f"{b.host}:{b.port}" and rows["b"]["conns"] == "1" and rows["b"]["lag"].isdigit()
    assert "(this node)" in browser.find_element("css selector", "#node-rows tr.self td.node").text
    row = dashboard_wait(lambda: browser.find_elements("css selector", f'#rows tr[data-session="{alice.session}"]'),
                         "alice's connection")[0]
    node = row.find_element("css selector", "td.node")
    assert node.text == "b" and node.get_attribute("title").startswith("b#")
    # The listing is the cluster's: carl, connected to c, shows on b's dashboard with his node.
    row = dashboard_wait(lambda: browser.find_elements("css selector", f'#rows tr[data-session="{carl.session}"]'),
                         "carl's connection, on node c")[0]
    node = row.find_element("css selector", "td.node")
    assert node.text == "c" and node.get_attribute("title").startswith("c#")
    dashboard_wait(lambda: "3 nodes" in browser.find_element("id", "shown").text, "the listing's three nodes")
    os.makedirs(OUTPUT, exist_ok=True)
    browser.save_screenshot(os.path.join(OUTPUT, "dashboard-cluster.png"))
    assert not severe_console_errors(browser)


def dashboard_wait(predicate, what):
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            found = predicate()
            if found:
                return found
        except Exception:  # noqa: BLE001 - a row replaced between lookups
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_single_node_lists_itself_and_a_kick_of_an_unknown_session_is_not_found():
    from conftest import Server
    node = Server("--rules", "open")
    try:
        client = node.client()
        view = nodes_of(node)
        assert view["cluster"] is False and len(view["nodes"]) == 1 and view["nodes"][0]["connections"] == 1
        listing = requests.get(base(node) + "/.admin/connections", headers=OWNER, timeout=10).json()
        assert listing["node"] is None and listing["connections"][0]["node"] is None
        assert requests.post(base(node) + "/.admin/connections/nosuchsession/close", headers=OWNER, timeout=10).status_code == 404
        out = subprocess.run([CLIENT, "admin", "nodes", "--server", f"ws://{node.host}:{node.port}"], capture_output=True, text=True,
                             timeout=20)
        assert out.returncode == 0 and "single node" in out.stdout, out
        client.close()
    finally:
        node.stop()
