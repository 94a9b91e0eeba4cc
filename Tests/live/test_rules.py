"""Rules files on the command line, at start-up, and reloaded on SIGHUP."""
import json
import os
import signal
import subprocess
import time

from conftest import PRESENCE_RULES, SERVER, Server


def test_rules_check_accepts_the_shipped_rules_and_names_the_error_otherwise(tmp_path):
    ok = subprocess.run([SERVER, "rules", "check", PRESENCE_RULES], capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.rules.json"
    bad.write_text('{"rules": {"users": {"$uid": {".write": "auth.uid == $uid && skies == 1"}}}}')
    result = subprocess.run([SERVER, "rules", "check", str(bad)], capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert str(bad) in result.stdout and "/rules/users/$uid/.write" in result.stdout and "skies" in result.stdout


def test_server_refuses_to_start_with_rules_that_do_not_load(tmp_path):
    bad = tmp_path / "bad.rules.json"
    bad.write_text('{"rules": {".read": 7}}')
    result = subprocess.run([SERVER, "--port", "0", "--rules", str(bad)], capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert str(bad) in result.stderr


def test_sighup_reload_revokes_listeners_and_a_bad_file_keeps_the_old_rules(tmp_path):
    rules = tmp_path / "live.rules.json"
    rules.write_text(json.dumps({"rules": {".read": "auth != null", ".write": "auth != null"}}))
    server = Server("--rules", str(rules))
    try:
        client = server.client()
        client.auth("alice")
        assert client.listen("/room") is None

        # A file that does not load: the running rules stay, the listener keeps working.
        rules.write_text('{"rules": {".read": "nonsense ==="}}')
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert client.call("p", {"p": "/room", "d": 1})["s"] == "ok"
        assert client.push("room") == 1

        # New rules that remove read access revoke the live listener with `c`.
        rules.write_text(json.dumps({"rules": {".write": "auth != null"}}))
        server.proc.send_signal(signal.SIGHUP)
        revoked = client.wait_for(lambda m: m.get("t") == "d" and m["d"].get("a") == "c")
        assert revoked["d"]["b"]["p"] == "room"
        assert client.call("q", {"p": "/room", "h": ""})["s"] == "permission_denied"
    finally:
        assert server.alive()
        server.stop()
    assert "rules not reloaded" in server.stderr and "nonsense" in server.stderr
