"""The operator dashboard at /.admin/, driven in a real headless browser (Debian's chromium and chromedriver,
through Selenium): connections appear and disappear live, the Kick button closes a connection, users show
their presence (online, or last seen) beside their connections and clients, the charts draw the server's
last minutes, and screenshots land in test-output/dashboard.png and test-output/dashboard-users.png."""
import os
import re
import shutil
import time

import pytest
import requests
import websocket

from conftest import ROOT, Server
from test_client_presence import Proc

CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
OUTPUT = os.path.join(ROOT, "test-output")


def base(server):
    return f"http://{server.host}:{server.port}"


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    from selenium.webdriver.chrome.service import Service
    if not os.path.exists(CHROMEDRIVER) or not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1440,900", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(10)
    yield driver
    driver.quit()


@pytest.fixture
def server():
    server = Server("--rules", "open", "--disconnect-grace", "0")
    yield server
    assert server.alive(), "the server died during the test"
    server.stop()


def wait_until(predicate, timeout=8, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as error:  # a row replaced between lookups, a page still loading
            last = error
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def rows(driver):
    """The table as the operator sees it: {session: (uid text, namespace)}."""
    found = {}
    for tr in driver.find_elements("css selector", "#rows tr[data-session]"):
        cells = tr.find_elements("css selector", "td")
        found[tr.get_attribute("data-session")] = (cells[1].text.split("\n")[0], cells[2].text)
    return found


def text(driver, element_id):
    return driver.find_element("id", element_id).text


def open_dashboard(driver, server):
    # Leave the previous test's page (its server is gone) and forget what it logged.
    driver.get("about:blank")
    severe_console_errors(driver)
    driver.get(base(server) + "/.admin/?auth=owner")
    wait_until(lambda: "live" in driver.find_element("id", "status").get_attribute("class"), what="the first poll")


def severe_console_errors(driver):
    try:
        return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    except Exception:  # a driver without log support
        return []


def test_dashboard_needs_the_admin_credential(server):
    for params, headers in [({}, {}), ({"auth": "nope"}, {}), ({}, {"Authorization": "Bearer nope"})]:
        for path in ("/.admin/", "/.admin"):
            response = requests.get(base(server) + path, params=params, headers=headers, timeout=5)
            assert response.status_code == 401, (path, params, headers, response.status_code)
            assert "error" in response.json() and "<html" not in response.text
    page = requests.get(base(server) + "/.admin/", params={"auth": "owner"}, timeout=5)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<table" in page.text and 'src="/.admin/dashboard.js"' in page.text
    # The stylesheet and script sit beside the page (the server's CSP forbids inline ones); they hold no
    # data, so a <script src> needs no credential.
    script = requests.get(base(server) + "/.admin/dashboard.js", timeout=5)
    chart = requests.get(base(server) + "/.admin/chart.js", timeout=5)
    style = requests.get(base(server) + "/.admin/dashboard.css", timeout=5)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"] and "data-session" in script.text
    assert chart.status_code == 200 and "javascript" in chart.headers["content-type"] and "polyline" in chart.text
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    assert 'src="/.admin/chart.js"' in page.text
    # Self-contained: nothing fetched from anywhere else (an svg xmlns is a name, not a fetch).
    for text_ in (page.text, script.text, chart.text, style.text):
        assert not re.search(r"""(?:src|href|url)\s*[=(]\s*["']?(?:https?:)?//""", text_, re.I)
        assert "import " not in text_ and "@import" not in text_
    assert requests.get(base(server) + "/.admin", headers={"Authorization": "Bearer owner"}, timeout=5).status_code == 200
    # The data behind the page needs the credential too.
    for path in ("/.admin/users", "/.admin/activity"):
        assert requests.get(base(server) + path, timeout=5).status_code == 401
        assert requests.get(base(server) + path, params={"auth": "nope"}, timeout=5).status_code == 401


def test_connecting_client_appears_live_and_disappears(browser, server):
    open_dashboard(browser, server)
    assert rows(browser) == {}
    assert text(browser, "stat-connections") == "0"

    alice = server.client()
    alice.auth("alice")
    alice.listen("/users/alice/presence")
    alice.call("o", {"p": "/users/alice/presence", "d": {"online": False}})
    wait_until(lambda: rows(browser).get(alice.session) == ("alice", "demo"), what="alice's row")
    row = browser.find_element("css selector", f'#rows tr[data-session="{alice.session}"]')
    assert row.get_attribute("data-uid") == "alice"
    assert "on" in row.find_element("css selector", ".dot").get_attribute("class").split()
    wait_until(lambda: text(browser, "stat-connections") == "1", what="the connection count")
    wait_until(lambda: row.find_element("css selector", "td.listeners").text == "1", what="the listener count")
    assert row.find_element("css selector", "td.ondisconnect").text == "1"
    # Rates come from deltas between polls: after two polls they are numbers.
    wait_until(lambda: re.fullmatch(r"\d+(\.\d)?k?", text(browser, "rate-in")), what="a message rate")
    assert re.fullmatch(r"\d+(\.\d)?k?", text(browser, "rate-pushes"))

    os.makedirs(OUTPUT, exist_ok=True)
    anonymous = server.client(ns="chat")  # a second row, for a more telling screenshot
    wait_until(lambda: anonymous.session in rows(browser), what="the anonymous row")
    time.sleep(1.2)  # one more poll, so the rates and sparklines have something to show
    assert browser.save_screenshot(os.path.join(OUTPUT, "dashboard.png"))
    assert os.path.getsize(os.path.join(OUTPUT, "dashboard.png")) > 10_000

    alice.close()
    wait_until(lambda: alice.session not in rows(browser), what="alice's row to go")
    wait_until(lambda: text(browser, "stat-connections") == "1", what="the count to drop")
    assert "alice" in text(browser, "events") and "disconnected" in text(browser, "events")
    anonymous.close()
    wait_until(lambda: rows(browser) == {}, what="an empty table")
    assert severe_console_errors(browser) == []


def test_kick_button_closes_the_connection(browser, server):
    open_dashboard(browser, server)
    bob = server.client()
    bob.auth("bob")
    assert bob.call("o", {"p": "/users/bob/presence", "d": {"online": False}})["s"] == "ok"
    carol = server.client()
    carol.auth("carol")
    wait_until(lambda: {bob.session, carol.session} <= set(rows(browser)), what="bob's and carol's rows")

    reason = browser.find_element("id", "kick-reason")
    reason.clear()
    reason.send_keys("dashboard test")
    browser.find_element("css selector", f'#rows tr[data-session="{bob.session}"] button.kick').click()

    # Bob sees his connection closed with 4002 and the reason (perhaps after a server error message).
    bob.ws.settimeout(5)
    close = None
    deadline = time.time() + 5
    while close is None and time.time() < deadline:
        try:
            opcode, data = bob.ws.recv_data(control_frame=True)
        except websocket.WebSocketConnectionClosedException:
            break
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            close = data
    assert close is not None and len(close) >= 2, "bob saw no close frame"
    assert int.from_bytes(close[:2], "big") == 4002
    assert close[2:].decode() == "dashboard test"

    wait_until(lambda: bob.session not in rows(browser), what="bob's row to go")
    assert carol.session in rows(browser)  # only bob was kicked
    assert carol.call("s", {})["s"] == "ok"
    # The kick ran bob's onDisconnect ops, as any disconnect does.
    assert carol.call("g", {"p": "/users/bob/presence", "q": {}}) == {"s": "ok", "d": {"online": False}}
    assert "kicked" in text(browser, "events")
    carol.close()


def admin_json(server, path, **params):
    response = requests.get(base(server) + path, params={"auth": "owner", **params}, timeout=5)
    assert response.status_code == 200, (path, response.status_code, response.text)
    return response.json()


def set_presence(server, uid, value, ns="demo"):
    client = server.client(ns=ns)
    client.auth(uid)
    assert client.call("p", {"p": f"/users/{uid}/presence", "d": value})["s"] == "ok"
    client.close()


def test_users_endpoint_lists_presence_and_connections(server):
    now = int(time.time() * 1000)
    set_presence(server, "bob", {"online": False, "lastSeen": now - 300_000})
    set_presence(server, "dan", {"online": False, "lastSeen": now - 7_200_000})
    set_presence(server, "erin", {"online": True, "lastSeen": now - 1_000}, ns="chat")
    carol = server.client()
    carol.auth("carol")  # connected, no presence node
    carol.call("s", {})
    data = admin_json(server, "/.admin/users")
    users = [(u["uid"], u["namespace"], u["online"], u["connections"]) for u in data["users"]]
    # Online first, then connected, then the most recently seen.
    assert users == [("erin", "chat", True, 0), ("carol", "demo", None, 1), ("bob", "demo", False, 0),
                     ("dan", "demo", False, 0)], users
    assert data["users"][2]["lastSeen"] == now - 300_000
    assert data["total"] == 4 and data["online"] == 1 and data["truncated"] is False
    assert data["presence"] == "users/$uid/presence.online" and abs(data["time"] - now) < 5_000
    assert [u["uid"] for u in admin_json(server, "/.admin/users", ns="chat")["users"]] == ["erin"]
    assert [u["uid"] for u in admin_json(server, "/.admin/users", uid="bob")["users"]] == ["bob"]
    limited = admin_json(server, "/.admin/users", limit="2")
    assert len(limited["users"]) == 2 and limited["total"] == 4
    assert admin_json(server, "/.admin/users", limit="nonsense", uid="nobody")["users"] == []
    carol.close()


def test_activity_endpoint_keeps_one_sample_a_second(server):
    time.sleep(2.5)
    first = admin_json(server, "/.admin/activity")
    assert first["intervalMs"] == 1000 and first["capacity"] == 600
    assert len(first["samples"]) >= 2
    times = [s["t"] for s in first["samples"]]
    assert times == sorted(times) and all(700 <= b - a <= 1500 for a, b in zip(times, times[1:])), times
    assert all(s["connections"] == 0 for s in first["samples"])
    # Traffic shows up as rates; a connection shows up in the next samples.
    alice = server.client()
    alice.auth("alice")
    for i in range(20):
        alice.call("p", {"p": "/users/alice/presence", "d": {"online": True, "lastSeen": i}})
    time.sleep(2.2)
    later = admin_json(server, "/.admin/activity", since=str(times[-1]))["samples"]
    assert later and all(s["t"] > times[-1] for s in later)
    assert later[-1]["connections"] == 1

    def total(key):  # a rate times its interval, summed: the count since the first read
        count, previous = 0.0, times[-1]
        for sample in later:
            count += sample[key] * (sample["t"] - previous) / 1000
            previous = sample["t"]
        return round(count)
    assert total("writes") == 20 and total("messagesIn") >= 21  # the auth and the 20 writes
    assert all(s["messagesOut"] >= 0 and s["pushes"] >= 0 for s in later)
    alice.close()


def test_users_presence_clients_and_charts_render(browser, server):
    now = int(time.time() * 1000)
    set_presence(server, "bob", {"online": False, "lastSeen": now - 5 * 60_000})
    alice = Proc("simulate", "--uid", "alice", "--json", "--server", f"ws://{server.host}:{server.port}", "--ns", "demo",
                 "--debounce", "0", stdin=True)
    try:
        alice.wait_for(lambda e: e.get("event") == "connection" and e.get("state") == "connected", 5)
        alice.send("foreground")
        alice.wait_for(lambda e: e.get("event") == "ack" and e.get("status") == "ok", 5)
        open_dashboard(browser, server)

        def user_row(uid):
            row = browser.find_element("css selector", f'#user-rows tr[data-uid="{uid}"][data-ns="demo"]')
            return {cls: row.find_element("css selector", "td." + cls).text for cls in ("presence", "conns", "clients")}

        wait_until(lambda: user_row("alice") == {"presence": "Online", "conns": "1", "clients": "presence-client 0.1.0"},
                   what="alice online with her client")
        assert user_row("bob") == {"presence": "Last seen 5m ago", "conns": "0", "clients": ""}
        assert text(browser, "stat-online") == "1"
        # Beside each connection: the user's presence and the client, from its User-Agent.
        connection = browser.find_element("css selector", '#rows tr[data-uid="alice"]')
        assert connection.find_element("css selector", "td.presence").text == "Online"
        client = connection.find_element("css selector", "td.client")
        assert client.text == "presence-client 0.1.0" and client.get_attribute("title") == "presence-client/0.1.0"
        api_connection = admin_json(server, "/.admin/connections", uid="alice")["connections"][0]
        assert api_connection["userAgent"] == "presence-client/0.1.0"

        # The charts draw the server's samples: a line of connections, and events per second.
        def points(selector):
            attribute = browser.find_element("css selector", selector).get_attribute("points") or ""
            return [tuple(map(float, pair.split(","))) for pair in attribute.split()]
        wait_until(lambda: len(points("#chart-connections polyline.series-connections")) >= 3, what="a connections line")
        wait_until(lambda: len(points("#chart-events polyline.series-in")) >= 2, what="an events line")
        line = points("#chart-connections polyline.series-connections")
        assert [x for x, _ in line] == sorted(x for x, _ in line)  # left to right in time
        assert line[-1][1] == min(y for _, y in line)  # the latest value (one connection) is the highest point
        assert int(browser.find_element("id", "chart-connections").get_attribute("data-points")) >= 3
        assert text(browser, "now-connections") == "1"
        assert re.fullmatch(r"\d+(\.\d)?k?/s", text(browser, "now-in"))

        os.makedirs(OUTPUT, exist_ok=True)
        assert browser.save_screenshot(os.path.join(OUTPUT, "dashboard-users.png"))

        # Killed: the onDisconnect write runs, and the page says when alice was last seen.
        alice.send("kill")
        assert alice.proc.wait(timeout=5) == 0
        wait_until(lambda: user_row("alice") == {"presence": "Last seen just now", "conns": "0", "clients": ""},
                   what="alice last seen")
        assert "alice" in text(browser, "events") and "went offline" in text(browser, "events")
        wait_until(lambda: text(browser, "stat-online") == "0", what="no one online")
        assert severe_console_errors(browser) == []
    finally:
        alice.stop()
