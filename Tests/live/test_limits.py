"""Refresh limits (rules/limits.json) against the real server: the seed app's free tier of 2
refreshes then a 120 s cooldown, Lite and new users unlimited, the status at feature-limits, REST's
429, durability across a crash, hot reload, metrics and the event log."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import requests

from conftest import CLIENT, PRESENCE_RULES, ROOT, Client, Server, run_client, unsigned_token

SHIPPED_LIMITS = os.path.join(ROOT, "rules", "limits.json")


def limits_file(limit, cooldown=120):
    path = tempfile.NamedTemporaryFile(prefix="limits-", suffix=".json", delete=False).name
    write_limits(path, limit, cooldown)
    return path


def write_limits(path, limit, cooldown=120):
    with open(path, "w") as f:
        json.dump({"limits": {"refreshOnlineUsers": {"location": "online-users", "tiers": [
            {"name": "lite", "when": "auth.token.subscription == 'lite'", "unlimited": True},
            {"name": "free", "when": "auth != null", "limit": limit, "cooldownSeconds": cooldown},
        ]}}}, f)


def signed_in(server, uid, **claims):
    client = server.client()
    reply = client.call("auth", {"cred": unsigned_token(uid, **claims)})
    assert reply["s"] == "ok", reply
    return client


def refresh(client):
    return client.call("g", {"p": "/online-users", "q": {}})


def status(client):
    reply = client.call("g", {"p": "/feature-limits/refreshOnlineUsers", "q": {}})
    assert reply["s"] == "ok", reply
    return reply["d"]


def test_free_user_gets_two_refreshes_then_the_remaining_time():
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        owner = signed_in(server, "ann")
        assert owner.call("p", {"p": "/users/ann/presence", "d": {"online": True, "lastSeen": 1}})["s"] == "ok"
        bob = signed_in(server, "bob")
        before = status(bob)
        assert before["tier"] == "free" and before["remaining"] == 2 and before["canProceed"] is True
        assert before["showPopup"] is True and before["cooldownSeconds"] == 120
        first = refresh(bob)
        assert first["s"] == "ok" and first["d"] == {"ann": {"online": True, "lastSeen": 1}}
        assert status(bob)["remaining"] == 1
        assert refresh(bob)["s"] == "ok"
        third = refresh(bob)
        assert third["s"] == "rate_limited"
        assert re.fullmatch(r"refreshOnlineUsers: limit of 2 uses reached; try again in (2:00|1:59)", third["d"]), third
        after = status(bob)
        assert after["canProceed"] is False and after["currentUsage"] == 2 and 118 < after["remainingCooldown"] <= 120
        # The refusal consumed nothing, and another user is not affected.
        assert after["currentUsage"] == 2
        assert refresh(signed_in(server, "cat"))["s"] == "ok"
    finally:
        server.stop()


def test_lite_and_new_users_are_never_refused():
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        lite = signed_in(server, "lee", subscription="lite")
        newcomer = signed_in(server, "nina", created_at=int(time.time() * 1000) - 60_000)
        for _ in range(5):
            assert refresh(lite)["s"] == "ok"
            assert refresh(newcomer)["s"] == "ok"
        assert status(lite)["tier"] == "lite" and status(lite)["unlimited"] is True
        assert status(newcomer)["tier"] == "new-user"
    finally:
        server.stop()


def test_rest_answers_429_with_retry_after_and_serves_the_status():
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        base = f"http://{server.host}:{server.port}"
        params = {"ns": "demo", "auth": unsigned_token("dora")}
        assert requests.get(f"{base}/online-users.json", params=params, timeout=5).status_code == 200
        assert requests.get(f"{base}/online-users.json", params=params, timeout=5).status_code == 200
        refused = requests.get(f"{base}/online-users.json", params=params, timeout=5)
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] in ("120", "119")
        assert "try again in" in refused.json()["error"]
        standing = requests.get(f"{base}/feature-limits/refreshOnlineUsers.json", params=params, timeout=5).json()
        assert standing["canProceed"] is False and standing["limit"] == 2
        everything = requests.get(f"{base}/feature-limits.json", params=params, timeout=5).json()
        assert set(everything) == {"refreshOnlineUsers"}
        # A read the rules refuse (no credential) uses nothing and says so.
        assert requests.get(f"{base}/online-users.json", params={"ns": "demo"}, timeout=5).status_code == 401
    finally:
        server.stop()


def test_a_rate_limited_stream_gets_429_with_retry_after_and_other_refusals_their_status():
    """A streaming read (Accept: text/event-stream) answers from the same error table as REST."""
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        base = f"http://{server.host}:{server.port}"
        params = {"ns": "demo", "auth": unsigned_token("sam")}
        accept = {"Accept": "text/event-stream"}
        for _ in range(2):
            with requests.get(f"{base}/online-users.json", params=params, headers=accept, stream=True, timeout=5) as opened:
                assert opened.status_code == 200 and opened.headers["Content-Type"] == "text/event-stream"
        refused = requests.get(f"{base}/online-users.json", params=params, headers=accept, timeout=5)
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] in ("120", "119")
        assert "try again in" in refused.json()["error"]
        # The rules refuse an anonymous read: 401; a bad query: 400.
        anonymous = requests.get(f"{base}/online-users.json", params={"ns": "demo"}, headers=accept, timeout=5)
        assert anonymous.status_code == 401
        bad_query = requests.get(f"{base}/users.json", params={**params, "orderBy": "nonsense"}, headers=accept, timeout=5)
        assert bad_query.status_code == 400
    finally:
        server.stop()


def test_usage_survives_a_crash_and_the_file_reloads_on_sighup():
    path = limits_file(2)
    data_dir = tempfile.mkdtemp(prefix="presence-limits-")
    server = Server("--rules", PRESENCE_RULES, "--limits", path, data_dir=data_dir)
    eve = signed_in(server, "eve")
    # A reply that used the limit is sent only once the use is durable, like a write's ack: so a
    # crash right after it loses nothing.
    assert refresh(eve)["s"] == "ok" and refresh(eve)["s"] == "ok"
    server.kill()

    server = Server("--rules", PRESENCE_RULES, "--limits", path, data_dir=data_dir)
    try:
        eve = signed_in(server, "eve")
        assert refresh(eve)["s"] == "rate_limited"  # a restart (or reinstall) changes nothing
        # A broken file is rejected whole; the limits in force stay.
        with open(path, "w") as f:
            f.write('{"limits": {"refreshOnlineUsers": {"location": "online-users", "tiers": [{"name": "x", "when": "auth.uid ==", "limit": 1}]}}}')
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert refresh(eve)["s"] == "rate_limited"
        # Limit 5 from a changed file applies from the next check.
        write_limits(path, 5)
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 5
        while status(eve)["limit"] != 5:
            assert time.time() < deadline, "the new limits were not applied"
            time.sleep(0.1)
        assert [refresh(eve)["s"] for _ in range(4)] == ["ok", "ok", "ok", "rate_limited"]
    finally:
        server.stop()
    assert "limits not reloaded, the previous limits stay in force" in server.stderr
    assert "/limits/refreshOnlineUsers/tiers/0/when" in server.stderr


def test_checks_are_counted_in_metrics_and_written_to_the_event_log():
    events = tempfile.NamedTemporaryFile(prefix="limit-events-", suffix=".jsonl", delete=False).name
    server = Server("--rules", PRESENCE_RULES, "--limits", limits_file(1), "--limit-events", events)
    try:
        fay = signed_in(server, "fay")
        assert refresh(fay)["s"] == "ok"
        assert refresh(fay)["s"] == "rate_limited"
        assert refresh(signed_in(server, "lee", subscription="lite"))["s"] == "ok"
        metrics = requests.get(f"http://{server.host}:{server.port}/metrics", timeout=5).text
        for outcome, tier in [("performed", "free"), ("cooldown_started", "free"), ("blocked_by_cooldown", "free"),
                              ("bypass_by_tier", "lite")]:
            line = f'presence_limit_checks_total{{limit="refreshOnlineUsers",tier="{tier}",outcome="{outcome}"}} 1'
            assert line in metrics, (line, [l for l in metrics.splitlines() if "limit" in l])
    finally:
        server.stop()
    with open(events) as f:
        lines = [json.loads(line) for line in f]
    assert [(e["event"], e["uid"], e["tier"]) for e in lines] == [
        ("performed", "fay", "free"), ("cooldown_started", "fay", "free"), ("blocked_by_cooldown", "fay", "free"),
        ("bypass_by_tier", "lee", "lite")]
    assert all(e["limit"] == "refreshOnlineUsers" and e["ns"] == "demo" and isinstance(e["t"], int) for e in lines)
    assert lines[2]["remainingCooldown"] > 119


def test_limits_check_command_and_bad_limits_file_at_start(tmp_path):
    import subprocess
    from conftest import SERVER
    ok = subprocess.run([SERVER, "limits", "check", SHIPPED_LIMITS], capture_output=True, text=True)
    assert ok.returncode == 0 and "refreshOnlineUsers at /online-users: lite unlimited, new-user unlimited, free 2 per 120.0 s" in ok.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"limits": {"r": {"location": "online-users", "tiers": [{"name": "t", "when": true, "limit": -1}]}}}')
    checked = subprocess.run([SERVER, "limits", "check", str(bad)], capture_output=True, text=True)
    assert checked.returncode == 1 and "/limits/r/tiers/0/limit: must be a whole number" in checked.stdout
    started = subprocess.run([SERVER, "--port", "0", "--storage", "memory", "--limits", str(bad)], capture_output=True, text=True, timeout=20)
    assert started.returncode == 1 and "/limits/r/tiers/0/limit" in started.stderr


def test_operators_see_and_reset_a_users_usage():
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        gus = signed_in(server, "gus")
        assert refresh(gus)["s"] == "ok" and refresh(gus)["s"] == "ok" and refresh(gus)["s"] == "rate_limited"
        base = f"http://{server.host}:{server.port}/.admin/users/gus"
        owner = {"Authorization": "Bearer owner"}
        view = requests.get(base, params={"ns": "demo"}, headers=owner, timeout=5).json()
        assert [(u["limit"], u["count"]) for u in view["limits"]] == [("refreshOnlineUsers", 2)]
        assert isinstance(view["limits"][0]["cooldownStartedAt"], int)
        assert requests.delete(f"{base}/limits/refreshOnlineUsers", params={"ns": "demo"}, timeout=5).status_code == 401
        reset = requests.delete(f"{base}/limits/refreshOnlineUsers", params={"ns": "demo"}, headers=owner, timeout=5)
        assert reset.status_code == 200 and reset.json() == {"reset": True}
        assert status(gus)["remaining"] == 2 and refresh(gus)["s"] == "ok"
        # The same through the CLI.
        server_arg = ["--server", f"ws://{server.host}:{server.port}"]
        shown = run_client([CLIENT, "admin", "user", "gus", "--ns", "demo", *server_arg], timeout=15)
        assert shown.returncode == 0 and "limit usage (1):" in shown.stdout
        assert re.search(r"refreshOnlineUsers\s+demo\s+1\s+–", shown.stdout), shown.stdout
        cli_reset = run_client([CLIENT, "admin", "reset-limit", "gus", "refreshOnlineUsers", "--ns", "demo", *server_arg], timeout=15)
        assert cli_reset.returncode == 0 and cli_reset.stdout.strip() == "reset refreshOnlineUsers for gus"
        assert status(gus)["currentUsage"] == 0
    finally:
        server.stop()


def online(server, cache_dir, *args, timeout=30):
    argv = [CLIENT, "online", *args, "--server", f"ws://{server.host}:{server.port}", "--ns", "demo"]
    return run_client(argv, timeout=timeout, env={**os.environ, "XDG_CACHE_HOME": str(cache_dir)})


def test_client_online_refresh_three_times_as_free_and_as_lite_user(tmp_path):
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS)
    try:
        ann = signed_in(server, "ann")
        assert ann.call("p", {"p": "/users/ann/presence", "d": {"online": True, "lastSeen": {".sv": "timestamp"}}})["s"] == "ok"
        runs = [online(server, tmp_path, "--refresh", "--uid", "bob") for _ in range(3)]
        assert [r.returncode for r in runs] == [0, 0, 5], [(r.stdout, r.stderr) for r in runs]
        assert "Refreshes: 1 left of 2" in runs[0].stdout and "ann" in runs[0].stdout
        assert "Refreshes: 0 left of 2 (next in 2:00)" in runs[1].stdout
        # The third is refused with the remaining time; the last list is still shown, from the cache.
        assert re.search(r"Time remaining (2:00|1:5\d)", runs[2].stdout), runs[2].stdout
        assert "online (cached" in runs[2].stdout and "ann" in runs[2].stdout
        assert "run with --wait" in runs[2].stderr
        # Without --refresh a fresh cache is shown without asking the server (nothing used).
        cached = online(server, tmp_path, "--uid", "bob")
        assert cached.returncode == 0 and "online (cached" in cached.stdout
        lite = [online(server, tmp_path, "--refresh", "--uid", "lee", "--claim", "subscription=lite") for _ in range(3)]
        assert [r.returncode for r in lite] == [0, 0, 0]
        assert all("Refreshes: unlimited (lite)" in r.stdout for r in lite)
    finally:
        server.stop()


def test_client_online_wait_refreshes_when_the_cooldown_ends(tmp_path):
    server = Server("--rules", PRESENCE_RULES, "--limits", limits_file(1, cooldown=2))
    try:
        first = online(server, tmp_path, "--refresh", "--uid", "bob")
        assert first.returncode == 0 and "Refreshes: 0 left of 1" in first.stdout
        started = time.time()
        waited = online(server, tmp_path, "--refresh", "--wait", "--uid", "bob")
        assert waited.returncode == 0, (waited.stdout, waited.stderr)
        assert "Time remaining 0:0" in waited.stdout and "online (refreshed" in waited.stdout
        assert time.time() - started >= 1.0  # it did wait for the cooldown, not refresh early
    finally:
        server.stop()


def test_firebase_admin_sdk_reads_the_list_and_standing_and_honours_retry_after(monkeypatch):
    """A real client: the Python Admin SDK acting as a user (auth_variable_override) over REST. Its
    HTTP layer honours Retry-After on a 429: the third read waits out the cooldown, then succeeds."""
    import uuid
    firebase_admin = __import__("pytest").importorskip("firebase_admin")
    from firebase_admin import db
    events = tempfile.NamedTemporaryFile(prefix="limit-events-", suffix=".jsonl", delete=False).name
    server = Server("--rules", PRESENCE_RULES, "--limits", limits_file(2, cooldown=2), "--limit-events", events)
    monkeypatch.setenv("FIREBASE_DATABASE_EMULATOR_HOST", f"{server.host}:{server.port}")
    names = []

    def app_as(auth, **extra):
        name = f"limits-{uuid.uuid4().hex}"
        names.append(name)
        options = {"databaseURL": "https://demo.firebaseio.com", "httpTimeout": 10, **extra}
        if auth is not None:
            options["databaseAuthVariableOverride"] = auth
        return firebase_admin.initialize_app(None, options, name=name)

    try:
        db.reference("users/ann/presence", app_as(None)).set({"online": True, "lastSeen": 5})
        ivy = app_as({"uid": "ivy", "token": {"sub": "ivy"}})
        assert db.reference("feature-limits/refreshOnlineUsers", ivy).get()["remaining"] == 2
        assert db.reference("online-users", ivy).get() == {"ann": {"online": True, "lastSeen": 5}}
        assert db.reference("online-users", ivy).get() == {"ann": {"online": True, "lastSeen": 5}}
        standing = db.reference("feature-limits/refreshOnlineUsers", ivy).get()
        assert standing["canProceed"] is False and standing["tier"] == "free" and 0 < standing["remainingCooldown"] <= 2
        started = time.time()
        assert db.reference("online-users", ivy).get() == {"ann": {"online": True, "lastSeen": 5}}
        assert time.time() - started >= 1.0  # it was refused, waited Retry-After, and came back
        lite = app_as({"uid": "leo", "token": {"sub": "leo", "subscription": "lite"}})
        for _ in range(4):
            assert "ann" in db.reference("online-users", lite).get()
    finally:
        for name in names:
            firebase_admin.delete_app(firebase_admin.get_app(name))
        server.stop()
    with open(events) as f:
        ivy_events = [e["event"] for e in map(json.loads, f) if e["uid"] == "ivy"]
    assert ivy_events[:4] == ["checked", "performed", "performed", "cooldown_started"]
    assert "blocked_by_cooldown" in ivy_events and ivy_events[-2:] == ["cooldown_completed", "performed"]


def test_a_version_1_data_directory_upgrades_in_place():
    """Data directories written before limits existed (schema 1) open and gain the usage table (and
    every later table)."""
    import sqlite3
    data_dir = tempfile.mkdtemp(prefix="presence-upgrade-")
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS, data_dir=data_dir)
    writer = signed_in(server, "ann")
    assert writer.call("p", {"p": "/users/ann/presence", "d": {"online": True, "lastSeen": 7}})["s"] == "ok"
    server.stop()
    db = sqlite3.connect(os.path.join(data_dir, "presence.sqlite"))
    db.execute("DROP TABLE limit_usage")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    server = Server("--rules", PRESENCE_RULES, "--limits", SHIPPED_LIMITS, data_dir=data_dir)
    try:
        bob = signed_in(server, "bob")
        assert refresh(bob)["d"] == {"ann": {"online": True, "lastSeen": 7}}  # the data is all there
    finally:
        server.stop()
    db = sqlite3.connect(os.path.join(data_dir, "presence.sqlite"))
    # The current schema (3: limit_usage, then session_changes), reached in place from 1.
    assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'session_changes'").fetchone() == ("session_changes",)
    assert db.execute("SELECT ns, limit_name, uid, count FROM limit_usage").fetchall() == [("demo", "refreshOnlineUsers", "bob", 1)]
    db.close()


def test_a_write_limit_counts_wire_and_rest_writes():
    path = tempfile.NamedTemporaryFile(prefix="limits-", suffix=".json", delete=False).name
    with open(path, "w") as f:
        json.dump({"limits": {"postStatus": {"location": "users", "operation": "write", "tiers": [
            {"name": "free", "when": "auth != null", "limit": 3, "cooldownSeconds": 60}]}}}, f)
    server = Server("--rules", PRESENCE_RULES, "--limits", path)
    try:
        hal = signed_in(server, "hal")
        presence = {"online": True, "lastSeen": {".sv": "timestamp"}}
        assert hal.call("p", {"p": "/users/hal/presence", "d": presence})["s"] == "ok"
        assert hal.call("m", {"p": "/users/hal/presence", "d": {"online": False}})["s"] == "ok"
        url = f"http://{server.host}:{server.port}/users/hal/presence.json"
        params = {"ns": "demo", "auth": unsigned_token("hal")}
        assert requests.put(url, params=params, json=presence, timeout=5).status_code == 200
        refused = requests.put(url, params=params, json={"online": False, "lastSeen": {".sv": "timestamp"}}, timeout=5)
        assert refused.status_code == 429 and refused.headers["Retry-After"] in ("60", "59")
        assert hal.call("p", {"p": "/users/hal/presence", "d": presence})["s"] == "rate_limited"
        # The refused writes changed nothing: the REST PUT's value is still there.
        assert hal.call("g", {"p": "/users/hal/presence/online", "q": {}})["d"] is True
        standing = hal.call("g", {"p": "/feature-limits/postStatus", "q": {}})["d"]
        assert standing["currentUsage"] == 3 and standing["canProceed"] is False
    finally:
        server.stop()


def test_client_online_does_not_wait_for_uses_that_never_come_back(tmp_path):
    path = tempfile.NamedTemporaryFile(prefix="limits-", suffix=".json", delete=False).name
    with open(path, "w") as f:
        json.dump({"limits": {"refreshOnlineUsers": {"location": "online-users", "tiers": [
            {"name": "trial", "when": "auth != null", "limit": 1}]}}}, f)
    server = Server("--rules", PRESENCE_RULES, "--limits", path)
    try:
        assert online(server, tmp_path, "--refresh", "--uid", "bob").returncode == 0
        started = time.time()
        spent = online(server, tmp_path, "--refresh", "--wait", "--uid", "bob")
        assert spent.returncode == 5 and "for good" in spent.stderr, (spent.stdout, spent.stderr)
        assert time.time() - started < 10  # it did not wait for a cooldown that does not exist
        # Signed out, the rules refuse the read: exit 3, nothing used.
        anonymous = online(server, tmp_path / "anon", "--refresh")
        assert anonymous.returncode == 3 and "permission_denied" in anonymous.stderr, (anonymous.stdout, anonymous.stderr)
    finally:
        server.stop()
