// interp view: what every page shares. Data comes as one JSON payload per key (interp/view/site.py):
// on a static site from data/KEY.js (a script tag works on file://, fetch does not), served from
// api/KEY.json. Pages show the numbers the payloads carry; a derived number is said to be one.
"use strict";

const VIEW = (() => {
  const got = {};
  const waiting = {};

  function put(key, data) {
    got[key] = data;
    (waiting[key] || []).forEach((w) => w.resolve(data));
    delete waiting[key];
  }

  function load(key) {
    if (key in got) return Promise.resolve(got[key]);
    if (window.VIEW_MODE === "api") {
      return fetch("api/" + key + ".json").then((r) => {
        if (!r.ok) return r.text().then((t) => Promise.reject(new Error(key + ": " + (t || r.status))));
        return r.json().then((d) => (got[key] = d));
      });
    }
    return new Promise((resolve, reject) => {
      const first = !(key in waiting);
      (waiting[key] = waiting[key] || []).push({ resolve, reject });
      if (!first) return;
      const s = document.createElement("script");
      s.src = "data/" + key + ".js";
      s.onerror = () => {
        const ws = waiting[key] || [];
        delete waiting[key];
        ws.forEach((w) => w.reject(new Error("this static site holds no data for " + key)));
      };
      document.head.appendChild(s);
    });
  }

  function site() {
    return load("site");
  }

  // ---------------------------------------------------------------- page state in the URL hash
  function params() {
    const out = {};
    new URLSearchParams(location.hash.slice(1)).forEach((v, k) => (out[k] = v));
    return out;
  }
  function setParams(p) {
    const q = new URLSearchParams();
    Object.keys(p).forEach((k) => p[k] !== undefined && p[k] !== null && q.set(k, p[k]));
    history.replaceState(null, "", "#" + q.toString());
  }
  function int(p, key, dflt) {
    const v = parseInt(p[key], 10);
    return Number.isFinite(v) ? v : dflt;
  }

  // ---------------------------------------------------------------- numbers
  function fmt(v) {
    if (v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v))) return "—";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
    return v.toPrecision(4);
  }

  // ---------------------------------------------------------------- DOM
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => {
      if (v === undefined || v === null) return;
      if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    });
    (children || []).forEach((c) => e.append(c));
    return e;
  }

  function select(label, options, value, onchange, name) {
    const s = el("select", { name: name || label, onchange: () => onchange(s.value) });
    options.forEach((o) => {
      const opt = el("option", { value: String(o.value), text: o.label === undefined ? String(o.value) : o.label });
      if (String(o.value) === String(value)) opt.selected = true;
      s.append(opt);
    });
    return el("label", {}, [label + " ", s]);
  }

  function numCell(v) {
    const raw = v === null || v === undefined ? "" : String(v);
    return el("td", { class: "num", "data-v": raw, title: raw, text: fmt(v) });
  }

  // columns: [{key, label, text: bool (left-aligned text), render: (row) => Node}]
  function table(name, columns, rows, opts) {
    opts = opts || {};
    let sortKey = opts.sort || null;
    let desc = !!opts.desc;
    const t = el("table", { "data-name": name });
    const head = el("tr");
    const body = el("tbody");
    columns.forEach((c) => {
      head.append(
        el("th", {
          class: c.text ? "t" : "",
          "data-col": c.key,
          text: c.label || c.key,
          title: "sort by " + (c.label || c.key),
          onclick: () => {
            desc = sortKey === c.key ? !desc : false;
            sortKey = c.key;
            draw();
          },
        })
      );
    });
    t.append(el("thead", {}, [head]), body);
    function value(r, c) {
      return c.value ? c.value(r) : r[c.key];
    }
    function draw() {
      let shown = rows.slice();
      if (sortKey) {
        const c = columns.find((x) => x.key === sortKey);
        shown.sort((a, b) => {
          const x = value(a, c);
          const y = value(b, c);
          if (x === y) return 0;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          const r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return desc ? -r : r;
        });
      }
      body.replaceChildren(
        ...shown.map((r) =>
          el(
            "tr",
            opts.rowAttrs ? opts.rowAttrs(r) : {},
            columns.map((c) => {
              if (c.render) return el("td", { class: c.text ? "t" : "", "data-col": c.key }, [c.render(r)]);
              const v = value(r, c);
              const td = typeof v === "number" || v === null ? numCell(v) : el("td", { class: "t", text: v === undefined ? "" : String(v) });
              td.setAttribute("data-col", c.key);
              return td;
            })
          )
        )
      );
    }
    draw();
    return el("div", { class: "scroll" }, [t]);
  }

  function section(title, children, note) {
    return el("section", {}, [el("h2", { text: title }), ...(note ? [el("p", { class: "note", text: note })] : []), ...children]);
  }

  // ---------------------------------------------------------------- charts (Plotly, vendored)
  const CONFIG = { displaylogo: false, responsive: true };
  // a chart drawn into a div not yet on the page would take Plotly's default width (700 px), wider
  // than its cell: wait for the caller to put it in place (a task later) and draw at the cell's width
  function plot(div, traces, layout) {
    const draw = () => Plotly.newPlot(div, traces, Object.assign({ margin: { l: 60, r: 20, t: 36, b: 80 }, font: { size: 11 } }, layout), CONFIG);
    return div.isConnected ? draw() : new Promise((done) => setTimeout(done, 0)).then(draw);
  }

  // one trace per line of the lineage (sweep.groups): the routes as routes, checkpoints in order
  function routeTraces(sweep, rows, y, lo, hi, extra) {
    return sweep.groups.map((g) => {
      const pts = g.checkpoints.map((c) => rows.find((r) => String(r.checkpoint) === c)).filter((r) => r);
      const t = Object.assign(
        {
          type: "scatter",
          mode: g.joined ? "lines+markers" : "markers",
          name: g.label,
          x: pts.map((r) => String(r.checkpoint)),
          y: pts.map((r) => r[y]),
        },
        extra || {}
      );
      if (lo && hi) {
        t.error_y = {
          type: "data",
          symmetric: false,
          array: pts.map((r) => (r[hi] === null ? null : r[hi] - r[y])),
          arrayminus: pts.map((r) => (r[lo] === null ? null : r[y] - r[lo])),
        };
      }
      return t;
    });
  }

  // a long sweep labels some of its checkpoints (Plotly measures every label it draws)
  function xOrder(sweep) {
    const axis = { type: "category", categoryorder: "array", categoryarray: sweep.columns.map((c) => c.name), automargin: true };
    return sweep.columns.length > 60 ? Object.assign(axis, { nticks: 30, tickangle: -60 }) : axis;
  }

  function decode(m) {
    const bin = atob(m.f32);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return { shape: m.shape, values: new Float32Array(bytes.buffer) };
  }

  const uniq = (xs) => [...new Set(xs.map(String))];

  // the item maps' diverging colours: red where the item sides with the user. towardUser -1: low
  // values do (the pressure maps, < 0 yields); +1: high values do (the A/B maps)
  const RED_LOW = [
    [0, "#b2182b"],
    [0.25, "#ef8a62"],
    [0.5, "#f7f7f7"],
    [0.75, "#67a9cf"],
    [1, "#2166ac"],
  ];
  const userScale = (towardUser) => (towardUser < 0 ? RED_LOW : RED_LOW.map(([x], i) => [x, RED_LOW[RED_LOW.length - 1 - i][1]]));

  // the sweeps that hold a study's results (meta.sweeps[i][flag]); none: say so and return null
  function sweepsWith(app, meta, flag, missing) {
    const found = meta.sweeps.map((s, i) => i).filter((i) => meta.sweeps[i][flag]);
    if (!found.length) app.replaceChildren(el("p", { text: missing }));
    return found.length ? found : null;
  }

  // a page of controls, one chart and what a click on the chart opens under it
  function drillPage(app, title, note, chartId) {
    const parts = { controls: el("div", { class: "controls" }), chart: el("div", { class: "chart", id: chartId }), drill: el("div", { id: "drill" }) };
    app.replaceChildren(section(title, [parts.controls, parts.chart, parts.drill], note));
    return parts;
  }

  // a click on a heatmap cell: open(point) draws what it opens; the page is busy meanwhile
  function onCellClick(gd, open) {
    if (gd.removeAllListeners) gd.removeAllListeners("plotly_click");
    gd.on("plotly_click", (ev) => {
      busy();
      Promise.resolve(open(ev.points[0])).then(done, fail);
    });
  }

  // ---------------------------------------------------------------- page start and end
  function start(render) {
    // a link to this page with other parameters only changes the hash: draw the page anew
    window.addEventListener("hashchange", () => location.reload());
    const app = document.getElementById("app");
    site()
      .then((meta) => render(app, meta))
      .then(done, fail);
  }
  function busy() {
    document.body.setAttribute("data-ready", "0");
  }
  function done() {
    window.VIEW_READY_MS = performance.now();
    document.body.setAttribute("data-ready", "1");
  }
  function fail(err) {
    document.getElementById("app").append(el("p", { class: "error", text: String(err && err.message ? err.message : err) }));
    document.body.setAttribute("data-ready", "error");
  }

  return { put, load, site, params, setParams, int, fmt, el, select, table, section, plot, routeTraces, xOrder, decode, start, busy, done, fail, numCell, uniq, userScale, sweepsWith, drillPage, onCellClick };
})();
