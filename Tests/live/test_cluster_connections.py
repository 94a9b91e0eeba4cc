"""The cluster-wide /.admin/connections (issue 14, docs/scaling.md "Operators"): asked on any of
three nodes on a real Redis, it lists every live node's connections with their node, pages across
nodes, names a killed node as not answering until its lease runs out (then as silent), and a kick
of a session held by no node is answered 404 once every live node said so."""
import subprocess
import time

import pytest
import requests

from test_cluster import REDIS, cluster, online, redis  # noqa: F401 - fixtures
from test_cluster_ops import CLIENT, OWNER, base, nodes_of, wait_until

pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)")


def listing(node, **query):
    answer = requests.get(base(node) + "/.admin/connections", params=query, headers=OWNER, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def every_page(node, limit, **query):
    rows, cursor, pages = [], None, 0
    while True:
        page = listing(node, limit=limit, **({"cursor": cursor} if cursor else {}), **query)
        rows += page["connections"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            return rows, pages
        assert pages < 20, "the cursor does not advance"


def test_every_node_lists_the_connections_of_every_node_with_their_node(cluster):
    a, b, c = cluster
    held = {"a": [a.client()], "b": [b.client(), b.client()], "c": [c.client()]}
    for name, clients in held.items():
        for index, client in enumerate(clients):
            online(client, f"{name}{index}")
    wait_until(lambda: len(nodes_of(a)["nodes"]) == 3 and all(r["state"] == "alive" for r in nodes_of(a)["nodes"]), 15,
               "three live nodes")
    ids = {row["name"]: row["id"] for row in nodes_of(a)["nodes"]}
    expected = {client.session: ids[name] for name, clients in held.items() for client in clients}
    for node in cluster:
        # Each node waits for the nodes alive in its own list (at most a beat old).
        view = wait_until(lambda: (lambda v: v if {r["session"]: r["node"] for r in v["connections"]} == expected else None)(
            listing(node)), 15, f"every connection listed on {node.port}")
        assert view["cluster"] is True and view["missing"] == [] and view["total"] == 4 and view["nextCursor"] is None
        assert {entry["id"]: entry["connections"] for entry in view["nodes"]} == {ids["a"]: 1, ids["b"]: 2, ids["c"]: 1}
    # Paged one at a time from c: every connection once, ordered by node, then by connection.
    rows, pages = every_page(c, 1)
    assert len(rows) == 4 and pages == 4 and {row["session"] for row in rows} == set(expected)
    assert [row["node"] for row in rows] == sorted(expected.values())
    # Filters reach every node: b1 is on b, asked on a.
    only = listing(a, uid="b1")
    assert [row["session"] for row in only["connections"]] == [held["b"][1].session] and only["total"] == 1
    assert requests.get(base(a) + "/.admin/connections?cursor=nonsense", headers=OWNER, timeout=10).status_code == 400
    # The CLI asked on a shows c's connection with its node.
    out = subprocess.run([CLIENT, "admin", "connections", "--server", f"ws://{a.host}:{a.port}"], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0 and held["c"][0].session in out.stdout and ids["c"] in out.stdout, out
    assert "4 connections" in out.stdout


def test_a_killed_node_is_named_as_not_answering_then_as_silent(cluster):
    a, b, c = cluster
    on_b, on_c = b.client(), c.client()
    online(on_b, "bea")
    online(on_c, "cid")
    wait_until(lambda: len(listing(a)["connections"]) == 2, 15, "both connections listed on a")
    c_id = next(row["id"] for row in nodes_of(a)["nodes"] if row["name"] == "c")
    c.kill()
    # Within its lease, c is still expected: the listing waits for it, then names it.
    view = listing(a)
    assert [row["session"] for row in view["connections"]] == [on_b.session]
    assert view["missing"] == [c_id] and c_id not in [entry["id"] for entry in view["nodes"]]
    # A kick of a session no answering node holds is not a "no": c might hold it.
    unsure = requests.post(base(a) + "/.admin/connections/nosuchsession/close", headers=OWNER, timeout=10)
    assert unsure.status_code == 202 and unsure.json()["missing"] == [c_id], unsure.text
    # Once c's lease has run out it is silent: not waited for, named as such.
    view = wait_until(lambda: (lambda v: v if c_id in v["silent"] else None)(listing(a)), 20, "c to turn silent")
    assert view["missing"] == [] and [row["session"] for row in view["connections"]] == [on_b.session]
    assert requests.post(base(a) + "/.admin/connections/nosuchsession/close", headers=OWNER, timeout=10).status_code == 404
    # scope=node still answers for the node asked alone.
    assert listing(b, scope="node")["connections"][0]["session"] == on_b.session
