"""The deployed shape of a cluster (issue 14, deploy/, docs/scaling.md "Deploying a cluster"):
three nodes on one real redis-server behind a real nginx running deploy/nginx-cluster.conf as
shipped, with only its addresses changed to loopback ports. Clients speak to the balancer alone:
WebSockets, REST, event streams and the operator API work through it, a reconnect after a node is
killed lands on a survivor and takes its session over (nobody shows offline), and the hello's host
is the balancer's, port included (the Firebase SDKs reconnect to it)."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import PRESENCE_RULES, Client, Server
from test_cluster import REDIS, assert_never_offline, free_port, online, redis, wait_presence, watch  # noqa: F401 - fixtures
from test_cluster_ops import OWNER
from test_streaming import Stream

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
DEPLOY = os.path.join(os.path.dirname(__file__), "..", "..", "deploy")

pytestmark = [pytest.mark.skipif(REDIS is None, reason="redis-server is not installed (scripts/install-deps.sh)"),
              pytest.mark.skipif(NGINX is None, reason="nginx is not installed (scripts/install-deps.sh)")]


class Balancer:
    """nginx in the foreground with deploy/nginx-cluster.conf, its upstreams and port on loopback."""

    def __init__(self, nodes):
        self.dir = tempfile.mkdtemp(prefix="presence-nginx-")
        self.port = free_port()
        with open(os.path.join(DEPLOY, "nginx-cluster.conf")) as f:
            site = f.read()
        ports = iter(node.port for node in nodes)
        site = re.sub(r"server\s+node\d:\d+", lambda _: f"server 127.0.0.1:{next(ports)}", site)
        assert next(ports, None) is None, "the shipped upstream does not list three nodes"
        site = re.sub(r"(?m)^\s*listen \[::\]:8080;\n", "", site)
        site = re.sub(r"(?m)^(\s*)listen 8080;", rf"\1listen 127.0.0.1:{self.port};", site)
        temp = "\n".join(f"  {kind}_temp_path {self.dir}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # As root, nginx's workers would run as nobody, who may not enter the temporary directory.
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(os.path.join(self.dir, "site.conf"), "w") as f:
            f.write(site)
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(f"{user}daemon off;\nworker_processes 1;\npid {self.dir}/nginx.pid;\nerror_log {self.dir}/error.log;\n"
                    f"events {{}}\nhttp {{\n  access_log {self.dir}/access.log;\n{temp}\n  include {self.dir}/site.conf;\n}}\n")
        args = [NGINX, "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf"), "-e", os.path.join(self.dir, "error.log")]
        if os.path.exists("/usr/bin/setpriv"):  # dies with the test process
            args = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] + args
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 20
        while True:
            try:
                if requests.get(self.base + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert self.proc.poll() is None and time.time() < deadline, f"nginx did not start: {self.error_log()}"
            time.sleep(0.05)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def client(self, ns="demo", **params):
        query = "&".join(f"{k}={v}" for k, v in {"v": "5", "ns": ns, **params}.items())
        return Client(f"ws://127.0.0.1:{self.port}/.ws?{query}")

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def balanced(redis):  # noqa: F811
    nodes = [Server("--storage", "redis", "--redis", redis.address, "--node-id", name, "--rules", PRESENCE_RULES)
             for name in ("a", "b", "c")]
    balancer = Balancer(nodes)
    yield balancer, nodes
    balancer.stop()
    for node in nodes:
        node.stop()


def connections(balancer):
    answer = requests.get(balancer.base + "/.admin/connections", headers=OWNER, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["connections"]


def node_of(balancer, session, timeout=10):
    """The id (without its incarnation) of the node holding `session`, from the cluster-wide
    listing through the balancer (a node that missed the gather's wait is asked again)."""
    deadline = time.time() + timeout
    while True:
        rows = connections(balancer)
        held = [row["node"].split("#")[0] for row in rows if row["session"] == session]
        if held:
            return held[0]
        assert time.time() < deadline, f"session {session} is in no listing: {rows}"
        time.sleep(0.2)


def test_clients_of_the_balancer_are_spread_over_the_nodes_and_see_one_database(balanced):
    balancer, nodes = balanced
    # The hello's host is where the client connected: the balancer, with its port.
    watcher = watch(balancer, "ada")
    assert watcher.hello["h"] == f"127.0.0.1:{balancer.port}", watcher.hello
    stream = Stream(balancer.base + "/users/ada/presence.json", {"ns": "demo"}, headers=OWNER)
    assert stream.wait(1, timeout=15)[0][0] == "put"
    others = [balancer.client() for _ in range(5)]
    ada = balancer.client()
    online(ada, "ada")
    wait_presence(watcher, "ada", lambda v: v and v.get("online") is True, 15)
    # least_conn spread the six WebSockets over more than one node; the listing through the
    # balancer (any node answers for the cluster) names each connection's node.
    listed = connections(balancer)
    assert len(listed) >= 7 and len({c["node"] for c in listed}) >= 2, listed
    # REST and the event stream through the balancer see the same write.
    value = requests.get(balancer.base + "/users/ada/presence.json", params={"ns": "demo"}, headers=OWNER, timeout=10).json()
    assert value["online"] is True and isinstance(value["lastSeen"], (int, float))
    deadline = time.time() + 15
    while not any('"online":true' in data.replace(" ", "") for _, data in stream.events) and time.time() < deadline:
        time.sleep(0.05)
    assert any('"online":true' in data.replace(" ", "") for _, data in stream.events), stream.events
    stream.close()
    for client in others + [ada, watcher]:
        client.close()
    assert all(node.alive() for node in nodes)


def test_a_user_whose_node_is_killed_reconnects_through_the_balancer_and_never_shows_offline(balanced):
    balancer, nodes = balanced
    watcher = watch(balancer, "bea")
    bea = balancer.client()
    online(bea, "bea")
    wait_presence(watcher, "bea", lambda v: v and v.get("online") is True, 15)
    holder = node_of(balancer, bea.session)
    victim = next(node for node, name in zip(nodes, "abc") if name == holder)
    survivors = [node for node in nodes if node is not victim]
    if node_of(balancer, watcher.session) == holder:
        # Both landed on one node: watch again from a survivor, so the watcher outlives the kill.
        watcher = watch(survivors[0], "bea")
    victim.kill()
    # As an SDK does: the socket is gone, so connect again to the same address with the last session.
    back = balancer.client(ls=bea.session)
    online(back, "bea")
    # Past the lease, the reap and the grace: the dead node's session was taken over, not run.
    assert_never_offline(watcher, "bea", 12)
    assert back.call("g", {"p": "/users/bea/presence"}, timeout=15)["d"]["online"] is True
    assert node_of(balancer, back.session) != holder
    assert all(node.alive() for node in survivors)
