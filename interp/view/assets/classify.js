// Classify: the confusion matrix of a checkpoint (classify_confusion.csv); click a cell for its
// examples with their per-label probabilities (classify_predictions.csv) and the bank's text.
"use strict";

(() => {
  const { el, select, table, plot, uniq } = VIEW;

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const withCls = VIEW.sweepsWith(app, meta, "classify", "No classify results in these sweeps (results/classify_confusion.csv).");
    if (!withCls) return;
    const st = { s: VIEW.int(p, "s", withCls[0]), c: VIEW.int(p, "c", 0), bank: p.bank || "", task: p.task || "", order: p.order || "", gold: p.gold, pred: p.pred };
    const { controls, chart, drill } = VIEW.drillPage(app, "Classify: confusion matrix", "Counts from results/classify_confusion.csv (rows: gold label, columns: the label given most probability). Click a cell for its examples.", "confusion");

    function showDrill() {
      if (st.gold === undefined || st.pred === undefined) return drill.replaceChildren();
      return VIEW.load(`classify/${st.s}/${st.c}`).then((d) => {
        const rows = d.rows.filter((r) => String(r.bank) === st.bank && String(r.task) === st.task && String(r.order) === st.order && String(r.gold) === st.gold && String(r.pred) === st.pred);
        const pcols = rows.length ? Object.keys(rows[0]).filter((k) => k.startsWith("p_") && rows.some((r) => r[k] !== null)) : [];
        const texts = ["title", "body", "comment", "text"].filter((k) => rows.some((r) => r[k]));
        drill.replaceChildren(
          el("h3", { text: `gold ${st.gold} → predicted ${st.pred}: ${rows.length} examples` }),
          table("examples", [{ key: "item_id", text: true }, { key: "gold", text: true }, { key: "pred", text: true }, { key: "confidence" }, ...pcols.map((k) => ({ key: k })), { key: "language_form", text: true }, ...texts.map((k) => ({ key: k, text: true }))], rows)
        );
      });
    }

    function render() {
      VIEW.busy();
      const sweep = meta.sweeps[st.s];
      if (st.c >= sweep.columns.length) st.c = 0;
      return VIEW.load(`classify/${st.s}`)
        .then((d) => {
          const ck = sweep.columns[st.c].name;
          const all = d.confusion.filter((r) => String(r.checkpoint) === ck);
          const banks = uniq(all.map((r) => r.bank));
          const tasks = uniq(all.map((r) => r.task));
          const orders = uniq(all.map((r) => r.order));
          if (!banks.includes(st.bank)) st.bank = banks[0];
          if (!tasks.includes(st.task)) st.task = tasks[0];
          if (!orders.includes(st.order)) st.order = orders.includes("given") ? "given" : orders[0];
          VIEW.setParams(st);
          controls.replaceChildren(
            select("sweep", withCls.map((i) => ({ value: i, label: meta.sweeps[i].label })), st.s, (v) => ((st.s = +v), (st.c = 0), (st.gold = st.pred = undefined), render())),
            select("checkpoint", sweep.columns.map((c, i) => ({ value: i, label: c.name })), st.c, (v) => ((st.c = +v), render())),
            select("bank", banks.map((b) => ({ value: b })), st.bank, (v) => ((st.bank = v), render())),
            select("task", tasks.map((b) => ({ value: b })), st.task, (v) => ((st.task = v), (st.gold = st.pred = undefined), render())),
            select("order", orders.map((b) => ({ value: b })), st.order, (v) => ((st.order = v), render()))
          );
          const sel = all.filter((r) => String(r.bank) === st.bank && String(r.task) === st.task && String(r.order) === st.order);
          const golds = uniq(sel.map((r) => r.gold));
          const preds = uniq(sel.map((r) => r.pred));
          const cell = (g, q) => sel.find((r) => String(r.gold) === g && String(r.pred) === q);
          const z = golds.map((g) => preds.map((q) => (cell(g, q) ? cell(g, q).count : null)));
          const share = golds.map((g) => preds.map((q) => (cell(g, q) ? cell(g, q).row_share : null)));
          return plot(
            chart,
            [
              {
                type: "heatmap",
                z,
                x: preds,
                y: golds,
                customdata: share,
                text: z.map((r) => r.map((v) => VIEW.fmt(v))),
                texttemplate: "%{text}",
                colorscale: "Blues",
                reversescale: true,
                colorbar: { title: { text: "count" } },
                hovertemplate: "gold %{y} → %{x}<br>count %{z}<br>row share %{customdata:.3f}<extra></extra>",
              },
            ],
            { title: { text: `${ck} · ${st.task} · ${st.order}` }, xaxis: { type: "category", title: { text: "predicted" } }, yaxis: { type: "category", autorange: "reversed", title: { text: "gold" } }, height: 420 }
          ).then((gd) => {
            window.VIEW_CONFUSION = { gd, golds, preds };
            VIEW.onCellClick(gd, (pt) => {
              st.gold = golds[pt.pointIndex[0]];
              st.pred = preds[pt.pointIndex[1]];
              VIEW.setParams(st);
              return showDrill();
            });
            return showDrill();
          });
        })
        .then(VIEW.done, VIEW.fail);
    }
    return render();
  });
})();
