// Field-set item: one item of an A/B or sycophancy-eval file along the checkpoints: every reading
// its study's per-item table holds (ab_scores.csv, sycophancy_eval_trials.csv) and its item map.
"use strict";

(() => {
  const { el, table, section, plot, xOrder } = VIEW;
  const WINDOW = 60; // checkpoints per table at once

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const s = VIEW.int(p, "s", 0);
    const t = p.t || "ab_sycophancy";
    const b = VIEW.int(p, "b", 0);
    const i = VIEW.int(p, "i", 0);
    const from = VIEW.int(p, "from", 0);
    const sweep = meta.sweeps[s];
    if (!sweep || !(sweep.field_sets[t] || []).length) {
      app.replaceChildren(el("p", { text: "No field-set items in these sweeps: open an item from the Field sets page." }));
      return;
    }
    return VIEW.load(`setitem/${s}/${t}/${b}/${i}`).then((it) => {
      const at = (k) => `setitem.html#s=${s}&t=${t}&b=${b}&i=${k}`;
      const nav = el("p", {}, [
        ...(i > 0 ? [el("a", { href: at(i - 1), text: "← previous item" }), " · "] : []),
        el("a", { href: `sets.html#s=${s}&t=${t}&b=${b}`, text: "item map" }),
        ...(i + 1 < it.n_items ? [" · ", el("a", { href: at(i + 1), text: "next item →" })] : []),
      ]);
      const shown = sweep.columns.map((c, k) => k).slice(from, from + WINDOW);
      const cols = (lead) => [...lead.map((k) => ({ key: k, text: true })), ...shown.map((k) => ({ key: "c" + k, label: sweep.columns[k].name }))];
      const withValues = (rows, values) => rows.map((r, j) => Object.assign({}, r, Object.fromEntries(values[j].map((v, k) => ["c" + k, v]))));
      const lead = [...it.reading_keys, "value"];
      const pchart = el("div", { class: "chart", id: "pchart" });
      const mchart = el("div", { class: "chart", id: "mchart" });
      const prob = it.readings.map((r, j) => [r, it.values[j]]).filter(([r]) => r.value.startsWith("p_"));
      const traces = prob.map(([r, v]) => ({
        type: "scatter",
        mode: "lines+markers",
        name: it.reading_keys.map((k) => r[k]).filter((x) => x).join(" · "),
        x: sweep.columns.map((c) => c.name),
        y: v,
        connectgaps: false,
      }));
      const mrows = Object.keys(it.map).map((k) => ({ reading: "map_value · " + k, source: it.maps_source }));
      const mvals = Object.values(it.map);
      const mtraces = Object.entries(it.map).map(([k, v]) => ({ type: "scatter", mode: "lines+markers", name: k, x: sweep.columns.map((c) => c.name), y: v, connectgaps: false }));
      const n = sweep.columns.length;
      const windows = [];
      for (let w = 0; w < n; w += WINDOW) windows.push({ value: w, label: `${sweep.columns[w].name} … ${sweep.columns[Math.min(n, w + WINDOW) - 1].name}` });
      const pick = n > WINDOW ? [VIEW.select("table columns", windows, from, (v) => (location.hash = `s=${s}&t=${t}&b=${b}&i=${i}&from=${v}`), "from")] : [];
      app.replaceChildren(
        section(`Item ${it.item_id}`, [
          nav,
          el("p", {}, [`sweep ${sweep.label} · ${it.study} · bank ${it.bank} · `, it.study === "ab_sycophancy" ? "the answer that agrees with the user " : "gold ", el("strong", { id: "gold", text: it.gold || "—" }), it.group ? ` · ${it.group}` : ""]),
          el("div", { class: "itemtext", id: "itemtext", text: it.text || "(the set's file is gone or changed since the sweep: its text is not shown)" }),
        ]),
        ...pick,
        section(`Readings along the checkpoints (results/${it.source})`, [pchart, table("readings", cols(lead), withValues(it.readings, it.values))], "One row per reading of the item and number the table holds; one column per checkpoint."),
        section(`Item map (results/${it.maps_source})`, [mchart, table("set_item_map", cols(["reading", "source"]), withValues(mrows, mvals))], it.note)
      );
      return Promise.all([
        plot(pchart, traces, { title: { text: "probabilities" }, xaxis: xOrder(sweep), yaxis: { range: [0, 1], title: { text: "P" } }, height: 420 }),
        plot(mchart, mtraces, { title: { text: "item map" }, xaxis: xOrder(sweep), yaxis: { title: { text: "map value" }, zeroline: true }, height: 360 }),
      ]);
    });
  });
})();
