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


def test_compose_file_parses_with_two_nodes_and_redis():
    yaml = pytest.importorskip("yaml")  # PyYAML
    compose = yaml.safe_load(read("compose.yaml"))
    services = compose["services"]
    assert {"node1", "node2", "redis"} <= set(services)
    for node in ("node1", "node2"):
        service = services[node]
        assert service["build"]["dockerfile"] == "deploy/Containerfile"
        assert service["ulimits"]["nofile"]["soft"] == 1048576
        assert any(v.endswith(":/var/lib/presence") for v in service["volumes"])
    assert services["node1"]["volumes"][0] != services["node2"]["volumes"][0]  # one data dir each
    assert "NOT IMPLEMENTED YET" in read("compose.yaml")
    # The secrets the nodes get are the files the image's configuration names.
    config = json.loads(read("presence.compose.json"))
    for secret in compose["secrets"]:
        assert f"/run/secrets/{secret}" in config.values()


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
    (tmp_path / "presence.conf").write_text(site)
    temp = "\n".join(f"  {kind}_temp_path {tmp_path}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n  access_log {tmp_path}/access.log;\n{temp}\n  include {tmp_path}/presence.conf;\n}}\n")
    result = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0, result.stderr
