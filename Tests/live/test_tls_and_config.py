"""TLS (wss:// and https:// on the same port, certificate reload on SIGHUP, clear start-up errors),
the configuration file, and the production-safe defaults."""
import json
import os
import signal
import ssl
import subprocess
import time

import pytest
import requests
import websocket

from conftest import CLIENT, SERVER, Server, run_client, unsigned_token


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    """A throwaway CA and a server certificate for 127.0.0.1 / localhost, made at test time."""
    d = str(tmp_path)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
            "-subj", "/CN=presence test CA", cwd=d)

    def issue(name, serial):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", "/CN=localhost", cwd=d)
        (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", str(serial),
                "-out", f"{name}.pem", "-days", "1", "-extfile", "san.ext", cwd=d)
        return tmp_path / f"{name}.pem", tmp_path / f"{name}.key"

    return tmp_path, issue


def wss(server, ca, **params):
    query = "&".join(["v=5", "ns=demo"] + [f"{k}={v}" for k, v in params.items()])
    return websocket.create_connection(f"wss://{server.host}:{server.port}/.ws?{query}", timeout=5,
                                       sslopt={"ca_certs": str(ca), "check_hostname": False})


def test_presence_flow_over_wss_and_https_and_untrusted_clients_are_refused(pki):
    tmp, issue = pki
    cert, key = issue("server", 1)
    server = Server("--rules", "open", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        ws = wss(server, tmp / "ca.pem")
        hello = json.loads(ws.recv())
        assert hello["d"]["t"] == "h"
        ws.send(json.dumps({"t": "d", "d": {"r": 1, "a": "auth", "b": {"cred": unsigned_token("alice")}}}))
        ws.send(json.dumps({"t": "d", "d": {"r": 2, "a": "p", "b": {"p": "/users/alice/presence", "d": {"online": True}}}}))
        replies = [json.loads(ws.recv()) for _ in range(2)]
        assert all(r["d"]["b"]["s"] == "ok" for r in replies)
        https = requests.get(f"https://{server.host}:{server.port}/users/alice/presence.json", params={"ns": "demo"},
                             verify=str(tmp / "ca.pem"), timeout=5)
        assert https.status_code == 200 and https.json() == {"online": True}
        # A client that does not trust the CA refuses the connection.
        with pytest.raises(ssl.SSLError):
            websocket.create_connection(f"wss://{server.host}:{server.port}/.ws?v=5&ns=demo", timeout=5)
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(f"https://{server.host}:{server.port}/healthz", timeout=5)
        # TLS 1.1 is refused; plain ws:// on the TLS port gets nowhere.
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.check_hostname = False
        old.verify_mode = ssl.CERT_NONE
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises(Exception):
            websocket.create_connection(f"wss://{server.host}:{server.port}/.ws?v=5", timeout=5, sslopt={"context": old})
        with pytest.raises(Exception):
            plain = websocket.create_connection(f"ws://{server.host}:{server.port}/.ws?v=5", timeout=3)
            plain.recv()
        ws.close()
    finally:
        assert server.alive()
        server.stop()


def test_sighup_reloads_the_certificate_without_dropping_connections(pki):
    tmp, issue = pki
    cert, key = issue("server", 1)
    server = Server("--rules", "open", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        before = wss(server, tmp / "ca.pem")
        before.recv()
        first_serial = before.sock.getpeercert()["serialNumber"]
        renewed_cert, renewed_key = issue("renewed", 2)
        os.replace(renewed_cert, cert)
        os.replace(renewed_key, key)
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        after = wss(server, tmp / "ca.pem")
        after.recv()
        assert after.sock.getpeercert()["serialNumber"] != first_serial
        # The connection made before the reload is still up.
        before.send(json.dumps({"t": "c", "d": {"t": "p", "d": {}}}))
        assert json.loads(before.recv()) == {"t": "c", "d": {"t": "o", "d": {}}}
    finally:
        assert server.alive()
        server.stop()
    assert "TLS certificate reloaded" in server.stderr


def test_bad_certificates_are_clear_start_up_errors(pki, tmp_path):
    _, issue = pki
    cert, key = issue("server", 1)
    _, other_key = issue("other", 3)
    missing = subprocess.run([SERVER, "--port", "0", "--storage", "memory", "--tls-cert", str(cert), "--tls-key", "/nope.key"],
                             capture_output=True, text=True, timeout=15)
    assert missing.returncode != 0 and "/nope.key" in missing.stderr
    mismatched = subprocess.run([SERVER, "--port", "0", "--storage", "memory", "--tls-cert", str(cert), "--tls-key", str(other_key)],
                                capture_output=True, text=True, timeout=15)
    assert mismatched.returncode != 0 and "TLS" in mismatched.stderr
    alone = subprocess.run([SERVER, "--port", "0", "--tls-cert", str(cert)], capture_output=True, text=True, timeout=15)
    assert alone.returncode != 0 and "--tls-key" in alone.stderr


def test_configuration_file_flags_override_and_unknown_keys_are_named(tmp_path):
    config = tmp_path / "presence.json"
    config.write_text(json.dumps({"port": 9000, "storage": "memory", "disconnect-grace": 1, "log-level": "warning"}))
    printed = subprocess.run([SERVER, "--config", str(config), "--port", "0", "--print-config"],
                             capture_output=True, text=True, timeout=10)
    effective = json.loads(printed.stdout)
    assert effective["port"] == 0 and effective["storage"] == "memory" and effective["disconnect-grace"] == 1
    help_text = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=10).stdout
    assert all(f"--{key}" in help_text for key in effective), "every configuration key is a documented flag"
    server = Server("--config", str(config))
    try:
        assert requests.get(f"http://{server.host}:{server.port}/healthz", timeout=5).status_code == 200
    finally:
        server.stop()
    config.write_text(json.dumps({"prot": 1}))
    unknown = subprocess.run([SERVER, "--config", str(config)], capture_output=True, text=True, timeout=10)
    assert unknown.returncode != 0 and '"prot"' in unknown.stderr
    config.write_text(json.dumps({"port": "nine"}))
    bad = subprocess.run([SERVER, "--config", str(config)], capture_output=True, text=True, timeout=10)
    assert bad.returncode != 0 and "--port" in bad.stderr


def test_production_defaults_outside_loopback(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 40)
    no_admin = subprocess.run([SERVER, "--host", "0.0.0.0", "--auth", "hs256", "--secret-file", str(secret), "--print-config"],
                              capture_output=True, text=True, timeout=10)
    assert no_admin.returncode != 0 and "--admin-token-file" in no_admin.stderr
    admin = tmp_path / "admin"
    admin.write_text("a-long-admin-token-value")
    printed = subprocess.run([SERVER, "--host", "0.0.0.0", "--auth", "hs256", "--secret-file", str(secret),
                              "--admin-token-file", str(admin), "--print-config"], capture_output=True, text=True, timeout=10)
    effective = json.loads(printed.stdout)
    assert effective["max-connections-per-address"] == 1000 and effective["max-connection-rate"] == 50


def test_connections_per_address_limit_refuses_with_429():
    server = Server("--rules", "open", "--max-connections-per-address", "2")
    try:
        first, second = server.client(), server.client()
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            server.client()
        assert refused.value.status_code == 429
        first.close()
        time.sleep(0.3)
        server.client()  # a slot is free again
        assert second.call("s", {})["s"] == "ok"
    finally:
        assert server.alive()
        server.stop()


def test_presence_client_verifies_the_server_certificate(pki):
    tmp, issue = pki
    cert, key = issue("server", 1)
    client = CLIENT
    server = Server("--rules", "open", "--tls-cert", str(cert), "--tls-key", str(key))
    url = f"wss://127.0.0.1:{server.port}"
    try:
        stored = run_client([client, "set", "tls/check", '"secure"', "--server", url, "--ns", "demo", "--admin",
                            "--ca-file", str(tmp / "ca.pem")], timeout=20)
        assert stored.returncode == 0, stored.stderr
        read = run_client([client, "get", "tls/check", "--server", url, "--ns", "demo", "--admin",
                          "--ca-file", str(tmp / "ca.pem")], timeout=20)
        assert read.returncode == 0 and json.loads(read.stdout) == "secure"
        untrusted = run_client([client, "get", "tls/check", "--server", url, "--ns", "demo", "--admin"], timeout=30)
        assert untrusted.returncode != 0
        skipped = run_client([client, "get", "tls/check", "--server", url, "--ns", "demo", "--admin",
                             "--insecure-skip-verify"], timeout=20)
        assert skipped.returncode == 0 and json.loads(skipped.stdout) == "secure"
    finally:
        assert server.alive()
        server.stop()


def test_trusted_proxy_forwarded_for_names_the_client_for_limits_and_operators():
    """Behind nginx every client arrives from the proxy's address: with --trusted-proxies the
    per-address limits count X-Forwarded-For's client instead, and nobody else can forge it."""
    import websocket
    import requests
    from conftest import Server
    server = Server("--rules", "open", "--storage", "memory", "--trusted-proxies", "127.0.0.1",
                    "--max-connections-per-address", "2")
    url = server.url()

    def connect(forwarded):
        return websocket.create_connection(url, timeout=5, header=[f"X-Forwarded-For: {forwarded}"])

    try:
        held = [connect("203.0.113.5"), connect("198.51.100.7, 203.0.113.5")]  # the proxy appends the client
        try:
            connect("203.0.113.5")
            raise AssertionError("a third connection from the same client was admitted")
        except websocket.WebSocketBadStatusException as refused:
            assert refused.status_code == 429
        held.append(connect("203.0.113.6"))  # another client behind the same proxy
        listed = requests.get(f"http://{server.host}:{server.port}/.admin/connections",
                              headers={"Authorization": "Bearer owner"}, timeout=5).json()
        rows = listed["connections"] if isinstance(listed, dict) else listed
        assert sorted(c["remote"] for c in rows) == ["203.0.113.5", "203.0.113.5", "203.0.113.6"], rows
        for ws in held:
            ws.close()
    finally:
        server.stop()
    # Without the flag, a client cannot pick its address with the header.
    untrusted = Server("--rules", "open", "--storage", "memory", "--max-connections-per-address", "1")
    try:
        first = websocket.create_connection(untrusted.url(), timeout=5, header=["X-Forwarded-For: 203.0.113.9"])
        try:
            websocket.create_connection(untrusted.url(), timeout=5, header=["X-Forwarded-For: 203.0.113.10"])
            raise AssertionError("a forged X-Forwarded-For got around the limit")
        except websocket.WebSocketBadStatusException as refused:
            assert refused.status_code == 429
        first.close()
    finally:
        untrusted.stop()
