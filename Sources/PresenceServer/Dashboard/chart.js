"use strict";
// Small time-series charts in plain SVG for the operator dashboard: no library, nothing fetched.
// PresenceChart.draw(svg, series, options) redraws `svg` (sized by CSS) with one polyline per
// series over a fixed time window ending now; hovering shows the values at the nearest sample.
window.PresenceChart = (function () {
  var NS = "http://www.w3.org/2000/svg";
  var PAD = { left: 44, right: 8, top: 8, bottom: 18 };

  function el(name, attributes, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attributes || {}).forEach(function (key) { node.setAttribute(key, attributes[key]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  // 1, 2, 5, 10, 20, 50, …: the smallest such ceiling at or above `value`.
  function niceCeiling(value) {
    if (!(value > 0)) return 1;
    var magnitude = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * magnitude >= value) return steps[i] * magnitude;
    return 10 * magnitude;
  }

  function axisNumber(value) {
    if (value >= 1e6) return (value / 1e6).toFixed(value >= 1e7 ? 0 : 1) + "M";
    if (value >= 1e3) return (value / 1e3).toFixed(value >= 1e4 ? 0 : 1) + "k";
    return String(Math.round(value * 10) / 10);
  }

  // series: [{ key, label, values: [{ t, v }] }] (v may be null: no point); options: { now, windowMs,
  // format(v) for the tooltip, tooltip: element }.
  function draw(svg, series, options) {
    var width = Math.max(120, svg.clientWidth || 600), height = Math.max(60, svg.clientHeight || 132);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    var plotW = width - PAD.left - PAD.right, plotH = height - PAD.top - PAD.bottom;
    var start = options.now - options.windowMs;
    var max = 0, points = 0;
    series.forEach(function (s) {
      s.values.forEach(function (p) { if (p.v != null && p.t >= start) { max = Math.max(max, p.v); points++; } });
    });
    var top = niceCeiling(max);
    var x = function (t) { return PAD.left + Math.max(0, Math.min(1, (t - start) / options.windowMs)) * plotW; };
    var y = function (v) { return PAD.top + plotH - (v / top) * plotH; };

    [0, 0.5, 1].forEach(function (f) {
      var gy = (PAD.top + plotH - f * plotH).toFixed(1);
      el("line", { "class": "grid", x1: PAD.left, x2: width - PAD.right, y1: gy, y2: gy }, svg);
      el("text", { "class": "axis", x: PAD.left - 6, y: Number(gy) + 3.5, "text-anchor": "end" }, svg).textContent = axisNumber(top * f);
    });
    var ago = function (ms) { return ms >= 60000 ? "-" + Math.round(ms / 6000) / 10 + "m" : "-" + Math.round(ms / 1000) + "s"; };
    [[start, ago(options.windowMs)], [start + options.windowMs / 2, ago(options.windowMs / 2)], [options.now, "now"]].forEach(function (tick, i) {
      el("text", { "class": "axis", x: x(tick[0]), y: height - 4, "text-anchor": i === 0 ? "start" : i === 2 ? "end" : "middle" }, svg)
        .textContent = tick[1];
    });

    series.forEach(function (s) {
      var visible = s.values.filter(function (p) { return p.v != null && p.t >= start; });
      var coords = visible.map(function (p) { return x(p.t).toFixed(1) + "," + y(p.v).toFixed(1); });
      if (s.area && coords.length > 1) {
        var base = (PAD.top + plotH).toFixed(1);
        el("path", { "class": "area area-" + s.key,
                     d: "M" + x(visible[0].t).toFixed(1) + "," + base + " L" + coords.join(" L") + " L" + x(visible[visible.length - 1].t).toFixed(1) + "," + base + " Z" }, svg);
      }
      el("polyline", { "class": "series series-" + s.key, points: coords.join(" "), "data-count": coords.length }, svg);
    });
    svg.setAttribute("data-points", points);
    if (points === 0) {
      el("text", { "class": "empty-text", x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, "text-anchor": "middle" }, svg)
        .textContent = "waiting for the first samples…";
    }
    hover(svg, series, options, { x: x, start: start, top: PAD.top, bottom: PAD.top + plotH });
  }

  function hover(svg, series, options, geometry) {
    var cursor = el("line", { "class": "cursor", y1: geometry.top, y2: geometry.bottom, visibility: "hidden" }, svg);
    var tip = options.tooltip;
    svg.onmousemove = function (event) {
      var box = svg.getBoundingClientRect();
      var scale = Number(svg.getAttribute("viewBox").split(" ")[2]) / box.width;
      var mx = (event.clientX - box.left) * scale;
      var best = null;
      series[0].values.forEach(function (p) {
        if (p.t < geometry.start) return;
        var d = Math.abs(geometry.x(p.t) - mx);
        if (!best || d < best.d) best = { d: d, t: p.t };
      });
      if (!best || !tip) return;
      cursor.setAttribute("x1", geometry.x(best.t));
      cursor.setAttribute("x2", geometry.x(best.t));
      cursor.setAttribute("visibility", "visible");
      var parts = series.map(function (s) {
        var p = s.values.find(function (q) { return q.t === best.t; });
        return s.label + " " + (p && p.v != null ? options.format(p.v) : "–");
      });
      tip.textContent = new Date(best.t).toTimeString().slice(0, 8) + " · " + parts.join(" · ");
      tip.style.left = (event.clientX + 12) + "px";
      tip.style.top = (event.clientY - 30) + "px";
      tip.className = "show";
    };
    svg.onmouseleave = function () {
      cursor.setAttribute("visibility", "hidden");
      if (tip) tip.className = "";
    };
  }

  return { draw: draw, niceCeiling: niceCeiling };
})();
