"""The deployment material in deploy/: the systemd unit verifies, the sample configurations are
accepted by the server (so they cannot drift from its flags), the container and compose files
parse, and the nginx example has what WebSockets and streams need (and passes nginx -t when nginx
is installed). Fast: no container is built and no service started."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, SERVER

DEPLOY = os.path.join(ROOT, "deploy")
UNIT = os.path.join(DEPLOY, "presence-server.service")
CONFIGS = ["presence.json", "presence.compose.json"]


def read(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return f.read()


def help_flags():
    out = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=10).stdout
    return set(re.findall(r"^\s+--([a-z0-9-]+)", out, re.M))


# ---- systemd --------------------------------------------------------------------------------

def unit_settings():
    settings = {}
    for line in read("presence-server.service").splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_unit_has_the_sandbox_and_graceful_stop():
    s = unit_settings()
    assert s["ExecStart"] == ["/usr/local/bin/presence-server --config /etc/presence/presence.json"]
    assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    for key, value in {"DynamicUser": "yes", "StateDirectory": "presence", "ProtectSystem": "strict",
                       "ProtectHome": "yes", "PrivateTmp": "yes", "NoNewPrivileges": "yes",
                       "CapabilityBoundingSet": "", "LimitNOFILE": "1048576", "KillSignal": "SIGTERM",
                       "Restart": "on-failure",
                       "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"}.items():
        assert s.get(key) == [value], key
    # The stop timeout outlasts the disconnect grace window of the shipped configuration.
    grace = json.loads(read("presence.json"))["disconnect-grace"]
    assert int(s["TimeoutStopSec"][0]) > grace
    # The data directory is the state directory, and the secret the config names is the credential.
    config = json.loads(read("presence.json"))
    assert config["data-dir"] == "/var/lib/presence"
    credential = os.path.basename(config["admin-token-file"])
    assert config["admin-token-file"] == f"/run/credentials/presence-server.service/{credential}"
    assert any(v.startswith(credential + ":") for v in s["LoadCredential"])


def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed")
    # verify checks that ExecStart's binary exists: point a copy of the unit at the built one.
    unit = tmp_path / "presence-server.service"
    unit.write_text(read("presence-server.service").replace("/usr/local/bin/presence-server", os.path.abspath(SERVER)))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=30)
    # Complaints about the unit name it (lines about other units or the bus are not ours).
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "presence-server.service" in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr


# ---- the configuration files ----------------------------------------------------------------

@pytest.mark.parametrize("name", CONFIGS)
def test_config_keys_are_server_flags_and_the_server_accepts_it(name):
    config = json.loads(read(name))
    assert isinstance(config, dict)
    unknown = set(config) - help_flags()
    assert not unknown, f"{name}: keys that are not flags of presence-server --help: {sorted(unknown)}"
    # The server itself reads it (types, validation) and prints what it would run with.
    result = subprocess.run([SERVER, "--config", os.path.join(DEPLOY, name), "--print-config"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, result.stderr
    effective = json.loads(result.stdout)
    for key, value in config.items():
        assert effective[key] == value, key
    # Production settings: reachable from outside, real authentication, an admin credential.
    assert effective["host"] not in ("127.0.0.1", "localhost", "::1")
    assert effective["auth"] in ("firebase", "hs256") and effective["admin-token-file"]
    assert effective["storage"] == "sqlite" and effective["data-dir"] == "/var/lib/presence"
    assert not effective["insecure"]
    # The refresh limits ship beside the rules (the container copies rules/limits.json there).
    assert effective["limits"] == "/etc/presence/limits.json"


def test_production_config_serves_tls_with_firebase_auth():
    config = json.loads(read("presence.json"))
    assert config["auth"] == "firebase" and config["project-id"] and config["firebase-keys"]
    assert config["tls-cert"] and config["tls-key"]


# ---- container and compose ------------------------------------------------------------------

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"}


def containerfile_instructions():
    instructions, current = [], ""
    for line in read("Containerfile").splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        word, _, rest = current.strip().partition(" ")
        instructions.append((word.upper(), rest.strip()))
        current = ""
    assert not current, "the Containerfile ends inside a continued line"
    return instructions


def test_containerfile_parses_and_builds_in_two_stages():
    instructions = containerfile_instructions()
    for word, rest in instructions:
        assert word in INSTRUCTIONS, word
        if word in ("CMD", "ENTRYPOINT") and rest.startswith("["):
            json.loads(rest)
    stages = [rest.split() for word, rest in instructions if word == "FROM"]
    assert stages[0] == ["swift:6.3-bookworm", "AS", "build"]
    assert stages[-1][0] == "debian:bookworm-slim"
    names = {stage[2] for stage in stages if len(stage) == 3}
    for word, rest in instructions:
        match = re.match(r"--from=(\S+)", rest)
        if word == "COPY" and match:
            assert match.group(1) in names
    text = read("Containerfile")
    for package in ["libwebsockets-dev", "libssl-dev", "libsqlite3-dev", "pkg-config", "libwebsockets17",
                    "libwebsockets-evlib-uv", "libsqlite3-0", "libssl3"]:
        assert re.search(rf"\s{re.escape(package)}\s", text), package
    assert "swift build -c release" in text and "/usr/lib/swift/linux/*.so" in text
    words = dict(instructions)
    assert words["USER"].split(":")[0] not in ("root", "0")
    assert words["VOLUME"] == "/var/lib/presence" and words["EXPOSE"] == "9000"
    assert "/healthz" in words["HEALTHCHECK"]
    # Every file the build copies from the context is let through the ignore file.
    ignore = read("Containerfile.dockerignore")
    for word, rest in instructions:
        if word == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert f"!{source}" in ignore, source


def test_compose_file_runs_three_nodes_on_redis_behind_nginx():
    yaml = pytest.importorskip("yaml")  # PyYAML
    compose = yaml.safe_load(read("compose.yaml"))
    services = compose["services"]
    nodes = ["node1", "node2", "node3"]
    assert set(nodes + ["redis", "nginx"]) <= set(services)
    config = json.loads(read("presence.cluster.json"))
    redis = services["redis"]
    redis_ip = redis["networks"]["presence"]["ipv4_address"]
    # The nodes reach Redis by the numeric address the configuration names (names are refused).
    assert config["storage"] == "redis" and config["redis"] == f"{redis_ip}:6379"
    command = " ".join(redis["command"])
    for setting in ("--appendonly yes", "--appendfsync always", "--maxmemory-policy noeviction"):
        assert setting in command, setting
    ports, names = set(), set()
    for node in nodes:
        service = services[node]
        assert service["build"]["dockerfile"] == "deploy/Containerfile"
        assert service["ulimits"]["nofile"]["soft"] == 1048576
        assert service["stop_signal"] == "SIGTERM" and service["restart"] == "unless-stopped"
        assert "./presence.cluster.json:/etc/presence/presence.json:ro" in service["volumes"]
        flags = dict(zip(service["command"][0::2], service["command"][1::2]))
        assert flags["--config"] == "/etc/presence/presence.json"
        ports.add(flags["--port"])
        names.add(flags["--node-id"])
        # Each node remembers its namespaces' history on its own volume (a Redis that lost its
        # data is refused, not served as a new empty history).
        state = flags["--cluster-state"]
        mount = next(v for v in service["volumes"] if v.endswith(":" + os.path.dirname(state)))
        assert mount.split(":")[0] == f"{node}-state" and f"{node}-state" in compose["volumes"]
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert service["environment"]["PORT"] == flags["--port"]
        ip = service["networks"]["presence"]["ipv4_address"]
        assert ip.rsplit(".", 1)[0] == redis_ip.rsplit(".", 1)[0]
    assert len(ports) == 3 and len(names) == 3, "each node has its own port and name"
    # nginx balances over exactly these nodes and is the proxy the nodes trust.
    nginx = services["nginx"]
    assert "./nginx-cluster.conf:/etc/nginx/conf.d/default.conf:ro" in nginx["volumes"]
    assert config["trusted-proxies"] == nginx["networks"]["presence"]["ipv4_address"]
    upstream = re.search(r"upstream\s+presence_nodes\s*\{(.*?)\}", read("nginx-cluster.conf"), re.S).group(1)
    servers = set(re.findall(r"server\s+(\S+?)\s", upstream))
    assert servers == {f"{node}:{port}" for node, port in zip(nodes, sorted(ports))}
    # The secrets the nodes get are the files the configurations name.
    for name in ("presence.compose.json", "presence.cluster.json"):
        files = json.loads(read(name))
        for secret in compose["secrets"]:
            assert f"/run/secrets/{secret}" in files.values(), (name, secret)
    assert "NOT IMPLEMENTED" not in read("compose.yaml")


def test_cluster_config_is_accepted_by_the_server():
    config = json.loads(read("presence.cluster.json"))
    assert not set(config) - help_flags()
    result = subprocess.run([SERVER, "--config", os.path.join(DEPLOY, "presence.cluster.json"), "--print-config"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, result.stderr
    effective = json.loads(result.stdout)
    for key, value in config.items():
        assert effective[key] == value, key
    assert effective["auth"] in ("firebase", "hs256") and effective["admin-token-file"] and not effective["insecure"]
    # Fencing must come before the lease ends, and beats well within it.
    assert effective["node-beat"] < effective["fence-after"] < effective["node-lease"]


def test_cluster_unit_template_runs_one_node_per_port():
    text = read("presence-server@.service")
    exec_start = " ".join(line.strip().rstrip("\\") for line in text.split("ExecStart=", 1)[1].splitlines()[:2])
    assert "--config /etc/presence/cluster.json" in exec_start and "--port %i" in exec_start
    assert "--node-id %H-%i" in exec_start  # stable across restarts: a restart replaces its incarnation
    assert "--secret-file %d/hs256-secret" in exec_start and "--admin-token-file %d/admin-token" in exec_start
    assert re.search(r"(?m)^Restart=on-failure$", text), "a fenced node (exit 75) must be restarted"
    # ... however often it fences (a node that lost Redis for longer than --fence-after exits 75)
    assert re.search(r"(?m)^StartLimitIntervalSec=0$", text)
    assert re.search(r"(?m)^StateDirectory=presence-%i$", text)
    assert "--cluster-state ${STATE_DIRECTORY}/cluster-state.json" in " ".join(
        line.strip().rstrip("\\") for line in text.split("ExecStart=", 1)[1].splitlines()[:3])
    assert re.search(r"(?m)^After=.*redis-server\.service", text)


def test_systemd_analyze_verify_accepts_the_cluster_template(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed")
    text = read("presence-server@.service").replace("/usr/local/bin/presence-server", os.path.abspath(SERVER))
    (tmp_path / "presence-server@.service").write_text(text)
    instance = tmp_path / "presence-server@9001.service"
    instance.write_text(text)
    result = subprocess.run([analyze, "verify", str(instance)], capture_output=True, text=True, timeout=30)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "presence-server@" in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr


# ---- nginx ----------------------------------------------------------------------------------

def test_nginx_example_upgrades_websockets_and_does_not_buffer_streams():
    text = read("nginx.conf")
    assert "proxy_http_version 1.1;" in text
    assert re.search(r"proxy_set_header\s+Upgrade\s+\$http_upgrade;", text)
    assert re.search(r"proxy_set_header\s+Connection\s+\$connection_upgrade;", text)
    assert re.search(r"location\s+/\.ws\b", text) and re.search(r"location\s+/\.admin\b", text)
    assert "proxy_buffering off;" in text
    timeouts = [int(t) for t in re.findall(r"proxy_read_timeout\s+(\d+)s;", text)]
    assert timeouts and max(timeouts) >= 3600


def test_nginx_accepts_the_example(tmp_path):
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if not nginx:
        pytest.skip("nginx is not installed")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "key.pem", "-out", "cert.pem", "-days", "1", "-subj", "/CN=localhost"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=10)
    site = re.sub(r"(?m)^(\s*ssl_certificate)\s+\S+;", rf"\1 {tmp_path}/cert.pem;", read("nginx.conf"))
    site = re.sub(r"(?m)^(\s*ssl_certificate_key)\s+\S+;", rf"\1 {tmp_path}/key.pem;", site)
    nginx_test(nginx, tmp_path, site)


def nginx_test(nginx, tmp_path, site):
    """nginx -t on `site` inside a minimal main configuration whose paths all stay in tmp_path."""
    (tmp_path / "site.conf").write_text(site)
    temp = "\n".join(f"  {kind}_temp_path {tmp_path}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n  access_log {tmp_path}/access.log;\n{temp}\n  include {tmp_path}/site.conf;\n}}\n")
    result = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, result.stderr


def test_nginx_accepts_the_cluster_balancer(tmp_path):
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if not nginx:
        pytest.skip("nginx is not installed (apt-get install nginx-light to check deploy/nginx-cluster.conf)")
    # compose's service names do not resolve here: the same file on loopback ports.
    site = re.sub(r"server\s+node\d:", "server 127.0.0.1:", read("nginx-cluster.conf"))
    nginx_test(nginx, tmp_path, site)


def test_nginx_cluster_balancer_upgrades_websockets_and_keeps_the_host():
    text = read("nginx-cluster.conf")
    assert "proxy_http_version 1.1;" in text and "least_conn;" in text
    assert re.search(r"proxy_set_header\s+Upgrade\s+\$http_upgrade;", text)
    assert re.search(r"proxy_set_header\s+Connection\s+\$connection_upgrade;", text)
    assert re.search(r"proxy_set_header\s+Host\s+\$http_host;", text), "the hello's h must stay the balancer's host and port"
    assert re.search(r"location\s+/\.ws\s*\{[^}]*proxy_pass http://presence_nodes;", text)
    assert "proxy_next_upstream" in text
