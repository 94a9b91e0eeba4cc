/// The operator dashboard served at `GET /.admin/` (and `/.admin`): one page, with its stylesheet and
/// script served beside it (`/.admin/dashboard.css`, `/.admin/dashboard.js`) because the server's
/// security headers (lws's best-practice CSP: `script-src 'self'; style-src 'self'`) forbid inline ones.
/// Nothing is fetched from anywhere else; no frameworks.
///
/// The page reads the admin credential from its own `?auth=` parameter and sends it as
/// `Authorization: Bearer …` on every API fetch; it polls `/.admin/connections` and `/.admin/stats` every
/// second. The two assets hold no data, so they are served without a credential (a `<script src>` cannot
/// send one). Stable hooks for tests: rows carry `data-session` (and `data-uid`); counts are
/// `#stat-connections`, `#stat-held`, `#stat-namespaces`, `#stat-uptime`; rates are `#rate-in`, `#rate-out`,
/// `#rate-pushes`, `#rate-writes`; the poll state is `#status`, the activity log `#events`.
enum AdminDashboard {
    /// The static asset at `path` (`/.admin/dashboard.css` or `/.admin/dashboard.js`), served to anyone:
    /// neither holds data. Nil for any other path.
    static func asset(_ path: String) -> (contentType: String, body: String)? {
        switch path {
        case "/.admin/dashboard.css": return ("text/css; charset=utf-8", stylesheet)
        case "/.admin/dashboard.js": return ("text/javascript; charset=utf-8", script)
        default: return nil
        }
    }

    static let html: String = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='6' fill='%231fb26b'/%3E%3C/svg%3E">
<title>presence · admin</title>
<link rel="stylesheet" href="/.admin/dashboard.css">
</head>
<body>
<header>
  <h1>presence <span>· admin</span></h1>
  <div id="status">connecting…</div>
</header>
<main>
  <div id="banner" role="alert"></div>
  <section class="cards">
    <div class="card"><div class="label">Connections</div><div class="value" id="stat-connections">–</div></div>
    <div class="card"><div class="label">Held sessions</div><div class="value" id="stat-held">–</div></div>
    <div class="card"><div class="label">Namespaces</div><div class="value" id="stat-namespaces">–</div></div>
    <div class="card"><div class="label">Messages in</div><div class="value"><span id="rate-in">–</span><small>/s</small></div>
      <svg viewBox="0 0 60 22" preserveAspectRatio="none"><polyline id="spark-in" points=""/></svg></div>
    <div class="card"><div class="label">Messages out</div><div class="value"><span id="rate-out">–</span><small>/s</small></div>
      <svg viewBox="0 0 60 22" preserveAspectRatio="none"><polyline id="spark-out" points=""/></svg></div>
    <div class="card"><div class="label">Pushes</div><div class="value"><span id="rate-pushes">–</span><small>/s</small></div>
      <svg viewBox="0 0 60 22" preserveAspectRatio="none"><polyline id="spark-pushes" points=""/></svg></div>
    <div class="card"><div class="label">Writes</div><div class="value"><span id="rate-writes">–</span><small>/s</small></div>
      <svg viewBox="0 0 60 22" preserveAspectRatio="none"><polyline id="spark-writes" points=""/></svg></div>
    <div class="card"><div class="label">Uptime</div><div class="value" id="stat-uptime">–</div></div>
  </section>
  <div class="toolbar">
    <h2>Connected users</h2>
    <label>uid <input id="filter-uid" placeholder="any" autocomplete="off"></label>
    <label>namespace <input id="filter-ns" placeholder="any" autocomplete="off"></label>
    <span class="spacer"></span>
    <span id="shown"></span>
    <label>kick reason <input id="kick-reason" value="kicked from the admin dashboard" autocomplete="off"></label>
  </div>
  <div class="table-wrap">
    <table id="connections">
      <thead><tr>
        <th></th><th>User</th><th>Namespace</th><th>Session</th><th>Remote</th><th>SDK</th>
        <th class="num">Connected</th><th class="num">Last frame</th><th class="num">Listeners</th>
        <th class="num">onDisconnect</th><th class="num">Bytes in</th><th class="num">Bytes out</th><th></th>
      </tr></thead>
      <tbody id="rows"><tr class="empty"><td colspan="13">Loading…</td></tr></tbody>
    </table>
  </div>
  <section id="log"><h3>Recent activity</h3><ol id="events"><li class="none">Nothing yet: connections, disconnections and kicks show up here.</li></ol></section>
</main>
<script src="/.admin/dashboard.js"></script>
</body>
</html>
"""#

    static let stylesheet: String = #"""
  :root {
    --bg: #f5f6f8; --panel: #fff; --ink: #1d2330; --muted: #6b7385; --line: #e3e6ec;
    --green: #1fb26b; --green-soft: rgba(31, 178, 107, .18); --red: #d9443a; --amber: #e0a020;
    --accent: #3a63d9; --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  }
  * { box-sizing: border-box; }
  body { margin: 0; background: var(--bg); color: var(--ink);
         font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
  header { background: #161b26; color: #e9ecf2; padding: 14px 24px; display: flex; align-items: center; gap: 16px; }
  header h1 { font-size: 17px; font-weight: 600; margin: 0; letter-spacing: .2px; }
  header h1 span { color: #8d96aa; font-weight: 400; }
  #status { margin-left: auto; font-size: 12.5px; color: #aab2c4; display: flex; align-items: center; gap: 8px; }
  #status::before { content: ""; width: 8px; height: 8px; border-radius: 50%; background: #8d96aa; }
  #status.live::before { background: var(--green); box-shadow: 0 0 0 3px rgba(31, 178, 107, .25); }
  #status.error { color: #ffb4ae; }
  #status.error::before { background: var(--red); }
  main { padding: 20px 24px 32px; max-width: 1500px; margin: 0 auto; }
  .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 12px; margin-bottom: 18px; }
  .card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
  .card .label { font-size: 11.5px; text-transform: uppercase; letter-spacing: .6px; color: var(--muted); }
  .card .value { font-size: 26px; font-weight: 600; font-variant-numeric: tabular-nums; margin-top: 2px; }
  .card .value small { font-size: 13px; font-weight: 400; color: var(--muted); margin-left: 3px; }
  .card svg { display: block; width: 100%; height: 22px; margin-top: 4px; }
  .card svg polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; vector-effect: non-scaling-stroke; }
  .toolbar { display: flex; flex-wrap: wrap; align-items: center; gap: 10px; margin-bottom: 10px; }
  .toolbar h2 { font-size: 15px; margin: 0 8px 0 0; }
  .toolbar label { font-size: 12.5px; color: var(--muted); display: flex; align-items: center; gap: 6px; }
  .toolbar input { font: inherit; font-size: 13px; padding: 5px 8px; border: 1px solid var(--line); border-radius: 6px;
                   background: var(--panel); width: 150px; }
  .toolbar input#kick-reason { width: 250px; }
  .toolbar .spacer { flex: 1; }
  #shown { font-size: 12.5px; color: var(--muted); }
  .table-wrap { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; overflow-x: auto; }
  table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { font-size: 11.5px; text-transform: uppercase; letter-spacing: .5px; color: var(--muted); font-weight: 600;
       background: #fafbfc; position: sticky; top: 0; }
  th.num, td.num { text-align: right; }
  tbody tr:last-child td { border-bottom: none; }
  tbody tr:hover { background: #f8f9fc; }
  tr.fresh { animation: fresh 1.6s ease-out; }
  @keyframes fresh { from { background: #e4f7ec; } to { background: transparent; } }
  .dot { width: 10px; height: 10px; border-radius: 50%; display: inline-block; background: #b8bfcc; vertical-align: middle; }
  .dot.on { background: var(--green); box-shadow: 0 0 0 3px var(--green-soft); }
  .dot.idle { background: var(--amber); box-shadow: 0 0 0 3px rgba(224, 160, 32, .18); }
  .uid { font-weight: 600; }
  .anon { color: var(--muted); font-style: italic; font-weight: 400; }
  .mono { font-family: var(--mono); font-size: 12.5px; }
  .muted { color: var(--muted); }
  .badge { font-size: 11px; padding: 1px 6px; border-radius: 9px; background: #eef1f8; color: #4a5470; margin-left: 6px;
           font-weight: 500; }
  .badge.admin { background: #fdecd8; color: #9a5a0c; }
  button.kick { font: inherit; font-size: 12.5px; padding: 4px 12px; border-radius: 6px; cursor: pointer;
                border: 1px solid #f0c4c0; background: #fff5f4; color: var(--red); }
  button.kick:hover { background: var(--red); color: #fff; border-color: var(--red); }
  button.kick:disabled { opacity: .5; cursor: default; }
  .empty td { text-align: center; color: var(--muted); padding: 28px; }
  #banner { display: none; margin-bottom: 14px; padding: 10px 14px; border-radius: 8px; background: #fdeceb;
            border: 1px solid #f3c2be; color: #8c231b; }
  #banner.show { display: block; }
  #log { margin-top: 18px; font-size: 12.5px; color: var(--muted); }
  #log h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .6px; margin: 0 0 6px; }
  #log ol { list-style: none; margin: 0; padding: 0; max-height: 160px; overflow-y: auto; }
  #log li { padding: 2px 0; }
  #log li b { color: var(--ink); font-weight: 600; }
  #log .t { font-family: var(--mono); margin-right: 8px; }
"""#

    static let script: String = #"""
"use strict";
(function () {
  var params = new URLSearchParams(location.search);
  var token = params.get("auth") || "";
  var base = location.pathname.replace(/\/+$/, "");  // "/.admin"
  if (!/\/\.admin$/.test(base)) base = "/.admin";
  var $ = function (id) { return document.getElementById(id); };
  var rowsBody = $("rows");
  var rows = new Map();          // session -> <tr>
  var known = null;              // session -> label, from the previous poll (null before the first)
  var lastStats = null;
  var history = { "in": [], out: [], pushes: [], writes: [] };
  var clockSkew = 0;             // server time - local time, ms
  var failures = 0;

  function api(path, options) {
    options = options || {};
    var headers = { "Accept": "application/json" };
    if (token) headers["Authorization"] = "Bearer " + token;
    if (options.body) headers["Content-Type"] = "application/json";
    return fetch(base + path, { method: options.method || "GET", headers: headers, body: options.body, cache: "no-store" })
      .then(function (response) {
        return response.text().then(function (text) {
          var data = null;
          try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
          if (!response.ok) {
            var err = new Error((data && data.error) || ("HTTP " + response.status));
            err.status = response.status;
            throw err;
          }
          return data;
        });
      });
  }

  function fmtCount(n) {
    if (n == null || isNaN(n)) return "–";
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + "M";
    if (n >= 1e4) return (n / 1e3).toFixed(n >= 1e5 ? 0 : 1) + "k";
    return String(n);
  }
  function fmtRate(r) {
    if (r == null || !isFinite(r)) return "–";
    if (r >= 1000) return fmtCount(Math.round(r));
    return r >= 10 ? String(Math.round(r)) : r.toFixed(1);
  }
  function fmtBytes(n) {
    if (n == null) return "–";
    if (n < 1024) return n + " B";
    var units = ["KB", "MB", "GB", "TB"], i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return n.toFixed(n >= 100 ? 0 : 1) + " " + units[i];
  }
  function fmtDuration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60); s %= 60;
    if (m < 60) return m + "m " + s + "s";
    var h = Math.floor(m / 60); m %= 60;
    if (h < 24) return h + "h " + m + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }
  function fmtAgo(ms) { return ms < 1500 ? "now" : fmtDuration(ms) + " ago"; }
  function clock(date) { return date.toTimeString().slice(0, 8); }
  function serverNow() { return Date.now() + clockSkew; }
  function label(c) { return c.uid != null ? c.uid : "anonymous"; }

  function setStatus(text, cls) {
    var el = $("status");
    el.textContent = text;
    el.className = cls || "";
  }
  function showBanner(text) {
    var el = $("banner");
    el.textContent = text || "";
    el.className = text ? "show" : "";
  }
  function logEvent(html) {
    var li = document.createElement("li");
    var t = document.createElement("span");
    t.className = "t";
    t.textContent = clock(new Date());
    li.appendChild(t);
    html.forEach(function (part) {
      var node = part.bold ? document.createElement("b") : document.createElement("span");
      node.textContent = part.text;
      li.appendChild(node);
    });
    var list = $("events");
    var none = list.querySelector(".none");
    if (none) none.remove();
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 50) list.removeChild(list.lastChild);
  }

  function cell(tr, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function makeRow(c) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-session", c.session);
    tr.setAttribute("data-uid", c.uid != null ? c.uid : "");
    var dot = document.createElement("span");
    dot.className = "dot on";
    dot.title = "connected";
    cell(tr).appendChild(dot);
    var user = cell(tr, "user");
    var name = document.createElement("span");
    name.className = c.uid != null ? "uid" : "uid anon";
    name.textContent = label(c);
    user.appendChild(name);
    if (c.auth === "admin") {
      var badge = document.createElement("span");
      badge.className = "badge admin";
      badge.textContent = "admin";
      user.appendChild(badge);
    }
    cell(tr, "ns").textContent = c.namespace;
    cell(tr, "session mono").textContent = c.session;
    cell(tr, "remote mono").textContent = (c.remote || "–").replace(/^::ffff:/, "");
    var sdk = cell(tr, "sdk");
    sdk.textContent = c.sdk || "–";
    if (c.userAgent) sdk.title = c.userAgent;
    ["since num", "last num", "listeners num", "ondisconnect num", "bytes-in num", "bytes-out num"].forEach(function (cls) {
      cell(tr, cls);
    });
    var button = document.createElement("button");
    button.className = "kick";
    button.type = "button";
    button.textContent = "Kick";
    button.title = "Close this connection (code 4002); its onDisconnect ops run";
    button.addEventListener("click", function () { kick(c, button); });
    cell(tr, "actions").appendChild(button);
    return tr;
  }

  function updateRow(tr, c) {
    var now = serverNow();
    var q = function (cls) { return tr.querySelector("td." + cls); };
    q("since").textContent = fmtDuration(now - c.connectedAt);
    q("since").title = new Date(c.connectedAt).toLocaleString();
    q("last").textContent = fmtAgo(now - c.lastFrameAt);
    q("listeners").textContent = c.listeners;
    q("ondisconnect").textContent = c.onDisconnectOps;
    q("bytes-in").textContent = fmtBytes(c.bytesIn);
    q("bytes-out").textContent = fmtBytes(c.bytesOut);
    var dot = tr.querySelector(".dot");
    var idle = now - c.lastFrameAt > 60000;
    dot.className = idle ? "dot idle" : "dot on";
    dot.title = idle ? "connected, quiet for " + fmtDuration(now - c.lastFrameAt) : "connected";
  }

  function renderConnections(data) {
    var list = data.connections || [];
    var seen = new Map();
    var previous = known;
    list.forEach(function (c, index) {
      seen.set(c.session, label(c));
      var tr = rows.get(c.session);
      if (!tr) {
        tr = makeRow(c);
        if (previous !== null) tr.classList.add("fresh");
        rows.set(c.session, tr);
      }
      updateRow(tr, c);
      if (rowsBody.children[index] !== tr) rowsBody.insertBefore(tr, rowsBody.children[index] || null);
      if (previous !== null && !previous.has(c.session)) {
        logEvent([{ text: label(c), bold: true }, { text: " connected to " + c.namespace + " (" + c.session + ")" }]);
      }
    });
    rows.forEach(function (tr, session) {
      if (!seen.has(session)) {
        tr.remove();
        rows.delete(session);
      }
    });
    if (previous !== null) {
      previous.forEach(function (who, session) {
        if (!seen.has(session)) logEvent([{ text: who, bold: true }, { text: " disconnected (" + session + ")" }]);
      });
    }
    known = seen;
    var empty = rowsBody.querySelector("tr.empty");
    if (list.length === 0) {
      if (!empty) {
        empty = document.createElement("tr");
        empty.className = "empty";
        empty.appendChild(document.createElement("td")).colSpan = 13;
        rowsBody.appendChild(empty);
      }
      empty.firstChild.textContent = filtersActive() ? "No connections match the filters." : "No one is connected.";
    } else if (empty) {
      empty.remove();
    }
    var total = data.total != null ? data.total : list.length;
    $("shown").textContent = total > list.length ? "showing " + list.length + " of " + total : total + " shown";
  }

  function filtersActive() { return $("filter-uid").value.trim() !== "" || $("filter-ns").value.trim() !== ""; }

  function spark(id, values) {
    // A rolling window: at least 20 slots wide, so the first minute already reads as a chart.
    var max = Math.max.apply(null, values.concat([1]));
    var step = 60 / Math.max(19, values.length - 1);
    var points = values.map(function (v, i) {
      return (60 - (values.length - 1 - i) * step).toFixed(1) + "," + (21 - (v / max) * 20).toFixed(1);
    });
    $(id).setAttribute("points", points.join(" "));
  }

  function renderStats(s) {
    clockSkew = s.time - Date.now();
    $("stat-connections").textContent = fmtCount(s.connections);
    $("stat-held").textContent = fmtCount(s.sessionsHeld);
    $("stat-namespaces").textContent = fmtCount(s.namespaces);
    $("stat-uptime").textContent = fmtDuration(s.uptimeSeconds * 1000);
    if (lastStats && s.time > lastStats.time) {
      var dt = (s.time - lastStats.time) / 1000;
      var rate = function (key) { return Math.max(0, (s[key] - lastStats[key]) / dt); };
      var r = { "in": rate("messagesIn"), out: rate("messagesOut"), pushes: rate("pushes"), writes: rate("writes") };
      $("rate-in").textContent = fmtRate(r["in"]);
      $("rate-out").textContent = fmtRate(r.out);
      $("rate-pushes").textContent = fmtRate(r.pushes);
      $("rate-writes").textContent = fmtRate(r.writes);
      Object.keys(r).forEach(function (k) {
        history[k].push(r[k]);
        if (history[k].length > 60) history[k].shift();
        spark("spark-" + k, history[k]);
      });
    }
    if (!lastStats || s.time > lastStats.time) lastStats = s;
  }

  function connectionsQuery() {
    var q = new URLSearchParams();
    var uid = $("filter-uid").value.trim(), ns = $("filter-ns").value.trim();
    if (uid) q.set("uid", uid);
    if (ns) q.set("ns", ns);
    q.set("limit", "500");
    return "/connections?" + q.toString();
  }

  function fail(err) {
    failures++;
    if (err.status === 401) {
      setStatus("credential refused", "error");
      showBanner("The admin credential was refused. Open this page as /.admin/?auth=<admin credential> " +
                 "(owner for a server in emulator auth mode).");
    } else {
      setStatus(err.status ? "error: " + err.message : "server unreachable", "error");
      showBanner(failures > 2 ? "Cannot reach the admin API: " + err.message + ". Retrying every second." : "");
    }
  }

  var polling = false, again = false;
  function poll() {
    if (polling) { again = true; return; }
    polling = true;
    again = false;
    Promise.all([api("/stats"), api(connectionsQuery())])
      .then(function (results) {
        failures = 0;
        showBanner("");
        renderStats(results[0]);
        renderConnections(results[1]);
        setStatus("live · updated " + clock(new Date()), "live");
      })
      .catch(fail)
      .then(function () {
        polling = false;
        if (again) poll();
      });
  }

  function kick(c, button) {
    var reason = $("kick-reason").value.trim();
    button.disabled = true;
    button.textContent = "Kicking…";
    api("/connections/" + encodeURIComponent(c.session) + "/close", {
      method: "POST", body: JSON.stringify(reason ? { reason: reason } : {})
    }).then(function () {
      logEvent([{ text: "kicked ", bold: false }, { text: label(c), bold: true },
                { text: " (" + c.session + ")" + (reason ? ": " + reason : "") }]);
    }).catch(function (err) {
      logEvent([{ text: "kick failed for " }, { text: label(c), bold: true }, { text: ": " + err.message }]);
      button.disabled = false;
      button.textContent = "Kick";
    }).then(poll);
  }

  ["filter-uid", "filter-ns"].forEach(function (id) {
    $(id).addEventListener("input", function () {
      // A new filter is a new view: rows that vanish are filtered out, not disconnected.
      known = null;
      poll();
    });
  });
  if (!token) {
    showBanner("No admin credential: open this page as /.admin/?auth=<admin credential> (owner in emulator mode).");
  }
  poll();
  setInterval(poll, 1000);
})();
"""#
}
