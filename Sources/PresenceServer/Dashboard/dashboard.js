"use strict";
// The operator dashboard (/.admin/?auth=<admin credential>). It sends the credential from its own
// ?auth= as `Authorization: Bearer …` and polls the admin API: /stats and /connections every second,
// /activity (the server's last ten minutes, one sample a second) every second after a first full
// read, /users (each user's presence and connection count) every two seconds (less often with
// tens of thousands of users).
// Stable hooks for tests: connection rows `#rows tr[data-session]` (data-uid), user rows
// `#user-rows tr[data-uid]` (data-ns), `td.presence` in both; counts `#stat-connections`,
// `#stat-online`, `#stat-held`, `#stat-namespaces`, `#stat-uptime`; rates `#rate-in`, `#rate-out`,
// `#rate-pushes`, `#rate-writes`; charts `#chart-connections`, `#chart-events` (polylines
// `.series-*`, `data-points`); the poll state `#status`, the activity log `#events`.
(function () {
  var params = new URLSearchParams(location.search);
  var token = params.get("auth") || "";
  var base = location.pathname.replace(/\/+$/, "");  // "/.admin"
  if (!/\/\.admin$/.test(base)) base = "/.admin";
  var $ = function (id) { return document.getElementById(id); };
  var rowsBody = $("rows"), userBody = $("user-rows");
  var rows = new Map();          // session -> <tr>
  var userRows = new Map();      // namespace \0 uid -> <tr>
  var known = null;              // session -> label, from the previous poll (null before the first)
  var presence = new Map();      // namespace \0 uid -> user entry from /users
  var presenceKnown = null;      // namespace \0 uid -> online, from the previous users poll
  var clientsByUser = new Map(); // namespace \0 uid -> [client label]
  var samples = [];              // /activity samples, oldest first
  var historyMs = 600000;        // what the server keeps (interval x capacity)
  var lastStats = null;
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

  // MARK: formatting

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
  // The same words as presence-client (LastSeenFormatter): Online, Last seen just now / 5m ago /
  // 2h ago / yesterday / 3 days ago / Mar 5, 2024; "No presence yet" for a user with a connection
  // but no presence node.
  function presenceText(user, now) {
    if (!user) return "–";
    if (user.online === true) return "Online";
    if (user.lastSeen == null) return user.online === false ? "Offline" : "No presence yet";
    var s = Math.max(0, Math.floor((now - user.lastSeen) / 1000));
    var when;
    if (s < 60) when = "just now";
    else if (s < 3600) when = Math.floor(s / 60) + "m ago";
    else if (s < 86400) when = Math.floor(s / 3600) + "h ago";
    else if (s < 2 * 86400) when = "yesterday";
    else if (s < 7 * 86400) when = Math.floor(s / 86400) + " days ago";
    else when = new Date(user.lastSeen).toLocaleDateString("en-US", { month: "short", day: "numeric", year: "numeric" });
    return "Last seen " + when;
  }
  // What a connection runs: the SDK it named (`s` stats), else a short form of its User-Agent.
  function clientLabel(c) {
    if (c.sdk) return c.sdk;
    var ua = c.userAgent || "";
    if (!ua) return "–";
    var m = /^Firebase\/5\/([^/]+)\/[^/]*\/(\w+)/.exec(ua);
    if (m) return "Firebase " + m[2] + " " + m[1];
    m = /(Edg|Firefox|Chrome|Safari)\/(\d+)/.exec(ua);
    if (m && /^Mozilla\//.test(ua)) return (m[1] === "Edg" ? "Edge" : m[1]) + " " + m[2];
    m = /^([\w.-]+)\/([\w.-]+)/.exec(ua);
    if (m) return m[1] + " " + m[2];
    return ua.length > 40 ? ua.slice(0, 39) + "…" : ua;
  }
  function clock(date) { return date.toTimeString().slice(0, 8); }
  function serverNow() { return Date.now() + clockSkew; }
  function label(c) { return c.uid != null ? c.uid : "anonymous"; }
  function userKey(namespace, uid) { return namespace + "\u0000" + uid; }

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
  function logEvent(parts) {
    var li = document.createElement("li");
    var t = document.createElement("span");
    t.className = "t";
    t.textContent = clock(new Date());
    li.appendChild(t);
    parts.forEach(function (part) {
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
  function setPresenceCell(td, user, now) {
    td.textContent = presenceText(user, now);
    td.className = "presence " + (user && user.online === true ? "online" : "offline");
    td.title = user && user.lastSeen != null ? "lastSeen " + new Date(user.lastSeen).toLocaleString() : "";
  }
  function emptyRow(body, columns, text) {
    var empty = body.querySelector("tr.empty");
    if (text == null) { if (empty) empty.remove(); return; }
    if (!empty) {
      empty = document.createElement("tr");
      empty.className = "empty";
      empty.appendChild(document.createElement("td")).colSpan = columns;
      body.appendChild(empty);
    }
    empty.firstChild.textContent = text;
  }
  function filtersActive() { return $("filter-uid").value.trim() !== "" || $("filter-ns").value.trim() !== ""; }
  function filterQuery(limit) {
    var q = new URLSearchParams();
    var uid = $("filter-uid").value.trim(), ns = $("filter-ns").value.trim();
    if (uid) q.set("uid", uid);
    if (ns) q.set("ns", ns);
    q.set("limit", String(limit));
    return q.toString();
  }

  // MARK: connections

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
    cell(tr, "presence");
    cell(tr, "session mono").textContent = c.session;
    var node = cell(tr, "node mono");
    node.textContent = c.node ? PresenceNodes.shortName(c.node) : "this node";
    if (c.node) node.title = c.node;
    cell(tr, "remote mono").textContent = (c.remote || "–").replace(/^::ffff:/, "");
    var client = cell(tr, "client");
    client.textContent = clientLabel(c);
    if (c.userAgent) client.title = c.userAgent;
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
    setPresenceCell(q("presence"), c.uid != null ? presence.get(userKey(c.namespace, c.uid)) : null, now);
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
        logEvent([{ text: label(c), bold: true }, { text: " connected to " + c.namespace + " (" + c.session + ", " + clientLabel(c) + ")" }]);
      }
    });
    rows.forEach(function (tr, session) {
      if (!seen.has(session)) { tr.remove(); rows.delete(session); }
    });
    if (previous !== null) {
      previous.forEach(function (who, session) {
        if (!seen.has(session)) logEvent([{ text: who, bold: true }, { text: " disconnected (" + session + ")" }]);
      });
    }
    known = seen;
    emptyRow(rowsBody, 15, list.length ? null : filtersActive() ? "No connections match the filters." : "No one is connected.");
    var total = data.total != null ? data.total : list.length;
    var shown = total > list.length ? "showing " + list.length + " of " + total : total + " shown";
    // A cluster's listing gathers every live node's connections; name the nodes that did not answer.
    var missing = (data.missing || []).map(PresenceNodes.shortName);
    if (data.cluster) shown += " · " + (data.nodes || []).length + " node" + ((data.nodes || []).length === 1 ? "" : "s");
    if (missing.length) shown += " · not answering: " + missing.join(", ");
    $("shown").textContent = shown;
    $("shown").classList.toggle("warn", missing.length > 0);
  }

  // MARK: users and presence

  // Which clients each user runs, from the connections just read (before the users are drawn).
  function indexClients(data) {
    clientsByUser = new Map();
    (data.connections || []).forEach(function (c) {
      if (c.uid == null) return;
      var key = userKey(c.namespace, c.uid);
      if (!clientsByUser.has(key)) clientsByUser.set(key, []);
      clientsByUser.get(key).push(clientLabel(c));
    });
  }

  function renderUsers(data) {
    var list = data.users || [];
    var now = serverNow();
    var seen = new Set();
    var previous = presenceKnown;
    presence = new Map();
    presenceKnown = new Map();
    list.forEach(function (u, index) {
      var key = userKey(u.namespace, u.uid);
      presence.set(key, u);
      presenceKnown.set(key, u.online === true);
      seen.add(key);
      var tr = userRows.get(key);
      if (!tr) {
        tr = document.createElement("tr");
        tr.setAttribute("data-uid", u.uid);
        tr.setAttribute("data-ns", u.namespace);
        cell(tr).appendChild(document.createElement("span")).className = "dot";
        var name = cell(tr, "user").appendChild(document.createElement("span"));
        name.className = "uid";
        name.textContent = u.uid;
        cell(tr, "ns").textContent = u.namespace;
        cell(tr, "presence");
        cell(tr, "conns num");
        cell(tr, "clients");
        if (previous !== null) tr.classList.add("fresh");
        userRows.set(key, tr);
      }
      tr.querySelector(".dot").className = u.online === true ? "dot on" : "dot off";
      setPresenceCell(tr.querySelector("td.presence"), u, now);
      tr.querySelector("td.conns").textContent = u.connections;
      var clients = clientsByUser.get(key) || [];
      var counted = {};
      clients.forEach(function (name) { counted[name] = (counted[name] || 0) + 1; });
      var text = Object.keys(counted).map(function (name) { return counted[name] > 1 ? name + " ×" + counted[name] : name; }).join(", ");
      tr.querySelector("td.clients").textContent = text || (u.connections ? "…" : "");
      tr.querySelector("td.clients").title = text;
      if (userBody.children[index] !== tr) userBody.insertBefore(tr, userBody.children[index] || null);
      if (previous !== null && previous.has(key) && previous.get(key) !== (u.online === true)) {
        logEvent([{ text: u.uid, bold: true }, { text: u.online === true ? " is online" : " went offline (" + presenceText(u, now).toLowerCase() + ")" }]);
      }
    });
    userRows.forEach(function (tr, key) {
      if (!seen.has(key)) { tr.remove(); userRows.delete(key); }
    });
    usersEvery = Math.max(2, Math.ceil((data.total || 0) / 20000));
    emptyRow(userBody, 6, list.length ? null : filtersActive() ? "No users match the filters." : "No presence yet: users appear when they connect or write " + (data.presence || "their presence") + ".");
    $("stat-online").textContent = fmtCount(data.online);
    $("users-shown").textContent = data.total > list.length ? "showing " + list.length + " of " + data.total : data.total + " shown";
    $("users-note").textContent = "Presence read from " + (data.presence || "users/$uid/presence.online") + (data.truncated ? "; only part of the users was read." : ".");
  }

  // MARK: stats and charts

  function renderStats(s) {
    clockSkew = s.time - Date.now();
    $("stat-connections").textContent = fmtCount(s.connections);
    $("stat-held").textContent = fmtCount(s.sessionsHeld);
    $("stat-namespaces").textContent = fmtCount(s.namespaces);
    $("stat-uptime").textContent = fmtDuration(s.uptimeSeconds * 1000);
    if (lastStats && s.time > lastStats.time) {
      var dt = (s.time - lastStats.time) / 1000;
      var rate = function (key) { return Math.max(0, (s[key] - lastStats[key]) / dt); };
      $("rate-in").textContent = fmtRate(rate("messagesIn"));
      $("rate-out").textContent = fmtRate(rate("messagesOut"));
      $("rate-pushes").textContent = fmtRate(rate("pushes"));
      $("rate-writes").textContent = fmtRate(rate("writes"));
    }
    if (!lastStats || s.time > lastStats.time) lastStats = s;
  }

  function addSamples(data) {
    if (data.intervalMs && data.capacity) historyMs = data.intervalMs * data.capacity;
    var last = samples.length ? samples[samples.length - 1].t : -Infinity;
    (data.samples || []).forEach(function (p) { if (p.t > last) samples.push(p); });
    var start = serverNow() - historyMs;
    while (samples.length && samples[0].t < start) samples.shift();
    drawCharts();
  }

  // The time axis: 1, 2, 5 or 10 minutes, the shortest that holds what the server has kept (a
  // fresh server's first minute fills the chart instead of a sliver of ten minutes).
  function chartWindow(now) {
    var span = samples.length ? now - samples[0].t : 0;
    var steps = [60000, 120000, 300000, 600000].filter(function (ms) { return ms <= historyMs; });
    for (var i = 0; i < steps.length; i++) if (span <= steps[i]) return steps[i];
    return historyMs;
  }

  function drawCharts() {
    var now = serverNow(), tooltip = $("tooltip"), windowMs = chartWindow(now);
    var pick = function (key) { return samples.map(function (p) { return { t: p.t, v: p[key] != null ? p[key] : null }; }); };
    PresenceChart.draw($("chart-connections"), [{ key: "connections", label: "connections", values: pick("connections"), area: true }],
                       { now: now, windowMs: windowMs, format: fmtCount, tooltip: tooltip });
    PresenceChart.draw($("chart-events"), [
      { key: "in", label: "in", values: pick("messagesIn"), area: true },
      { key: "out", label: "out", values: pick("messagesOut") },
    ], { now: now, windowMs: windowMs, format: function (v) { return fmtRate(v) + "/s"; }, tooltip: tooltip });
    var latest = samples[samples.length - 1];
    if (latest) {
      $("now-connections").textContent = fmtCount(latest.connections);
      $("now-in").textContent = fmtRate(latest.messagesIn) + "/s";
      $("now-out").textContent = fmtRate(latest.messagesOut) + "/s";
    }
  }

  // MARK: polling

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

  // /users reads every user's presence on the server's loop (about 0.5 µs a user: 50 ms for
  // 100,000), so it is polled every 2 s, and less often the more users there are.
  var polling = false, again = false, polls = 0, usersEvery = 2;
  function poll() {
    if (polling) { again = true; return; }
    polling = true;
    again = false;
    var wantUsers = polls % usersEvery === 0;
    var since = samples.length ? "?since=" + samples[samples.length - 1].t : "";
    polls++;
    Promise.all([api("/stats"), api("/connections?" + filterQuery(500)), wantUsers ? api("/users?" + filterQuery(500)) : null,
                 api("/activity" + since), wantUsers ? api("/nodes") : null])
      .then(function (results) {
        failures = 0;
        showBanner("");
        renderStats(results[0]);
        indexClients(results[1]);
        if (results[2]) renderUsers(results[2]);  // first: the connection rows show each user's presence
        renderConnections(results[1]);
        addSamples(results[3]);
        if (results[4]) PresenceNodes.render(results[4]);
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
    }).then(function (answer) {
      var how = answer && answer.forwarded ? "kick forwarded to the nodes that did not answer: "
        : answer && answer.node ? "kicked on node " + PresenceNodes.shortName(answer.node) + ": " : "kicked ";
      logEvent([{ text: how, bold: false }, { text: label(c), bold: true },
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
      presenceKnown = null;
      polls = 0;
      poll();
    });
  });
  window.addEventListener("resize", drawCharts);
  if (!token) {
    showBanner("No admin credential: open this page as /.admin/?auth=<admin credential> (owner in emulator mode).");
  }
  poll();
  setInterval(poll, 1000);
})();
