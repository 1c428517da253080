// Item: one pressure item along the checkpoints: P(planted verdict) of every condition (the units'
// trials), its item map (item_maps.csv), its prompts as the model saw them, sampled replies, probes.
"use strict";

(() => {
  const { el, table, section, plot, xOrder } = VIEW;
  const COLOR = { first: "#555", opinion: "#d62728", challenge: "#ff7f0e", neutral: "#1f77b4" };

  // the lines of the lineage as one trace (routes drawn as routes, split by gaps) and its unrelated
  // models as points: a reading costs Plotly two traces at most, however many routes
  function routeLines(sweep, values, name, style, legend) {
    const col = Object.fromEntries(sweep.columns.map((c, i) => [c.name, i]));
    const joined = { x: [], y: [] };
    const apart = { x: [], y: [] };
    sweep.groups.forEach((g) => {
      const to = g.joined ? joined : apart;
      if (g.joined && to.x.length) (to.x.push(null), to.y.push(null));
      g.checkpoints.forEach((c) => (to.x.push(c), to.y.push(values[col[c]])));
    });
    const many = sweep.columns.length > 100;
    return [
      [joined, many ? "lines" : "lines+markers"],
      [apart, "markers"],
    ]
      .filter(([xy]) => xy.x.length)
      .map(([xy, mode]) =>
        Object.assign({ type: "scatter", mode, name, legendgroup: legend || name, showlegend: false, connectgaps: false, x: xy.x, y: xy.y }, style)
      );
  }

  // one legend entry per group of lines (the first trace of each group shows it)
  function legendOnce(traces) {
    const seen = new Set();
    traces.forEach((t) => {
      if (!seen.has(t.legendgroup)) (seen.add(t.legendgroup), (t.showlegend = true), (t.name = t.legendgroup));
    });
    return traces;
  }

  function label(c) {
    const turn = c.turn_kind === "opinion" ? "opinion " + c.turn_side : c.turn_kind + " " + c.turn_variant;
    return `${c.readout} · planted ${c.planted} · ${turn}`;
  }

  // a table of one row per reading, one column per checkpoint: at most WINDOW checkpoints at once
  const WINDOW = 60;
  function byCheckpoint(sweep, rows, values, lead, from) {
    const shown = sweep.columns.map((c, i) => i).slice(from, from + WINDOW);
    const cols = [...lead.map((k) => ({ key: k, text: true })), ...shown.map((i) => ({ key: "c" + i, label: sweep.columns[i].name }))];
    const data = rows.map((r, j) => Object.assign({}, r, Object.fromEntries(values[j].map((v, i) => ["c" + i, v]))));
    return [cols, data];
  }

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const s = VIEW.int(p, "s", 0);
    const b = VIEW.int(p, "b", 0);
    const i = VIEW.int(p, "i", 0);
    const from = VIEW.int(p, "from", 0);
    const sweep = meta.sweeps[s];
    if (!sweep || !sweep.pressure_banks.length) {
      app.replaceChildren(el("p", { text: "No pressure items in these sweeps: open an item from the item map." }));
      return;
    }
    return VIEW.load(`item/${s}/${b}/${i}`).then((it) => {
      const nav = el("p", {}, [
        ...(i > 0 ? [el("a", { href: `item.html#s=${s}&b=${b}&i=${i - 1}`, text: "← previous item" }), " · "] : []),
        el("a", { href: `map.html#s=${s}&b=${b}`, text: "item map" }),
        ...(i + 1 < it.n_items ? [" · ", el("a", { href: `item.html#s=${s}&b=${b}&i=${i + 1}`, text: "next item →" })] : []),
      ]);
      const head = section(`Item ${it.item_id}`, [
        nav,
        el("p", {}, [`sweep ${sweep.label} · bank ${it.bank} · gold `, el("strong", { id: "gold", text: it.gold || "—" }), it.topic ? ` · topic ${it.topic}` : "", ` · planted verdicts: ${it.planted.join(", ")}`]),
        el("div", { class: "itemtext", id: "itemtext", text: it.text || "(the bank file is gone or changed since the sweep: its text is not shown)" }),
      ]);
      const pchart = el("div", { class: "chart", id: "pchart" });
      const mchart = el("div", { class: "chart", id: "mchart" });
      const traces = [];
      it.conditions.forEach((c, j) =>
        routeLines(sweep, it.p_planted[j], label(c), {
          line: { color: COLOR[c.turn_kind], dash: c.readout === "slot" ? "solid" : "dot", width: 1 },
          marker: { color: COLOR[c.turn_kind], size: 5 },
          hovertemplate: label(c) + "<br>%{x}: P = %{y:.4g}<extra></extra>",
        }, `${c.readout} · planted ${c.planted} · ${c.turn_kind}`).forEach((t) => traces.push(t))
      );
      legendOnce(traces);
      const [pcols, prows] = byCheckpoint(sweep, it.conditions, it.p_planted, ["readout", "planted", "turn_kind", "turn_side", "turn_variant"], from);
      const mtraces = [];
      const mrows = [];
      const mvals = [];
      Object.entries(it.map).forEach(([kind, v]) => {
        routeLines(sweep, v, "item map · " + kind, { line: { color: COLOR[kind] }, marker: { color: COLOR[kind] } }).forEach((t) => mtraces.push(t));
        mrows.push({ reading: "map_value · " + kind, source: "item_maps.csv" });
        mvals.push(v);
      });
      if (it.p_gold_first.length) {
        routeLines(sweep, it.p_gold_first, "first turn P(gold)", { yaxis: "y2", line: { color: COLOR.first, dash: "dot" }, marker: { color: COLOR.first } }).forEach((t) => mtraces.push(t));
        mrows.push({ reading: "first-turn P(gold)", source: "cache first_turn" });
        mvals.push(it.p_gold_first);
      }
      const [mcols, mdata] = byCheckpoint(sweep, mrows, mvals, ["reading", "source"], from);
      const prompts = it.prompts.length
        ? it.prompts.map((g) =>
            el("div", {}, [
              el("h3", { text: "As the model saw them at " + g.columns.map((c) => (c === null ? "?" : sweep.columns[c].name)).join(", ") }),
              ...g.prompts.map((q) =>
                el("details", {}, [
                  el("summary", { text: q.turn_kind === "first" ? "first turn (unpressured)" : label(Object.assign({ readout: "prompt" }, q)) }),
                  el("pre", { text: q.prompt }),
                ])
              ),
            ])
          )
        : [el("p", { class: "note", text: "This sweep's units carry no prompts (written before interp kept them): rerun the sweep into a new OUT to record them." })];
      const extra = [];
      if (it.replies.length)
        extra.push(section("Sampled replies", [table("replies", ["checkpoint", "planted", "turn_kind", "turn_side", "turn_variant", "sample", "reply", "parsed"].map((k) => ({ key: k, text: k !== "sample" })), it.replies)], "Every reply the sampled readout drew, and the verdict parsed from it (blank: none)."));
      if (it.probes.length)
        extra.push(section("Probes of this study (results/probes.csv)", [table("probes", Object.keys(it.probes[0]).map((k) => ({ key: k, text: typeof it.probes[0][k] === "string" })), it.probes)], "interp probe scores a checkpoint's readout over all items (per layer), not one item: the rows of this item's study."));
      const n = sweep.columns.length;
      const windows = [];
      for (let w = 0; w < n; w += WINDOW) windows.push({ value: w, label: `${sweep.columns[w].name} … ${sweep.columns[Math.min(n, w + WINDOW) - 1].name}` });
      const pick = n > WINDOW ? [VIEW.select("table columns", windows, from, (v) => (location.hash = `s=${s}&b=${b}&i=${i}&from=${v}`), "from")] : [];
      app.replaceChildren(
        head,
        ...pick,
        section("P(planted verdict) per condition along the checkpoints", [pchart, table("p_planted", pcols, prows)], "From each checkpoint's cache unit (the trials table; results/pressure_trials.csv holds the same values). Solid: slot readout, dotted: sampled."),
        section("Item map and the unpressured first turn", [mchart, table("item_map", mcols, mdata)]),
        section("Prompts", prompts, "Chat template rendered, as scored; each ends where the verdict is read."),
        ...extra
      );
      return Promise.all([
        plot(pchart, traces, { title: { text: "P(planted verdict)" }, xaxis: xOrder(sweep), yaxis: { range: [0, 1], title: { text: "P" } }, height: 420 }),
        plot(mchart, legendOnce(mtraces), {
          title: { text: "item map (log-odds vs neutral; < 0: yields)" },
          xaxis: xOrder(sweep),
          yaxis: { title: { text: "map value" }, zeroline: true },
          yaxis2: { overlaying: "y", side: "right", range: [0, 1], title: { text: "P(gold), first turn" } },
          height: 380,
        }),
      ]);
    });
  });
})();
