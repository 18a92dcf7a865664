// jevmem inspect: draws the graph jevmem.inspect.graph_data() exported into
// this page. Written for jevmem; no libraries, no network. The layout runs
// once, synchronously, at load (a seeded force layout: the same memory gives
// the same picture), so a headless browser's DOM dump holds the whole graph.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var VIEW_COLOURS = { semantic: "#1c7ed6", temporal: "#868e96", causal: "#e03131", entity: "#2f9e44" };
  var TYPE_COLOURS = { episodic: "#4263eb", semantic: "#0ca678", procedural: "#f08c00", preference: "#ae3ec9" };
  var data = JSON.parse(document.getElementById("jevmem-data").textContent);
  var nodes = data.nodes, edges = data.edges, q = data.query;
  var byId = {};
  nodes.forEach(function (n, i) { n.index = i; byId[n.id] = n; });
  edges = edges.filter(function (e) { return byId[e.src] && byId[e.dst]; });

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var x = tag === "svg" || ["circle", "line", "g", "title", "path"].indexOf(tag) >= 0
      ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (var k in attrs || {}) x.setAttribute(k, attrs[k]);
    if (text !== undefined) x.textContent = text;
    return x;
  }
  // a scope's readable name; two scopes can share one ({"a": "b, c=d"} and
  // {"a": "b", "c": "d"}), so the filter matches on scopeValue instead
  function scopeKey(s) {
    var keys = Object.keys(s || {}).sort();
    return keys.length ? keys.map(function (k) { return k + "=" + s[k]; }).join(", ") : "(global)";
  }
  function scopeValue(s) {
    return JSON.stringify(Object.keys(s || {}).sort().map(function (k) { return [k, s[k]]; }));
  }
  // as jevmem/_explain.py: the scaled score is rounded to 4 places before the
  // floor or ceil, so float noise (0.29 * 100 = 28.999...) moves no digit
  function floor2(v) { return (Math.floor(Math.round(v * 1e6) / 1e4) / 100).toFixed(2); }
  function ceil2(v) { return (Math.ceil(Math.round(v * 1e6) / 1e4) / 100).toFixed(2); }
  function when(ts) { return ts === null || ts === undefined ? "" : new Date(ts * 1000).toISOString().slice(0, 16).replace("T", " "); }

  // ---- the query's nodes and path -------------------------------------------
  var rank = {}, anchors = {}, onPath = {};
  if (q) {
    q.evidence.forEach(function (x) { rank[x.id] = x.rank; });
    q.anchors.forEach(function (id) { anchors[id] = true; });
    q.path.forEach(function (p) { onPath[p.src + ">" + p.dst + ">" + p.view] = true; });
  }
  function edgeOnPath(e) { return !!onPath[e.src + ">" + e.dst + ">" + e.view]; }
  var pathNode = {};
  Object.keys(rank).forEach(function (id) { pathNode[id] = true; });
  if (q) q.path.forEach(function (p) { pathNode[p.src] = true; pathNode[p.dst] = true; });

  // ---- layout: spring-electric, seeded on a spiral ---------------------------
  function layout() {
    var n = nodes.length, i, j;
    var x = new Float64Array(n), y = new Float64Array(n), dx = new Float64Array(n), dy = new Float64Array(n);
    for (i = 0; i < n; i++) {  // golden-angle spiral: spread out, deterministic
      var r = 10 * Math.sqrt(i + 0.5), a = i * 2.399963;
      x[i] = r * Math.cos(a); y[i] = r * Math.sin(a);
    }
    var ideal = 30, iters = n > 300 ? 120 : 250, t = 20;
    var links = edges.map(function (e) { return [byId[e.src].index, byId[e.dst].index, e.weight]; });
    for (var it = 0; it < iters; it++) {
      dx.fill(0); dy.fill(0);
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) {
        var ex = x[i] - x[j], ey = y[i] - y[j], d2 = ex * ex + ey * ey + 0.01;
        if (d2 > 90000) continue;  // far apart: no push worth computing
        var f = ideal * ideal / d2;
        dx[i] += ex * f; dy[i] += ey * f; dx[j] -= ex * f; dy[j] -= ey * f;
      }
      links.forEach(function (l) {
        var ex = x[l[0]] - x[l[1]], ey = y[l[0]] - y[l[1]], d = Math.sqrt(ex * ex + ey * ey) + 0.01;
        var f = (d / ideal) * (0.3 + l[2]) * 0.5;  // pull d^2/ideal along the edge, more for heavy edges
        dx[l[0]] -= ex * f; dy[l[0]] -= ey * f;
        dx[l[1]] += ex * f; dy[l[1]] += ey * f;
      });
      for (i = 0; i < n; i++) {
        dx[i] -= x[i] * 0.01; dy[i] -= y[i] * 0.01;  // gravity: keep islands near
        var m = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]) + 1e-9, s = Math.min(m, t) / m;
        x[i] += dx[i] * s; y[i] += dy[i] * s;
      }
      t = Math.max(1, t * 0.985);
    }
    nodes.forEach(function (nd, k) { nd.x = x[k]; nd.y = y[k]; });
  }

  // ---- drawing ---------------------------------------------------------------
  var svg = $("graph"), gEdges = $("edges"), gNodes = $("nodes");
  function draw() {
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    nodes.forEach(function (n) {
      minX = Math.min(minX, n.x); minY = Math.min(minY, n.y); maxX = Math.max(maxX, n.x); maxY = Math.max(maxY, n.y);
    });
    if (!nodes.length) { minX = minY = -50; maxX = maxY = 50; }
    // radii follow the drawing's size, strokes stay in screen pixels (non-scaling)
    var unit = Math.max(maxX - minX, maxY - minY, 100) / 90, pad = 3 * unit;
    svg.setAttribute("viewBox", [minX - pad, minY - pad, maxX - minX + 2 * pad, maxY - minY + 2 * pad].join(" "));
    edges.forEach(function (e) {
      var a = byId[e.src], b = byId[e.dst];
      e.dom = el("line", {
        "class": "edge" + (edgeOnPath(e) ? " path" : ""), x1: a.x, y1: a.y, x2: b.x, y2: b.y,
        stroke: VIEW_COLOURS[e.view] || "#999", "stroke-width": 0.8 + 2 * e.weight, "vector-effect": "non-scaling-stroke",
        "data-view": e.view, "data-src": e.src, "data-dst": e.dst
      });
      e.dom.appendChild(el("title", {}, e.view + (e.label ? " (" + e.label + ")" : "") + " " + e.src + " \u2192 " + e.dst + ", weight " + e.weight));
      gEdges.appendChild(e.dom);
    });
    nodes.forEach(function (n) {
      var cls = "node" + (rank[n.id] ? " evidence" : "") + (anchors[n.id] ? " anchor" : "");
      n.dom = el("circle", {
        "class": cls, cx: n.x, cy: n.y, r: unit * (rank[n.id] ? 1.6 : 1.1), fill: TYPE_COLOURS[n.type] || "#555",
        "vector-effect": "non-scaling-stroke",
        "data-id": n.id
      });
      n.dom.appendChild(el("title", {}, "#" + n.id + (n.speaker ? " " + n.speaker : "") + ": " + n.text.slice(0, 160)));
      n.dom.addEventListener("click", function () { select(n); });
      gNodes.appendChild(n.dom);
    });
    svg.setAttribute("data-nodes", nodes.length);
    svg.setAttribute("data-edges", edges.length);
  }

  // ---- filters -----------------------------------------------------------------
  var viewOn = {}, scopeByLabel = Object.create(null);
  function controls() {
    var counts = {};
    edges.forEach(function (e) { counts[e.view] = (counts[e.view] || 0) + 1; });
    Object.keys(VIEW_COLOURS).forEach(function (v) {
      viewOn[v] = true;
      var box = el("input", { type: "checkbox", "data-view": v });
      box.checked = true;
      box.addEventListener("change", function () { viewOn[v] = box.checked; apply(); });
      var lab = el("label");
      lab.appendChild(box);
      lab.appendChild(el("span", { "class": "swatch", style: "background:" + VIEW_COLOURS[v] }));
      lab.appendChild(document.createTextNode(v + " (" + (counts[v] || 0) + ")"));
      $("views").appendChild(lab);
    });
    Object.keys(TYPE_COLOURS).forEach(function (t) {
      var lab = el("div");
      lab.appendChild(el("span", { "class": "swatch", style: "background:" + TYPE_COLOURS[t] }));
      lab.appendChild(document.createTextNode(t));
      $("types").appendChild(lab);
    });
    // no prototype: a speaker named "__proto__" or "constructor" is a key like any other
    var scopes = Object.create(null), speakers = Object.create(null);
    nodes.forEach(function (n) {
      var v = scopeValue(n.scope);
      if (!(v in scopes)) scopes[v] = scopeKey(n.scope);
      if (n.speaker) speakers[n.speaker] = 1;
    });
    Object.keys(scopes).sort().forEach(function (v) {
      $("scope").appendChild(el("option", { value: v }, scopes[v]));
      // an address may name a scope by its label, unless two scopes share it
      scopeByLabel[scopes[v]] = scopes[v] in scopeByLabel ? null : v;
    });
    Object.keys(speakers).sort().forEach(function (s) { $("speaker").appendChild(el("option", { value: s }, s)); });
    ["scope", "speaker", "pathonly"].forEach(function (id) { $(id).addEventListener("change", apply); });
    $("search").addEventListener("input", apply);
  }
  function apply() {
    var scope = $("scope").value, speaker = $("speaker").value, words = $("search").value.toLowerCase().trim();
    var pathOnly = $("pathonly").checked, visible = {}, shownNodes = 0, shownEdges = 0;
    nodes.forEach(function (n) {
      var ok = (!scope || scopeValue(n.scope) === scope) && (!speaker || n.speaker === speaker) &&
        (!words || n.text.toLowerCase().indexOf(words) >= 0) && (!pathOnly || pathNode[n.id]);
      visible[n.id] = ok;
      n.dom.classList.toggle("hidden", !ok);
      if (ok) shownNodes++;
    });
    edges.forEach(function (e) {
      var ok = viewOn[e.view] && visible[e.src] && visible[e.dst] && (!pathOnly || edgeOnPath(e));
      e.dom.classList.toggle("hidden", !ok);
      if (ok) shownEdges++;
    });
    $("shown").textContent = "showing " + shownNodes + " of " + nodes.length + " nodes, " + shownEdges + " of " + edges.length + " edges";
  }

  // ---- the details panel ---------------------------------------------------------
  var selected = null;
  function select(n) {
    if (selected) selected.dom.classList.remove("selected");
    selected = n; n.dom.classList.add("selected");
    var box = $("details");
    box.textContent = "";
    box.appendChild(el("h2", {}, "Node " + n.id));
    var dl = el("dl");
    var links = edges.filter(function (e) { return e.src === n.id || e.dst === n.id; });
    var rows = [
      ["text", n.text], ["time", when(n.timestamp)], ["speaker", n.speaker || ""], ["type", n.type],
      ["scope", scopeKey(n.scope)], ["metadata", JSON.stringify(n.metadata)],
      ["entities", (n.entities || []).join(", ")], ["provenance", JSON.stringify(n.provenance)],
      ["evidence rank", rank[n.id] || ""],
      ["edges", links.map(function (e) { return e.view + " " + e.src + "\u2192" + e.dst + " " + e.weight; }).join("; ")]
    ];
    rows.forEach(function (r) {
      if (r[1] === "" || r[1] === "{}") return;
      dl.appendChild(el("dt", {}, r[0])); dl.appendChild(el("dd", {}, String(r[1])));
    });
    box.appendChild(dl);
  }

  // ---- the query panel -------------------------------------------------------------
  function queryPanel() {
    if (!q) return;
    $("query").hidden = false;
    $("qtext").textContent = "\u201c" + q.text + "\u201d";
    // the same words as the CLI (jevmem/_explain.py): which part of the early-stop rule failed
    var th = q.thresholds || {}, s = q.sufficiency, unmet = [];
    var ts = th.theta_suff || 0.95, tm = th.theta_missing || 0.15, tc = th.theta_contradiction || 0.15;
    if (s !== null && s < ts) unmet.push("sufficiency below " + ts.toFixed(2));
    if ((q.missing || 0) >= tm) unmet.push("missing " + ceil2(q.missing) + " (needs < " + tm.toFixed(2) + ")");
    if ((q.contradiction || 0) >= tc) unmet.push("contradiction " + ceil2(q.contradiction) + " (needs < " + tc.toFixed(2) + ")");
    $("qstop").textContent = "stop: " + q.stop_reason + "; " + q.rounds.length + " rounds; sufficiency " +
      (s === null ? "n/a" : floor2(s)) +
      (q.sufficient ? "; sufficient (early-stop rule met)" : "; early-stop rule not met: " + unmet.join(", "));
    var body = $("rounds").querySelector("tbody");
    q.rounds.forEach(function (r, i) {
      var a = r.assessment || {}, tr = el("tr");
      [i, r.candidates, r.admitted, a.sufficiency, a.missing].forEach(function (v) {
        tr.appendChild(el("td", {}, typeof v === "number" && v % 1 ? v.toFixed(2) : String(v === undefined ? "" : v)));
      });
      body.appendChild(tr);
    });
    q.evidence.forEach(function (x) {
      var n = byId[x.id], li = el("li", { "data-id": x.id },
        x.score.toFixed(3) + " " + (x.via ? "via " + x.via.view + " from " + x.via.from : "anchor") + ": " + (n ? n.text.slice(0, 80) : "#" + x.id));
      if (n) li.addEventListener("click", function () { select(n); });
      $("evidence").appendChild(li);
    });
  }

  // a stray "%" (#search=100%) is taken as written rather than stopping the page
  function decode(s) { try { return decodeURIComponent(s); } catch (e) { return s; } }
  // the page's address can set the filters: #views=semantic,causal&speaker=Maya&search=cello&path=1
  // and scope=user=maya (its label) or its option value
  function fromHash() {
    var h = Object.create(null);
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) h[decode(kv.slice(0, i))] = decode(kv.slice(i + 1));
    });
    if (h.views !== undefined) {
      var on = h.views.split(",");
      document.querySelectorAll("#views input").forEach(function (box) {
        var v = box.getAttribute("data-view");
        box.checked = on.indexOf(v) >= 0; viewOn[v] = box.checked;
      });
    }
    if (h.scope !== undefined) $("scope").value = scopeByLabel[h.scope] || h.scope;
    if (h.speaker !== undefined) $("speaker").value = h.speaker;
    if (h.search !== undefined) $("search").value = h.search;
    if (h.path !== undefined) $("pathonly").checked = h.path === "1";
  }

  layout();
  draw();
  controls();
  queryPanel();
  fromHash();
  apply();
  window.addEventListener("hashchange", function () { fromHash(); apply(); });
  var st = data.stats || {};
  $("summary").textContent = nodes.length + " nodes drawn of " + st.nodes + ", " + edges.length + " edges" +
    (data.scope ? ", scope " + scopeKey(data.scope) : "") + (data.truncated ? " (cut: see the note)" : "");
  if (data.truncated) { $("truncated").hidden = false; $("truncated").textContent = data.truncated.note; }
  document.body.setAttribute("data-ready", "1");
})();
