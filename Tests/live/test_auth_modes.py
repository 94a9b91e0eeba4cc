"""Each auth mode accepts a good token and rejects a forged one; expiry on a live socket pushes ac."""
import base64
import hashlib
import hmac
import json
import subprocess
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from conftest import CLIENT, Server, run_client


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(header, claims, sign):
    signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(sign(signing_input.encode()))


def hs256(secret, claims):
    return jwt({"alg": "HS256", "typ": "JWT"}, claims, lambda data: hmac.new(secret, data, hashlib.sha256).digest())


def claims(uid, ttl=3600, **extra):
    now = int(time.time())
    return {"sub": uid, "iat": now, "exp": now + ttl, "firebase": {"sign_in_provider": "password"}, **extra}


@pytest.fixture
def hs256_server(tmp_path):
    secret = b"0123456789abcdef0123456789abcdef-test-secret"
    (tmp_path / "secret").write_bytes(secret)
    (tmp_path / "admin").write_text("admin-token-for-tests\n")
    server = Server("--rules", "open", "--auth", "hs256", "--secret-file", str(tmp_path / "secret"),
                    "--admin-token-file", str(tmp_path / "admin"))
    yield server, secret
    assert server.alive()
    server.stop()


def test_hs256_accepts_good_tokens_and_rejects_forged_expired_and_unsigned(hs256_server):
    server, secret = hs256_server
    client = server.client()
    ok = client.call("auth", {"cred": hs256(secret, claims("alice"))})
    assert ok["s"] == "ok" and ok["d"]["auth"]["uid"] == "alice" and ok["d"]["auth"]["provider"] == "password"
    forged = client.call("auth", {"cred": hs256(b"another secret that is long enough!!", claims("alice"))})
    assert forged["s"] == "invalid_token" and "signature" in forged["d"]
    expired = client.call("auth", {"cred": hs256(secret, claims("alice", ttl=-10))})
    assert expired["s"] == "expired_token"
    unsigned = client.call("auth", {"cred": jwt({"alg": "none"}, claims("alice"), lambda _: b"")})
    assert unsigned["s"] == "invalid_token"
    # `owner` is only the emulator's admin; here the admin credential comes from the file.
    assert client.call("gauth", {"cred": "owner"})["s"] == "invalid_token"
    assert client.call("gauth", {"cred": "admin-token-for-tests"})["s"] == "ok"


def test_token_expiry_on_a_live_socket_pushes_ac_and_drops_auth(hs256_server, tmp_path):
    server, secret = hs256_server
    client = server.client()
    assert client.call("auth", {"cred": hs256(secret, claims("alice", ttl=2))})["s"] == "ok"
    revoked = client.wait_for(lambda m: m.get("t") == "d" and m["d"].get("a") == "ac", timeout=6)
    assert revoked["d"]["b"] == {"s": "expired_token", "d": "Auth token is expired."}


@pytest.fixture
def firebase_keys(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=securetoken.test"], check=True, capture_output=True)
    (tmp_path / "keys.json").write_text(json.dumps({"kid-1": cert.read_text()}))
    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    return tmp_path / "keys.json", private


def rs256(private, kid, claims_):
    return jwt({"alg": "RS256", "kid": kid, "typ": "JWT"}, claims_,
               lambda data: private.sign(data, padding.PKCS1v15(), hashes.SHA256()))


def test_firebase_mode_checks_signature_issuer_and_audience(firebase_keys):
    keys, private = firebase_keys
    server = Server("--rules", "open", "--auth", "firebase", "--project-id", "demo-app", "--firebase-keys", str(keys))
    try:
        good = claims("alice", iss="https://securetoken.google.com/demo-app", aud="demo-app", auth_time=int(time.time()) - 5)
        client = server.client()
        ok = client.call("auth", {"cred": rs256(private, "kid-1", good)})
        assert ok["s"] == "ok" and ok["d"]["auth"]["uid"] == "alice"
        assert client.call("auth", {"cred": rs256(private, "unknown-kid", good)})["s"] == "invalid_token"
        assert client.call("auth", {"cred": rs256(private, "kid-1", {**good, "aud": "other"})})["s"] == "invalid_token"
        assert client.call("auth", {"cred": rs256(private, "kid-1", {**good, "iss": "https://evil"})})["s"] == "invalid_token"
        token = rs256(private, "kid-1", good)
        head, payload, signature = token.split(".")
        tampered = head + "." + b64(json.dumps({**good, "sub": "mallory"}).encode()) + "." + signature
        assert client.call("auth", {"cred": tampered})["s"] == "invalid_token"
    finally:
        assert server.alive()
        server.stop()


def test_flood_of_bad_tokens_does_not_disturb_other_clients(hs256_server):
    server, secret = hs256_server
    bad = server.client()
    good = server.client()
    assert good.call("auth", {"cred": hs256(secret, claims("bob"))})["s"] == "ok"
    for i in range(300):
        bad.request("auth", {"cred": "x" * (i % 50) + ".garbage." + "y" * 10})
    assert good.call("p", {"p": "/still", "d": "fine"})["s"] == "ok"
    replies = [bad.reply(r) for r in range(1, 301)]
    assert all(reply["s"] == "invalid_token" for reply in replies)


def test_presence_client_token_mints_what_the_hs256_server_accepts(hs256_server, tmp_path):
    server, secret = hs256_server
    client_binary = CLIENT
    (tmp_path / "client-secret").write_bytes(secret)
    minted = run_client([client_binary, "token", "--uid", "carol", "--secret-file", str(tmp_path / "client-secret"),
                        "--claim", "subscription=lite", "--ttl", "10m"], timeout=10)
    assert minted.returncode == 0, minted.stderr
    client = server.client()
    reply = client.call("auth", {"cred": minted.stdout.strip()})
    assert reply["s"] == "ok"
    assert reply["d"]["auth"]["uid"] == "carol" and reply["d"]["auth"]["token"]["subscription"] == "lite"
    bad = run_client([client_binary, "token", "--uid", "carol", "--secret-file", str(tmp_path / "missing")], timeout=10)
    assert bad.returncode != 0 and "missing" in bad.stderr


def test_stream_gets_auth_revoked_when_its_token_expires(hs256_server):
    import requests
    from test_streaming import Stream
    server, secret = hs256_server
    token = hs256(secret, claims("alice", ttl=2))
    stream = Stream(f"http://{server.host}:{server.port}/room.json", {"ns": "demo", "auth": token})
    assert stream.wait(1)[0][0] == "put"
    events = stream.wait(2, timeout=6)
    assert events[1] == ("auth_revoked", "credential is no longer valid")
    assert stream.ended.wait(5)


def test_sighup_reloads_rotated_firebase_keys(firebase_keys, tmp_path):
    """Google rotates its signing keys: a new kid in the keys file is picked up on SIGHUP, without a
    restart, and a keys file that does not load leaves the previous keys in force."""
    import signal
    keys, private = firebase_keys
    server = Server("--rules", "open", "--auth", "firebase", "--project-id", "demo-app", "--firebase-keys", str(keys))
    try:
        good = claims("alice", iss="https://securetoken.google.com/demo-app", aud="demo-app", auth_time=int(time.time()) - 5)
        client = server.client()
        rotated = rs256(private, "kid-2", good)
        assert client.call("auth", {"cred": rotated})["s"] == "invalid_token"  # kid-2 is unknown yet
        keys.write_text("{ not json")
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert client.call("auth", {"cred": rs256(private, "kid-1", good)})["s"] == "ok"  # old keys stay
        cert = (tmp_path / "cert.pem").read_text()
        keys.write_text(json.dumps({"kid-1": cert, "kid-2": cert}))
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while client.call("auth", {"cred": rotated})["s"] != "ok":
            assert time.time() < deadline, "the rotated key was not picked up"
            time.sleep(0.1)
    finally:
        assert server.alive()
        server.stop()
    assert "token keys not reloaded, the previous ones stay in force" in server.stderr
    assert "token keys and credentials reloaded" in server.stderr
