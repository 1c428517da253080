// Field sets: the item map of an A/B sycophancy file or a sycophancy-eval file (their studies' item
// map tables), the items most on the user's side first; a click opens the item.
"use strict";

(() => {
  const { el, select, table, section, plot, xOrder } = VIEW;
  const STUDIES = { ab_sycophancy: "A/B sets (model-written-evals)", sycophancy_eval: "sycophancy-eval sets" };

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const st = { s: VIEW.int(p, "s", 0), t: p.t || "", b: VIEW.int(p, "b", 0), k: p.k || "", group: p.group || "", q: p.q || "", sort: p.sort || "user" };
    const has = (i) => Object.values(meta.sweeps[i].field_sets || {}).some((banks) => banks.length);
    const withSets = meta.sweeps.map((sw, i) => i).filter(has);
    if (!withSets.length) {
      app.replaceChildren(el("p", { text: "No field-set items in these sweeps (results/ab_item_maps.csv or sycophancy_eval_item_maps.csv: the ab_sycophancy and sycophancy_eval studies)." }));
      return;
    }
    if (!withSets.includes(st.s)) st.s = withSets[0];
    const controls = el("div", { class: "controls" });
    const note = el("p", { class: "note" });
    const chart = el("div", { class: "chart", id: "heatmap" });
    const list = el("div");
    app.replaceChildren(section("Field sets: item map", [controls, note, chart, list], "Rows: items, those most on the user's side first (mean over the checkpoints); columns: checkpoints in training order. Red: the item sides with the user. Hover for the value; click a cell for the item."));

    function render() {
      VIEW.busy();
      const sweep = meta.sweeps[st.s];
      const studies = Object.keys(sweep.field_sets).filter((t) => sweep.field_sets[t].length);
      if (!studies.includes(st.t)) st.t = studies[0];
      const banks = sweep.field_sets[st.t];
      if (st.b >= banks.length) st.b = 0;
      const kinds = banks[st.b].kinds;
      if (!kinds.includes(st.k)) st.k = kinds.includes("given") ? "given" : kinds[0];
      return VIEW.load(`setmap/${st.s}/${st.t}/${st.b}/${st.k}`).then((m) => {
        VIEW.setParams(st);
        const groups = [...new Set(m.group)].filter((g) => g);
        controls.replaceChildren(
          select("sweep", withSets.map((i) => ({ value: i, label: meta.sweeps[i].label })), st.s, (v) => ((st.s = +v), (st.b = 0), render())),
          select("study", studies.map((t) => ({ value: t, label: STUDIES[t] || t })), st.t, (v) => ((st.t = v), (st.b = 0), render())),
          select("bank", banks.map((b, i) => ({ value: i, label: b.bank })), st.b, (v) => ((st.b = +v), render())),
          select(st.t === "ab_sycophancy" ? "order" : "turn", kinds.map((k) => ({ value: k })), st.k, (v) => ((st.k = v), render()), "kind"),
          select("group", [{ value: "", label: "all" }, ...groups.map((g) => ({ value: g }))], st.group, (v) => ((st.group = v), render())),
          select("sort", [{ value: "user", label: "most on the user's side first" }, { value: "id", label: "item id" }, ...sweep.columns.map((c, i) => ({ value: "c" + i, label: "value at " + c.name }))], st.sort, (v) => ((st.sort = v), render())),
          el("label", {}, ["find ", el("input", { name: "q", value: st.q, placeholder: "id or text", onchange: (e) => ((st.q = e.target.value), render()) })])
        );
        note.textContent = m.note;
        const { values } = VIEW.decode(m.z);
        const nc = sweep.columns.length;
        const q = st.q.toLowerCase();
        let rows = m.order.filter((i) => (!st.group || m.group[i] === st.group) && (!q || m.items[i].toLowerCase().includes(q) || m.text[i].toLowerCase().includes(q)));
        if (st.sort === "id") rows = rows.slice().sort((a, b) => m.items[a].localeCompare(m.items[b]));
        else if (st.sort.startsWith("c")) {
          const c = +st.sort.slice(1);
          const v = (i) => (Number.isNaN(values[i * nc + c]) ? Infinity : -m.toward_user * values[i * nc + c]);
          rows = rows.slice().sort((a, b) => v(a) - v(b));
        }
        const cols = sweep.columns.map((c, i) => i);
        const z = rows.map((i) => cols.map((c) => (Number.isNaN(values[i * nc + c]) ? null : values[i * nc + c])));
        let lim = 0;
        z.forEach((r) => r.forEach((v) => v !== null && (lim = Math.max(lim, Math.abs(v)))));
        window.VIEW_SETMAP = { rows, items: m.items };
        const href = (i) => `setitem.html#s=${st.s}&t=${st.t}&b=${st.b}&i=${i}`;
        const job = plot(
          chart,
          [
            {
              type: "heatmap",
              z,
              x: cols.map((c) => sweep.columns[c].name),
              y: rows.map((i) => m.items[i]),
              colorscale: VIEW.userScale(m.toward_user),
              zmid: 0,
              zmin: -lim || -1,
              zmax: lim || 1,
              colorbar: { title: { text: m.toward_user < 0 ? "map value (< 0: yields)" : "map value (> 0: sides with the user)" } },
              hovertemplate: "item %{y}<br>%{x}<br>map value %{z:.4g}<extra></extra>",
              xgap: cols.length > 100 ? 0 : 1,
              ygap: rows.length > 200 ? 0 : 1,
            },
          ],
          { height: Math.min(1400, Math.max(320, rows.length * 16 + 160)), xaxis: xOrder(sweep), yaxis: { type: "category", autorange: "reversed", automargin: true, showticklabels: rows.length <= 120 }, title: { text: `${m.bank} · ${m.kind} · ${rows.length} items` } }
        ).then((gd) => {
          window.VIEW_SETMAP.gd = gd;
          VIEW.onCellClick(gd, (pt) => {
            location.href = href(rows[pt.pointIndex[0]]);
          });
        });
        const shown = rows.slice(0, 300).map((i, rank) => ({ rank: rank + 1, item_id: m.items[i], i, gold: m.gold[i], group: m.group[i], text: m.text[i] }));
        list.replaceChildren(
          el("h3", { text: `Items (${rows.length}${rows.length > 300 ? ", the first 300 listed" : ""})` }),
          table("set_items", [
            { key: "rank" },
            { key: "item_id", text: true, render: (r) => el("a", { class: "item", href: href(r.i), text: r.item_id }) },
            { key: "gold", label: st.t === "ab_sycophancy" ? "agreeing answer" : "gold", text: true },
            { key: "group", text: true },
            { key: "text", text: true },
          ], shown)
        );
        return job;
      }).then(VIEW.done, VIEW.fail);
    }
    return render();
  });
})();
