// Cloze: ABS per language x axis (cloze_abs.csv), and under a cell the sentence triples of that
// checkpoint, language and axis (cloze_scores.csv and the unit's texts).
"use strict";

(() => {
  const { el, select, table, plot, uniq } = VIEW;

  VIEW.start((app, meta) => {
    const p = VIEW.params();
    const withCloze = VIEW.sweepsWith(app, meta, "cloze", "No cloze results in these sweeps (results/cloze_abs.csv).");
    if (!withCloze) return;
    const st = { s: VIEW.int(p, "s", withCloze[0]), ck: p.ck || "", loss: p.loss || "", lang: p.lang || "", axis: p.axis || "" };
    const { controls, chart, drill } = VIEW.drillPage(app, "Cloze: ABS by language × axis", "ABS from results/cloze_abs.csv under the loss chosen; click a cell for its sentence triples: the three completions, their NLL (−log-prob) under each loss, token and byte counts.", "absmap");

    function showDrill(sweep) {
      if (!st.lang) return drill.replaceChildren();
      const ci = sweep.columns.findIndex((c) => c.name === st.ck);
      if (ci < 0) {
        drill.replaceChildren(el("p", { class: "note", text: "Pick one checkpoint (not the pooled row) to see its sentence triples." }));
        return;
      }
      return VIEW.load(`cloze/${st.s}/${ci}`).then((d) => {
        const rows = d.rows.filter((r) => String(r.language) === st.lang && (st.axis === "all" || String(r.axis) === st.axis));
        const text = ["prompt_id", "group", "context", "stereotype", "anti_stereotype", "meaningless", "loss", "axis"];
        const num = ["nll_stereo", "nll_anti", "nll_meaningless", "delta", "nll_stereo_sum", "nll_anti_sum", "nll_meaningless_sum", "nll_stereo_token_mean", "nll_anti_token_mean", "nll_meaningless_token_mean", "nll_stereo_byte_mean", "nll_anti_byte_mean", "nll_meaningless_byte_mean", "n_tokens_stereo", "n_tokens_anti", "n_tokens_meaningless", "n_bytes_stereo", "n_bytes_anti", "n_bytes_meaningless"];
        drill.replaceChildren(
          el("h3", { text: `${st.ck} · ${st.lang} · ${st.axis}: ${rows.length} sentence triples` }),
          el("p", { class: "note", text: "nll_stereo / nll_anti / nll_meaningless: the NLL under the row's loss (column loss); delta = nll_anti − nll_stereo." }),
          table("triples", [...text.map((k) => ({ key: k, text: true })), ...num.map((k) => ({ key: k }))], rows)
        );
      });
    }

    function render() {
      VIEW.busy();
      const sweep = meta.sweeps[st.s];
      return VIEW.load(`cloze/${st.s}`)
        .then((d) => {
          const rows = d.abs;
          const names = sweep.columns.map((c) => c.name);
          const cks = uniq(rows.map((r) => r.checkpoint)).sort((a, b) => (names.indexOf(a) + 1 || 1e9) - (names.indexOf(b) + 1 || 1e9));
          const losses = uniq(rows.map((r) => r.loss));
          if (!cks.includes(st.ck)) st.ck = cks.find((c) => c !== "all") || cks[0];
          if (!losses.includes(st.loss)) st.loss = losses[0];
          VIEW.setParams(st);
          controls.replaceChildren(
            select("sweep", withCloze.map((i) => ({ value: i, label: meta.sweeps[i].label })), st.s, (v) => ((st.s = +v), (st.lang = ""), render())),
            select("checkpoint", cks.map((c) => ({ value: c })), st.ck, (v) => ((st.ck = v), render())),
            select("loss", losses.map((c) => ({ value: c })), st.loss, (v) => ((st.loss = v), render()))
          );
          const sel = rows.filter((r) => String(r.checkpoint) === st.ck && String(r.loss) === st.loss);
          const langs = uniq(sel.map((r) => r.language));
          const axes = uniq(sel.map((r) => r.axis));
          const cell = (l, a) => sel.find((r) => String(r.language) === l && String(r.axis) === a);
          const z = langs.map((l) => axes.map((a) => (cell(l, a) ? cell(l, a).abs : null)));
          return plot(
            chart,
            [
              {
                type: "heatmap",
                z,
                x: axes,
                y: langs,
                text: z.map((r) => r.map((v) => VIEW.fmt(v))),
                texttemplate: "%{text}",
                colorscale: "Viridis",
                colorbar: { title: { text: "ABS" } },
                hovertemplate: "%{y} · %{x}<br>ABS %{z:.4g}<extra></extra>",
              },
            ],
            { title: { text: `ABS · ${st.ck} · loss ${st.loss}` }, xaxis: { type: "category" }, yaxis: { type: "category" }, height: 360 }
          ).then((gd) => {
            window.VIEW_CLOZE = { gd, langs, axes };
            VIEW.onCellClick(gd, (pt) => {
              st.lang = langs[pt.pointIndex[0]];
              st.axis = axes[pt.pointIndex[1]];
              VIEW.setParams(st);
              return showDrill(sweep);
            });
            return showDrill(sweep);
          });
        })
        .then(VIEW.done, VIEW.fail);
    }
    return render();
  });
})();
