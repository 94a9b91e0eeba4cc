"""The operator dashboard at /.admin/, driven in a real headless browser (Debian's chromium and chromedriver,
through Selenium): connections appear and disappear live, the Kick button closes a connection, and a
screenshot lands in test-output/dashboard.png."""
import os
import re
import shutil
import time

import pytest
import requests
import websocket

from conftest import ROOT, Server

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
    style = requests.get(base(server) + "/.admin/dashboard.css", timeout=5)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"] and "data-session" in script.text
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
    # Self-contained: nothing fetched from anywhere else (an svg xmlns is a name, not a fetch).
    for text_ in (page.text, script.text, style.text):
        assert not re.search(r"""(?:src|href|url)\s*[=(]\s*["']?(?:https?:)?//""", text_, re.I)
        assert "import " not in text_ and "@import" not in text_
    assert requests.get(base(server) + "/.admin", headers={"Authorization": "Bearer owner"}, timeout=5).status_code == 200


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
