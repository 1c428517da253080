// Item map: item x checkpoint, item_maps.csv's map_value (log-odds vs neutral; < 0: the item yields).
"use strict";

(() => {
  const { el, select, table, section, plot, xOrder } = VIEW;
  const SCALE = VIEW.userScale(-1); // red where the item yields (< 0)

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const st = {
      s: VIEW.int(p, "s", 0),
      b: VIEW.int(p, "b", 0),
      k: p.k || meta.kinds[0],
      topic: p.topic || "",
      gold: p.gold || "",
      route: p.route || "",
      q: p.q || "",
      sort: p.sort || "mean",
    };
    const withMaps = meta.sweeps.map((sw, i) => i).filter((i) => meta.sweeps[i].pressure_banks.length);
    if (!withMaps.length) {
      app.replaceChildren(el("p", { text: "No item maps in these sweeps (results/item_maps.csv: the pressure study)." }));
      return;
    }
    if (!withMaps.includes(st.s)) st.s = withMaps[0];
    const controls = el("div", { class: "controls" });
    const chart = el("div", { class: "chart", id: "heatmap" });
    const list = el("div");
    app.replaceChildren(
      section("Item map", [controls, chart, list], "Rows: items, most-yielding first (lowest mean over the checkpoints shown in the report's heatmap order); columns: checkpoints in training order, base then each route. Colour: map_value from results/item_maps.csv, red where the item yields. Hover for the value; click a cell for the item.")
    );

    function render() {
      VIEW.busy();
      const sweep = meta.sweeps[st.s];
      if (st.b >= sweep.pressure_banks.length) st.b = 0;
      return VIEW.load(`map/${st.s}/${st.b}/${st.k}`).then((m) => {
        VIEW.setParams(st);
        const topics = [...new Set(m.topic)].filter((t) => t);
        const golds = [...new Set(m.gold)].filter((t) => t);
        const routes = [...new Set(sweep.columns.map((c) => c.route))];
        controls.replaceChildren(
          select("sweep", withMaps.map((i) => ({ value: i, label: meta.sweeps[i].label })), st.s, (v) => ((st.s = +v), (st.b = 0), render())),
          select("bank", sweep.pressure_banks.map((b, i) => ({ value: i, label: b })), st.b, (v) => ((st.b = +v), render())),
          select("turn", meta.kinds.map((k) => ({ value: k })), st.k, (v) => ((st.k = v), render())),
          select("topic", [{ value: "", label: "all" }, ...topics.map((t) => ({ value: t }))], st.topic, (v) => ((st.topic = v), render())),
          select("gold", [{ value: "", label: "all" }, ...golds.map((t) => ({ value: t }))], st.gold, (v) => ((st.gold = v), render())),
          select("route", [{ value: "", label: "all" }, ...routes.map((t) => ({ value: t }))], st.route, (v) => ((st.route = v), render())),
          select("sort", [{ value: "mean", label: "most-yielding first" }, { value: "id", label: "item id" }, ...sweep.columns.map((c, i) => ({ value: "c" + i, label: "value at " + c.name }))], st.sort, (v) => ((st.sort = v), render())),
          el("label", {}, ["find ", el("input", { name: "q", value: st.q, placeholder: "id or text", onchange: (e) => ((st.q = e.target.value), render()) })])
        );
        const { values } = VIEW.decode(m.z);
        const nc = sweep.columns.length;
        const cols = sweep.columns.map((c, i) => i).filter((i) => !st.route || sweep.columns[i].route === st.route);
        const q = st.q.toLowerCase();
        let rows = m.order.filter(
          (i) =>
            (!st.topic || m.topic[i] === st.topic) &&
            (!st.gold || m.gold[i] === st.gold) &&
            (!q || m.items[i].toLowerCase().includes(q) || m.text[i].toLowerCase().includes(q))
        );
        if (st.sort === "id") rows = rows.slice().sort((a, b) => m.items[a].localeCompare(m.items[b]));
        else if (st.sort.startsWith("c")) {
          const c = +st.sort.slice(1);
          const v = (i) => (Number.isNaN(values[i * nc + c]) ? Infinity : values[i * nc + c]);
          rows = rows.slice().sort((a, b) => v(a) - v(b));
        }
        const z = rows.map((i) => cols.map((c) => (Number.isNaN(values[i * nc + c]) ? null : values[i * nc + c])));
        let lim = 0;
        z.forEach((r) => r.forEach((v) => v !== null && (lim = Math.max(lim, Math.abs(v)))));
        window.VIEW_MAP = { rows, cols, items: m.items };
        const height = Math.min(1400, Math.max(320, rows.length * 16 + 160));
        const job = plot(
          chart,
          [
            {
              type: "heatmap",
              z,
              x: cols.map((c) => sweep.columns[c].name),
              y: rows.map((i) => m.items[i]),
              colorscale: SCALE,
              zmid: 0,
              zmin: -lim || -1,
              zmax: lim || 1,
              colorbar: { title: { text: "map value (< 0: yields)" } },
              hovertemplate: "item %{y}<br>%{x}<br>map value %{z:.4g}<extra></extra>",
              xgap: cols.length > 100 ? 0 : 1,
              ygap: rows.length > 200 ? 0 : 1,
            },
          ],
          { height, xaxis: xOrder(sweep), yaxis: { type: "category", autorange: "reversed", automargin: true, showticklabels: rows.length <= 120 }, title: { text: `${m.bank} · ${m.kind} turn · ${rows.length} items` } }
        ).then((gd) => {
          window.VIEW_MAP.gd = gd;
          VIEW.onCellClick(gd, (pt) => {
            location.href = `item.html#s=${st.s}&b=${st.b}&i=${rows[pt.pointIndex[0]]}`;
          });
        });
        const shown = rows.slice(0, 300).map((i, rank) => ({ rank: rank + 1, item_id: m.items[i], i, gold: m.gold[i], topic: m.topic[i], text: m.text[i] }));
        list.replaceChildren(
          el("h3", { text: `Items (${rows.length}${rows.length > 300 ? ", the first 300 listed" : ""})` }),
          table("items", [
            { key: "rank" },
            { key: "item_id", text: true, render: (r) => el("a", { class: "item", href: `item.html#s=${st.s}&b=${st.b}&i=${r.i}`, text: r.item_id }) },
            { key: "gold", text: true },
            { key: "topic", text: true },
            { key: "text", text: true },
          ], shown)
        );
        return job;
      }).then(VIEW.done, VIEW.fail);
    }
    return render();
  });
})();
