// Compare: two checkpoints (of one sweep or of two) item by item on the item map. The paired
// statistic and its CI come from the payload (analyses.bootstrap in Python); the page derives only
// each item's change B − A and the count of items that changed by at least the threshold.
"use strict";

(() => {
  const { el, select, table, section, plot } = VIEW;

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const sweeps = meta.sweeps;
    const last = sweeps[0].columns.length - 1;
    const st = {
      sa: VIEW.int(p, "sa", 0),
      ca: VIEW.int(p, "ca", 0),
      sb: VIEW.int(p, "sb", last > 0 ? 0 : Math.min(1, sweeps.length - 1)),
      cb: VIEW.int(p, "cb", Math.max(last, 0)),
      bb: VIEW.int(p, "bb", 0),
      k: p.k || meta.kinds[0],
      t: p.t !== undefined ? parseFloat(p.t) : 1,
    };
    if (!meta.pair_banks.length) {
      app.replaceChildren(el("p", { text: "No item maps to compare (results/item_maps.csv: the pressure study)." }));
      return;
    }
    const controls = el("div", { class: "controls" });
    const out = el("div");
    app.replaceChildren(
      section("Compare two checkpoints", [controls, out], "Pick A and B (two checkpoints of one sweep, or of two sweeps: another model, another dtype). Items are matched by id within the bank; the change is B − A on the item map (log-odds; < 0: yields more at B).")
    );
    const cks = (s) => sweeps[s].columns.map((c, i) => ({ value: i, label: c.name + " (" + c.route + ")" }));
    const sweepOpts = sweeps.map((s, i) => ({ value: i, label: s.label }));

    function available() {
      return meta.pairs === null || meta.pairs.some((q) => q[0] === st.sa && q[1] === st.ca && q[2] === st.sb && q[3] === st.cb);
    }

    function render() {
      VIEW.busy();
      VIEW.setParams(st);
      controls.replaceChildren(
        select("A sweep", sweepOpts, st.sa, (v) => ((st.sa = +v), (st.ca = 0), render()), "sa"),
        select("A checkpoint", cks(st.sa), st.ca, (v) => ((st.ca = +v), render()), "ca"),
        select("B sweep", sweepOpts, st.sb, (v) => ((st.sb = +v), (st.cb = 0), render()), "sb"),
        select("B checkpoint", cks(st.sb), st.cb, (v) => ((st.cb = +v), render()), "cb"),
        select("bank", meta.pair_banks.map((b, i) => ({ value: i, label: b })), st.bb, (v) => ((st.bb = +v), render()), "bb"),
        select("turn", meta.kinds.map((k) => ({ value: k })), st.k, (v) => ((st.k = v), render()), "k"),
        el("label", {}, ["changed when |B − A| ≥ ", el("input", { name: "t", type: "number", step: "any", value: String(st.t), onchange: (e) => ((st.t = parseFloat(e.target.value)), render()) }), " log-odds"])
      );
      if (!available()) {
        out.replaceChildren(el("p", { class: "note", id: "unavailable", text: "This static site holds the paired statistic for neighbouring checkpoints and same-named ones across sweeps only; `interp view OUT --serve` computes any pair." }));
        VIEW.done();
        return;
      }
      const key = `pair/${st.sa}/${st.ca}/${st.sb}/${st.cb}/${st.bb}/${st.k}`;
      return VIEW.load(key)
        .then((pr) => {
          const rows = pr.items.map((id, j) => {
            const d = pr.b[j] - pr.a[j];
            return { item_id: id, a: pr.a[j], b: pr.b[j], delta: d, abs_delta: Math.abs(d), changed: Math.abs(d) >= st.t ? "yes" : "" };
          });
          const changed = rows.filter((r) => r.changed).length;
          const s = pr.stat;
          const A = sweeps[st.sa].label + " · " + sweeps[st.sa].columns[st.ca].name;
          const B = sweeps[st.sb].label + " · " + sweeps[st.sb].columns[st.cb].name;
          const num = (id, v) => el("strong", { id, "data-v": v === null ? "" : String(v), title: String(v), text: VIEW.fmt(v) });
          const chart = el("div", { class: "chart", id: "scatter" });
          const lim = Math.max(1e-12, ...rows.map((r) => Math.max(Math.abs(r.a), Math.abs(r.b))));
          out.replaceChildren(
            el("p", { class: "stat" }, [
              `${s.name}: `, num("stat-mean", s.mean), " (95% CI ", num("stat-lo", s.lo), " … ", num("stat-hi", s.hi), `) over `, num("stat-n", s.n),
              ` items; item bootstrap, ${s.n_boot} resamples, seed ${s.seed}${s.lo === null && s.n ? " (undefined under 5 items)" : ""}.`,
            ]),
            el("p", { class: "stat" }, [num("changed", changed), ` of ${rows.length} items changed by at least ${st.t} log-odds (derived here from the two columns of item_maps.csv).`]),
            el("p", { class: "note", text: `A = ${A} (${pr.banks[0]}), B = ${B} (${pr.banks[1]}), ${pr.kind} turn.` }),
            chart,
            table("changes", [
              { key: "item_id", text: true },
              { key: "a", label: "A" },
              { key: "b", label: "B" },
              { key: "delta", label: "B − A" },
              { key: "abs_delta", label: "|B − A|" },
              { key: "changed", text: true },
            ], rows, { sort: "abs_delta", desc: true })
          );
          return plot(
            chart,
            [
              { type: "scatter", mode: "lines", x: [-lim, lim], y: [-lim, lim], line: { color: "#bbb", dash: "dash" }, hoverinfo: "skip", showlegend: false },
              { type: "scatter", mode: "markers", x: pr.a, y: pr.b, text: pr.items, marker: { color: rows.map((r) => (r.changed ? "#d62728" : "#1f77b4")) }, hovertemplate: "%{text}<br>A %{x:.4g}<br>B %{y:.4g}<extra></extra>", showlegend: false },
            ],
            { title: { text: "item map: B against A (red: changed)" }, xaxis: { title: { text: "A: " + A }, zeroline: true }, yaxis: { title: { text: "B: " + B }, zeroline: true }, height: 420 }
          );
        })
        .then(VIEW.done, VIEW.fail);
    }
    return render();
  });
})();
