// The cluster's node list on the operator dashboard (`--storage redis`): dashboard.js polls
// /.admin/nodes and calls PresenceNodes.render(data). The panel stays hidden on a single node.
// Test hooks: `#nodes-panel`, `#node-rows tr[data-node]` with `td.node`, `td.address`,
// `td.conns`, `td.lag`, `td.beat`, `td.state`.
var PresenceNodes = (function () {
  "use strict";
  function shortName(id) { return id ? String(id).split("#")[0] : "–"; }

  function render(data) {
    var panel = document.getElementById("nodes-panel");
    if (!panel || !data) return;
    panel.hidden = !data.cluster;
    if (!data.cluster) return;
    var body = document.getElementById("node-rows");
    body.textContent = "";
    (data.nodes || []).forEach(function (n) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-node", n.id);
      if (n.self) tr.className = "self";
      var add = function (cls, text, title) {
        var td = document.createElement("td");
        td.className = cls;
        td.textContent = text;
        if (title) td.title = title;
        tr.appendChild(td);
        return td;
      };
      var state = add("state", "");
      var dot = document.createElement("span");
      dot.className = n.state === "alive" ? "dot on" : "dot idle";
      dot.title = n.state || "unknown";
      state.appendChild(dot);
      add("node mono", shortName(n.id) + (n.self ? " (this node)" : ""), n.id);
      add("address mono", n.address || "–");
      add("conns num", n.connections != null ? String(n.connections) : "–");
      add("lag num", n.lag != null ? String(n.lag) : "–");
      add("beat num", n.beatAgeMs != null ? (n.beatAgeMs < 1500 ? "now" : Math.round(n.beatAgeMs / 1000) + " s ago") : "–",
          n.lastBeat ? new Date(n.lastBeat).toLocaleString() : "");
      body.appendChild(tr);
    });
    var note = document.getElementById("nodes-note");
    if (note) note.textContent = "Redis " + (data.redis || "") + (data.redisUp ? "" : " · unreachable from this node");
  }

  return { render: render, shortName: shortName };
})();
