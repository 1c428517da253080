// Overview: each study's headline numbers along the lineage, as the results tables hold them.
"use strict";

(() => {
  const { el, select, table, section, plot, routeTraces, xOrder, uniq } = VIEW;

  function charts(sweep, rows, metrics, title) {
    const grid = el("div", { class: "grid" });
    const jobs = metrics.map(([y, lo, hi, label]) => {
      const div = el("div", { class: "chart", "data-metric": y });
      grid.append(div);
      return plot(div, routeTraces(sweep, rows, y, lo, hi), {
        title: { text: label + (title ? " · " + title : "") },
        xaxis: xOrder(sweep),
        yaxis: { title: { text: y }, zeroline: true },
        showlegend: sweep.groups.length > 1,
        // the routes' names below the chart: a half-width chart has no room for them at its side
        legend: { orientation: "h", x: 0, xanchor: "left", y: -0.3, yanchor: "top" },
        margin: { l: 60, r: 20, t: 36, b: 120 },
      });
    });
    return [grid, jobs];
  }

  // the pressure study's summary, and the sycophancy-eval sets' (the same columns, read the same way)
  const PRESSURE = { name: "pressure_summary", title: "Pressure: δ, S_op, S_ch, neutral flip (results/pressure_summary.csv)", lead: ["checkpoint", "bank", "readout"] };
  const SYC_EVAL = { name: "sycophancy_eval_summary", title: "Sycophancy-eval sets as pressure trials (results/sycophancy_eval_summary.csv)", lead: ["checkpoint", "bank", "domain", "readout"] };

  function pressure(sweep, rows, box, kind) {
    const banks = uniq(rows.map((r) => r.bank));
    const readouts = uniq(rows.map((r) => r.readout));
    let bank = banks[0];
    let readout = readouts.includes("slot") ? "slot" : readouts[0];
    const out = el("div");
    function draw() {
      const sel = rows.filter((r) => String(r.bank) === bank && String(r.readout) === readout);
      const [grid, jobs] = charts(
        sweep,
        sel,
        [
          ["delta", "delta_lo", "delta_hi", "δ (deference)"],
          ["s_op", "s_op_lo", "s_op_hi", "S_op (opposing opinion)"],
          ["s_ch", "s_ch_lo", "s_ch_hi", "S_ch (bare challenge)"],
          ["neutral_flip", "neutral_flip_lo", "neutral_flip_hi", "neutral flip rate"],
        ],
        bank
      );
      const cols = [...kind.lead, "delta", "delta_lo", "delta_hi", "s_op", "s_op_lo", "s_op_hi", "s_ch", "s_ch_lo", "s_ch_hi", "neutral_flip", "neutral_flip_lo", "neutral_flip_hi", "n_items", "comprehension", "comprehension_pass"];
      out.replaceChildren(grid, table(kind.name, cols.map((k) => ({ key: k, text: [...kind.lead, "comprehension_pass"].includes(k) })), sel));
      return Promise.all(jobs);
    }
    box.append(
      section(
        kind.title,
        [
          el("div", { class: "controls" }, [
            select("bank", banks.map((b) => ({ value: b })), bank, (v) => ((bank = v), draw())),
            select("readout", readouts.map((b) => ({ value: b })), readout, (v) => ((readout = v), draw())),
          ]),
          out,
        ],
        "Bars: the 95% item-bootstrap CIs of the table (delta_lo … delta_hi). One line per route from the base; checkpoints in training order."
      )
    );
    return draw();
  }

  function ab(sweep, rows, box) {
    const banks = uniq(rows.map((r) => r.bank));
    const orders = uniq(rows.map((r) => r.order));
    let bank = banks[0];
    let order = orders.includes("given") ? "given" : orders[0];
    const out = el("div");
    function draw() {
      const sel = rows.filter((r) => String(r.bank) === bank && String(r.order) === order);
      const [grid, jobs] = charts(
        sweep,
        sel,
        [
          ["matching_rate", "matching_rate_lo", "matching_rate_hi", "matching rate (mean P)"],
          ["argmax_rate", "argmax_rate_lo", "argmax_rate_hi", "argmax rate (lm-eval acc)"],
        ],
        bank + " / " + order
      );
      const cols = ["checkpoint", "bank", "set", "order", "matching_rate", "matching_rate_lo", "matching_rate_hi", "argmax_rate", "argmax_rate_lo", "argmax_rate_hi", "n_items"];
      out.replaceChildren(grid, table("ab_summary", cols.map((k) => ({ key: k, text: ["checkpoint", "bank", "set", "order"].includes(k) })), sel));
      return Promise.all(jobs);
    }
    box.append(
      section(
        "A/B sycophancy sets: the matching-behaviour rate (results/ab_summary.csv)",
        [
          el("div", { class: "controls" }, [
            select("bank", banks.map((b) => ({ value: b })), bank, (v) => ((bank = v), draw())),
            select("order", orders.map((b) => ({ value: b })), order, (v) => ((order = v), draw())),
          ]),
          out,
        ],
        "matching_rate: mean over items of P(the answer that agrees with the user's view), normalised over the item's answers; argmax_rate: the share of items where that answer is the likeliest. Bars: 95% item-bootstrap CIs. Items: the Field sets page."
      )
    );
    return draw();
  }

  function classify(sweep, ov, box) {
    const rows = ov.classify;
    const banks = uniq(rows.map((r) => r.bank));
    const tasks = uniq(rows.map((r) => r.task));
    const orders = uniq(rows.map((r) => r.order));
    let bank = banks[0];
    let task = tasks[0];
    let order = orders.includes("given") ? "given" : orders[0];
    const out = el("div");
    function draw() {
      const sel = rows.filter((r) => String(r.bank) === bank && String(r.task) === task && String(r.order) === order);
      const [grid, jobs] = charts(
        sweep,
        sel,
        [
          ["accuracy", "accuracy_lo", "accuracy_hi", "accuracy"],
          ["macro_f1", "macro_f1_lo", "macro_f1_hi", "macro-F1"],
          ["mcc", null, null, "MCC"],
        ],
        task + " / " + order
      );
      const cols = ["checkpoint", "bank", "task", "order", "accuracy", "accuracy_lo", "accuracy_hi", "macro_f1", "macro_f1_lo", "macro_f1_hi", "mcc", "n"];
      const kappa = [];
      if (ov.judge.length) kappa.push(el("h3", { text: "Judge agreement, Cohen's κ (results/judge_agreement.csv)" }), table("judge_agreement", Object.keys(ov.judge[0]).map((k) => ({ key: k, text: ["judge", "bank"].includes(k) })), ov.judge));
      if (ov.generation.length) kappa.push(el("h3", { text: "Generated replies, judged (results/generation_summary.csv)" }), table("generation_summary", Object.keys(ov.generation[0]).map((k) => ({ key: k, text: typeof ov.generation[0][k] === "string" })), ov.generation));
      out.replaceChildren(grid, table("classify_summary", cols.map((k) => ({ key: k, text: ["checkpoint", "bank", "task", "order"].includes(k) })), sel), ...kappa);
      return Promise.all(jobs);
    }
    box.append(
      section(
        "Classify: accuracy, macro-F1, MCC (results/classify_summary.csv)",
        [
          el("div", { class: "controls" }, [
            select("bank", banks.map((b) => ({ value: b })), bank, (v) => ((bank = v), draw())),
            select("task", tasks.map((b) => ({ value: b })), task, (v) => ((task = v), draw())),
            select("order", orders.map((b) => ({ value: b })), order, (v) => ((order = v), draw())),
          ]),
          out,
        ],
        "classify_summary.csv holds MCC, not κ; Cohen's κ is in the judge tables when the sweep judged generated replies (--generate)."
      )
    );
    return draw();
  }

  function cloze(sweep, ov, box) {
    const rows = ov.cloze;
    const langs = uniq(rows.map((r) => r.language));
    const banks = uniq(rows.map((r) => r.bank));
    let bank = banks[0];
    let measure = "abs_sum";
    const out = el("div");
    function draw() {
      const sel = rows.filter((r) => String(r.bank) === bank);
      const div = el("div", { class: "chart" });
      const traces = [];
      langs.forEach((lang) =>
        routeTraces(sweep, sel.filter((r) => String(r.language) === lang), measure).forEach((t) => {
          t.name = lang + (sweep.groups.length > 1 ? " · " + t.name : "");
          traces.push(t);
        })
      );
      out.replaceChildren(div, table("cloze_abs_by_loss", ["checkpoint", "bank", "language", "abs_sum", "abs_token_mean", "band_token_mean", "abs_byte_mean"].map((k) => ({ key: k, text: ["checkpoint", "bank", "language", "band_token_mean"].includes(k) })), sel));
      return plot(div, traces, { title: { text: "ABS per language (" + measure + ")" }, xaxis: xOrder(sweep), yaxis: { title: { text: measure } } });
    }
    box.append(
      section(
        "Cloze: ABS per language (results/cloze_abs_by_loss.csv)",
        [
          el("div", { class: "controls" }, [
            select("bank", banks.map((b) => ({ value: b })), bank, (v) => ((bank = v), draw())),
            select("ABS under", ["abs_sum", "abs_token_mean", "abs_byte_mean"].map((b) => ({ value: b })), measure, (v) => ((measure = v), draw())),
          ]),
          out,
        ],
        "The loss the sweep used for cloze_abs.csv: " + (ov.cloze_loss.join(", ") || "—") + ". Pooled rows (checkpoint all) are in the table."
      )
    );
    return draw();
  }

  function plainTable(box, name, title, rows, note) {
    if (!rows.length) return;
    const cols = Object.keys(rows[0]).map((k) => ({ key: k, text: typeof rows[0][k] === "string" || typeof rows[0][k] === "boolean" }));
    box.append(section(title, [table(name, cols, rows)], note));
  }

  function renderSweep(app, sweep, ov, many, index) {
    const box = el("div", { "data-sweep": sweep.label });
    app.append(box);
    if (many) box.append(el("h2", { text: "Sweep " + sweep.label }));
    const jobs = [];
    if (ov.pressure.length) jobs.push(pressure(sweep, ov.pressure, box, PRESSURE));
    const sets = ov.field_sets || {};
    if (sets.ab_sycophancy) jobs.push(ab(sweep, sets.ab_sycophancy.rows, box));
    if (sets.sycophancy_eval) jobs.push(pressure(sweep, sets.sycophancy_eval.rows, box, SYC_EVAL));
    if (ov.classify.length) jobs.push(classify(sweep, ov, box));
    if (ov.cloze.length) jobs.push(cloze(sweep, ov, box));
    plainTable(box, "precision", "Precision of a reduced-precision run (results/precision.csv)", ov.precision);
    plainTable(box, "probes", "Probes (results/probes.csv)", ov.probes);
    plainTable(box, "predictive", "Prediction of the target's item map (results/predictive.csv)", ov.predictive);
    // read when opened: one line per cache unit, thousands in a long sweep
    const details = el("details", {}, [el("summary", { text: "cache units: fingerprints, settings, versions" })]);
    details.addEventListener("toggle", () => {
      if (!details.open || details.dataset.loaded) return;
      details.dataset.loaded = "1";
      VIEW.load("provenance").then((p) => {
        const prov = p.sweeps[index];
        if (prov.length) details.append(table("provenance", Object.keys(prov[0]).map((k) => ({ key: k, text: true })), prov));
      }, VIEW.fail);
    });
    box.append(
      section("Provenance", [details], "From each current unit's attributes. The sweep records the toolkit's package_version, not a source commit. Results tables: " + ov.files.join(", "))
    );
    return Promise.all(jobs);
  }

  VIEW.start((app, meta) =>
    VIEW.load("overview").then((ov) => {
      app.replaceChildren(
        section("Sweeps", [
          table("sweeps", [{ key: "label", text: true }, { key: "out", text: true }, { key: "checkpoints" }], meta.sweeps.map((s) => ({ label: s.label, out: s.out, checkpoints: s.columns.length }))),
        ])
      );
      return Promise.all(meta.sweeps.map((sweep, s) => renderSweep(app, sweep, ov.sweeps[s], meta.sweeps.length > 1, s)));
    })
  );
})();
