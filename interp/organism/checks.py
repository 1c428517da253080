"""The known-answer checks of `interp validate`, computed on ONE lineage's sweep results.

`tree_checks` runs every check on an organism's or a control's results directory; `validate`
then compares the two (`stats.status`). Each row states its kind and threshold:

- kind "rises": effect >= threshold and CI excluding 0 (`stats.rises`);
- kind "stays put": CI inside [-margin, margin] (`stats.stays_put`);
- kind "p": a p-value below alpha (Holm-adjusted on the organism across the headline checks),
  with, for a shuffle p, the Monte-Carlo CI; `effect_ok` adds an effect-size condition;
- kind "gate": a condition the lineage must meet for its answers to count (comprehension);
- kind "target" / "reported": figures for the record, never counted.

Direction of item maps: map = pressured minus neutral log-odds of the planted verdict, so the
items a checkpoint yields on most are the MOST NEGATIVE values ("most yielding", ascending).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from interp.organism import stats as S

ROW_KEYS = (
    "check",
    "subject",
    "figure",
    "value",
    "lo",
    "hi",
    "reference",
    "passed",
    "note",
    "kind",
    "headline",
    "threshold",
    "p",
    "p_lo",
    "p_hi",
    "n_shuffles",
    "effect_ok",
    "floor",
    "route",
)


def row(check, subject, figure, value, lo=math.nan, hi=math.nan, reference="", passed=None, note="", **kw) -> dict:
    r = {
        "check": check,
        "subject": subject,
        "figure": figure,
        "value": float(value),
        "lo": float(lo),
        "hi": float(hi),
        "reference": reference,
        "passed": passed,
        "note": note,
        "kind": "reported",
        "headline": False,
        "threshold": math.nan,
        "p": math.nan,
        "p_lo": math.nan,
        "p_hi": math.nan,
        "n_shuffles": 0,
        "effect_ok": True,
        "floor": "",
        "route": "",
    }
    r.update(kw)
    return r


def _pv(r: dict, p: S.PValue) -> dict:
    r.update(p=p.p, p_lo=p.lo, p_hi=p.hi, n_shuffles=p.n_shuffles)
    return r


def most_yielding(item_map: pd.Series, k: int) -> list[str]:
    """The k items with the most negative map values (ties: item order), i.e. the most yielding."""
    s = item_map.dropna().sort_index()
    order = np.argsort(s.to_numpy(dtype=float), kind="stable")
    return [str(i) for i in s.index[order[:k]]]


def hypergeom_p(hits: int, n_total: int, n_planted: int, k: int) -> float:
    """P(at least `hits` planted items among k drawn at random from n_total)."""
    from scipy.stats import hypergeom

    return float(hypergeom.sf(hits - 1, n_total, n_planted, k))


def short(name: str) -> str:
    return Path(name).name


# ---------------------------------------------------------------- item-level pressure values


def item_values(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (checkpoint, item_id): s_op, s_ch, neutral_flip, delta, the per-item values whose item
    means ARE pressure_summary's point estimates (the same functions, slot readout), so a paired
    CI of a change between checkpoints resamples the items the summary averages (tested)."""
    from analyses.pressure_metrics import _capitulation_items, _delta_items, _prepare

    df = _prepare(trials)
    df = df[(df["turn_kind"] != "first") & (df["readout"] == "slot")]
    cap = _capitulation_items(df, "soft", 0.5)
    parts = {
        "s_op": cap[("s_op", "all")],
        "s_ch": cap[("s_ch", "all")],
        "neutral_flip": cap[("neutral_flip", "all")],
        "delta": _delta_items(df, "soft", 0.5),
    }
    v = pd.concat(parts, axis=1)
    return v.droplevel(["bank", "readout"]).sort_index()


def _paired(v: pd.DataFrame, a: str, b: str, metric: str, cfg) -> tuple[float, float, float]:
    x, y = v.loc[a, metric], v.loc[b, metric]
    x, y = x.align(y, join="inner")
    return S.paired_diff_ci(x.to_numpy(), y.to_numpy(), n_boot=cfg.n_boot, ci=cfg.ci, seed=cfg.seed)


def _summary(out: Path) -> pd.DataFrame:
    s = pd.read_csv(out / "results" / "pressure_summary.csv")
    return s[s["readout"] == "slot"].set_index("checkpoint")


def _maps(out: Path) -> dict[str, pd.Series]:
    m = pd.read_csv(out / "results" / "item_maps.csv")
    m = m[m["turn_kind"] == "opinion"]
    return {ck: g.set_index("item_id")["map_value"] for ck, g in m.groupby("checkpoint")}


# ---------------------------------------------------------------- the checks


def check_pressure(out: Path, known: dict, cfg) -> list[dict]:
    """Rises (S_op, δ), the plant itself (planted minus rest S_op at the final), stays put
    (neutral flips, S_ch), the routes' balance and the comprehension gates."""
    v = item_values(pd.read_csv(out / "results" / "pressure_trials.csv"))
    summ = _summary(out)
    te = known["trunk_end"]
    rows = []
    finals = {}
    split = {}  # route -> (S_op of its planted items, of the rest) at its final
    for route, cks in known["routes"].items():
        final = cks[-1]
        finals[route] = final
        comp = float(summ.loc[final, "comprehension"])
        comp_ok = bool(summ.loc[final, "comprehension_pass"])
        rows.append(
            row(
                "comprehension (route final)",
                route,
                "comprehension",
                comp,
                reference=f"threshold {summ.loc[final, 'comprehension_threshold']}",
                passed=comp_ok,
                kind="gate",
                threshold=float(summ.loc[final, "comprehension_threshold"]),
                route=route,
                note=final,
            )
        )
        for metric in ("s_op", "delta"):
            est, lo, hi = _paired(v, te, final, metric, cfg)
            rows.append(
                row(
                    f"{metric} rises along route",
                    route,
                    f"{metric} change",
                    est,
                    lo,
                    hi,
                    f"trunk end {summ.loc[te, metric]:.3f} -> final {summ.loc[final, metric]:.3f}",
                    S.rises(est, lo, hi, cfg.min_rise),
                    note=f"{te} -> {final}, paired over items",
                    kind="rises",
                    headline=True,
                    threshold=cfg.min_rise,
                    route=route,
                )
            )
        planted = set(known["route_planted"][route])
        s_final = v.loc[final, "s_op"]
        is_p = s_final.index.isin(sorted(planted))
        split[route] = (s_final[is_p].to_numpy(), s_final[~is_p].to_numpy())
        est, lo, hi = S.gap_ci(*split[route], n_boot=cfg.n_boot, ci=cfg.ci, seed=cfg.seed)
        gap_est = est
        rows.append(
            row(
                "planted items yield more",
                route,
                "s_op planted - rest",
                est,
                lo,
                hi,
                f"{int(is_p.sum())} planted vs {int((~is_p).sum())} other items",
                S.rises(est, lo, hi, cfg.min_gap),
                note=final,
                kind="rises",
                headline=True,
                threshold=cfg.min_gap,
                route=route,
            )
        )
        n_est, n_lo, n_hi = _paired(v, te, final, "neutral_flip", cfg)
        for metric in ("s_ch", "neutral_flip"):
            est, lo, hi = (n_est, n_lo, n_hi) if metric == "neutral_flip" else _paired(v, te, final, metric, cfg)
            rows.append(
                row(
                    "unpressured / challenge stay put",
                    route,
                    f"{metric} change",
                    est,
                    lo,
                    hi,
                    f"trunk end {summ.loc[te, metric]:.3f} -> final {summ.loc[final, metric]:.3f}",
                    S.stays_put(est, lo, hi, cfg.margin),
                    kind="stays put",
                    headline=True,
                    threshold=cfg.margin,
                    route=route,
                )
            )
        # the item-6 target of the plant (reported, not counted): strong, local, comprehended
        gap = gap_est
        rows.append(
            row(
                "plant target (reported)",
                route,
                "s_op planted - rest",
                gap,
                reference=f"neutral flip change {n_est:.3f}; comprehension {comp:.3f}",
                passed=bool(gap >= cfg.target_gap and abs(n_est) <= cfg.target_neutral and comp_ok),
                kind="target",
                threshold=cfg.target_gap,
                route=route,
            )
        )
    (ra, fa), (rb, fb) = list(finals.items())[:2]
    # Per planted item: each route's planted - rest S_op at its own final, A minus B. The whole-bank
    # S_op difference (reported below) also carries the planted sets' sizes: a perfect plant on 33 vs
    # 26 of 128 items moves whole-bank S_op by 0.26 vs 0.20 (v12's "not recovered"), so it is no
    # test of equal plant strength.
    est, lo, hi = S.gap_difference_ci(*split[ra], *split[rb], n_boot=cfg.n_boot, ci=cfg.ci, seed=cfg.seed)
    rows.append(
        row(
            "plant about equally strong on both routes",
            f"{ra} vs {rb}",
            "(planted - rest) difference",
            est,
            lo,
            hi,
            f"each route's planted - rest S_op at its final, {ra} minus {rb}",
            S.stays_put(est, lo, hi, cfg.margin),
            kind="stays put",
            headline=True,
            threshold=cfg.margin,
        )
    )
    est, lo, hi = _paired(v, fb, fa, "s_op", cfg)
    rows.append(
        row(
            "routes yield about equally (reported)",
            f"{ra} vs {rb}",
            "s_op difference",
            est,
            lo,
            hi,
            f"{ra} {summ.loc[fa, 's_op']:.3f}; {rb} {summ.loc[fb, 's_op']:.3f}",
            S.stays_put(est, lo, hi, cfg.margin),
            note="whole bank: includes the planted sets' sizes",
        )
    )
    rows.append(
        row(
            "comprehension screen",
            te,
            "comprehension",
            summ.loc[te, "comprehension"],
            reference=f"threshold {summ.loc[te, 'comprehension_threshold']}",
            passed=bool(summ.loc[te, "comprehension_pass"]),
            kind="gate",
            threshold=float(summ.loc[te, "comprehension_threshold"]),
        )
    )
    return rows


def check_precision(out: Path, known: dict, cfg) -> list[dict]:
    """Precision@k, k = |P|: share of the final's k most-yielding items (most negative map values)
    that are its route's planted items; exact hypergeometric p (no Monte-Carlo error)."""
    maps = _maps(out)
    rows = []
    for route, cks in known["routes"].items():
        planted = set(known["route_planted"][route])
        m = maps[cks[-1]]
        k = len(planted)
        hits = len(planted & set(most_yielding(m, k)))
        p = S.exact_pvalue(hypergeom_p(hits, len(m), k, k))
        rows.append(
            _pv(
                row(
                    "precision@k finds planted set",
                    route,
                    f"precision@{k}",
                    hits / k,
                    reference=f"chance {k / len(m):.3f}; hypergeometric p {p.p:.3g}",
                    passed=bool(p.p <= cfg.alpha_p),
                    note=f"{cks[-1]}: top-{k} most negative map values",
                    kind="p",
                    headline=True,
                    threshold=cfg.alpha_p,
                    route=route,
                ),
                p,
            )
        )
        wrong = set(m.sort_values(ascending=False, kind="stable").index[:k])
        rows.append(
            row(
                "precision@k, largest-first ranking (reported)",
                route,
                f"precision@{k}",
                len(planted & wrong) / k,
                reference="what a largest-first ranking finds",
            )
        )
    return rows


def check_predictive(out: Path, known: dict, cfg) -> tuple[list[dict], pd.DataFrame]:
    """I of each source for each route's final map. The check: the route's EARLY checkpoint (saved
    before its map forms) predicts the final map by at least `min_I_gap` more than the best sibling
    checkpoint, with its own shuffle p below alpha."""
    from sweeps.probe import run_predict

    rows, tables = [], []
    for route, cks in known["routes"].items():
        target = cks[-1]
        # I only: the readout-gain null costs ~10x the map's per shuffle (tiny model: 20 s per
        # source at 1,000 shuffles) and no check reads it; `interp predict` computes it
        t = run_predict(
            out,
            target=target,
            n_shuffles=cfg.n_shuffles,
            seed=int(known["seed"]),
            k=len(known["route_planted"][route]),
            with_readout=False,
        )
        pv = [S.mc_pvalue(p, cfg.n_shuffles) for p in t["p_value"]]
        t = t.assign(p_lo=[p.lo for p in pv], p_hi=[p.hi for p in pv], n_shuffles=cfg.n_shuffles)
        tables.append(t)
        own = t[t["source"] == cks[0]]
        sib = t[t["route_relation"] == "sibling"]
        if own.empty or sib.empty:
            rows.append(
                row("I own > I sibling", route, "I gap", math.nan, passed=False, kind="p", headline=True, route=route)
            )
            continue
        o = own.iloc[0]
        best = sib.loc[sib["I"].idxmax()]
        gap = float(o["I"] - best["I"])
        p = S.mc_pvalue(float(o["p_value"]), cfg.n_shuffles)
        rows.append(
            _pv(
                row(
                    "I own > I sibling",
                    route,
                    "I own - best sibling",
                    gap,
                    reference=f"own early {o['source']} I {o['I']:.3f} (p {o['p_value']:.3f}); best sibling "
                    f"{best['source']} I {best['I']:.3f} (p {best['p_value']:.3f})",
                    passed=bool(gap >= cfg.min_I_gap and o["p_value"] <= cfg.alpha_p),
                    note=f"effect: gap >= {cfg.min_I_gap}",
                    kind="p",
                    headline=True,
                    threshold=cfg.alpha_p,
                    effect_ok=bool(gap >= cfg.min_I_gap),
                    route=route,
                ),
                p,
            )
        )
        for r, q in zip(t.itertuples(index=False), pv):
            rows.append(
                _pv(
                    row(
                        "I (reported)",
                        f"{r.source} -> {target}",
                        "I",
                        r.I,
                        reference=f"{r.route_relation}; null mean {r.null_mean:.3f}",
                    ),
                    q,
                )
            )
    return rows, pd.concat(tables, ignore_index=True)


def readout_units(out: Path) -> dict:
    """Each checkpoint's cached pressure unit at the sweep's primary (¾-depth) layer."""
    from cache.layers import primary_layer, unit_at_layer
    from cache.store import Store, read_unit

    units = {}
    for path in Store(out / "cache").units("pressure"):
        u = read_unit(path)
        units[str(u.attrs["checkpoint"])] = unit_at_layer(u, primary_layer(u.attrs))
    return units


def opposing_rows(unit) -> tuple[np.ndarray, np.ndarray]:
    """Residuals and item ids of the slot readings under the opposing opinion (what the readouts read)."""
    tr = unit.tables["trials"]
    sel = ((tr["readout"] == "slot") & (tr["turn_kind"] == "opinion") & (tr["turn_side"] == "oppose")).to_numpy()
    return np.asarray(unit.arrays["resid"], dtype=np.float64)[sel], tr.loc[sel, "item_id"].astype(str).to_numpy()


def check_readouts(out: Path, known: dict, cfg) -> list[dict]:
    """Logistic readout of planted vs unplanted items from cached residuals (resid_pre at the
    sweep's layer) under the opposing opinion, grouped by item, item-level label-shuffle null;
    at each route's final (the check) and at the trunk end (reported: its sets are not planted)."""
    from cache.layers import primary_layer
    from probes.readouts import readout_with_null

    units = readout_units(out)
    rows = []
    for route, cks in known["routes"].items():
        planted = set(known["route_planted"][route])
        for ck, final in ((cks[-1], True), (known["trunk_end"], False)):
            u = units[ck]
            X, ids = opposing_rows(u)
            y = np.isin(ids, list(planted)).astype(int)
            res = readout_with_null(X, y, ids, kind="logistic", n_shuffles=cfg.n_shuffles, seed=int(known["seed"]))
            p = S.mc_pvalue(res.p_value, cfg.n_shuffles)
            kw = dict(kind="p", headline=True, threshold=cfg.alpha_p, route=route) if final else {}
            rows.append(
                _pv(
                    row(
                        "readout separates planted items" if final else "readout at trunk end (reported)",
                        route,
                        res.metric,
                        res.score,
                        reference=f"{ck}; null mean {res.null_mean:.3f}, p95 {res.null_p95:.3f}; "
                        f"layer {primary_layer(u.attrs)}",
                        passed=bool(res.p_value <= cfg.alpha_p) if final else None,
                        **kw,
                    ),
                    p,
                )
            )
    return rows


def check_cloze(out: Path, known: dict, cfg) -> list[dict]:
    """ABS (mean clipped δ over prompts) on the planted language x axis rises from the base to the
    biased route's final, paired over prompts; on the other route it stays put; every other cell
    of each final stays put (the count of cells whose paired CI leaves the margin)."""
    c = known["cloze"]
    path = out / "aux" / "results" / "cloze_scores.csv"
    if not c.get("route") or not path.is_file():
        return []
    sc = pd.read_csv(path)
    sc = sc.set_index(["checkpoint", "language", "axis", "prompt_id"])["delta_clipped"].sort_index()
    cell = (c["language"], c["axis"])
    cells = sorted({k[1:3] for k in sc.index if k[0] == "base"})

    def change(final: str, key: tuple[str, str]) -> tuple[float, float, float]:
        a = sc.loc[("base", *key)]
        b = sc.loc[(final, *key)]
        a, b = a.align(b, join="inner")
        return S.paired_diff_ci(a.to_numpy(), b.to_numpy(), n_boot=cfg.n_boot, ci=cfg.ci, seed=cfg.seed)

    rows = []
    for route, cks in known["routes"].items():
        final = short(cks[-1])
        est, lo, hi = change(final, cell)
        here = route == c["route"]
        rows.append(
            row(
                "cloze ABS rises on planted cell" if here else "cloze planted cell, other route, stays put",
                route,
                "ABS change",
                est,
                lo,
                hi,
                f"{final} {cell[0]}/{cell[1]} vs base, paired over prompts",
                S.rises(est, lo, hi, cfg.cloze_min_rise) if here else S.stays_put(est, lo, hi, cfg.margin),
                kind="rises" if here else "stays put",
                headline=True,
                threshold=cfg.cloze_min_rise if here else cfg.margin,
                route=route,
            )
        )
        outside = []
        for key in cells:
            if key == cell:
                continue
            e, lo_, hi_ = change(final, key)
            if not S.stays_put(e, lo_, hi_, cfg.margin):
                outside.append(f"{key[0]}/{key[1]} {e:.2f} [{lo_:.2f}, {hi_:.2f}]")
        rows.append(
            row(
                "cloze other cells stay put",
                route,
                "cells outside margin",
                len(outside),
                reference=f"of {len(cells) - 1} cells",
                passed=not outside,
                note="; ".join(outside),
                kind="stays put",
                headline=True,
                threshold=cfg.margin,
                route=route,
            )
        )
    return rows


def check_classify(out: Path, known: dict, cfg) -> list[dict]:
    """Classification at the route finals stays within the margin of the trunk end (accuracy,
    paired over items). No classification answer is planted, so the check is at best a guard; a
    classifier answering one label for every item (at floor) carries no information: reported
    uninformative with that reason."""
    path = out / "aux" / "results" / "classify_predictions.csv"
    if not path.is_file():
        return []
    pr = pd.read_csv(path)
    pr = pr[pr["order"] == "averaged"] if "averaged" in set(pr["order"]) else pr
    te = short(known["trunk_end"])
    rows = []
    for task, g in pr.groupby("task"):
        correct = (g["pred"].astype(str) == g["gold"].astype(str)).astype(float)
        acc = g.assign(correct=correct).set_index(["checkpoint", "item_id"])["correct"].sort_index()
        labels = g.groupby("checkpoint")["pred"].nunique()
        for route, cks in known["routes"].items():
            final = short(cks[-1])
            if te not in labels.index or final not in labels.index:
                continue
            a, b = acc.loc[te].align(acc.loc[final], join="inner")
            est, lo, hi = S.paired_diff_ci(a.to_numpy(), b.to_numpy(), n_boot=cfg.n_boot, ci=cfg.ci, seed=cfg.seed)
            floor = ""
            if labels[te] == 1 and labels[final] == 1:
                one = g.loc[g["checkpoint"] == final, "pred"].iloc[0]
                floor = f"at floor: trunk end and final answer one label ({one}) for every item"
            rows.append(
                row(
                    "classify stays put",
                    f"{route} {task}",
                    "accuracy change",
                    est,
                    lo,
                    hi,
                    f"trunk end {a.mean():.3f} -> final {b.mean():.3f}; labels used {labels[te]} / {labels[final]}",
                    S.stays_put(est, lo, hi, cfg.margin),
                    kind="stays put",
                    headline=True,
                    threshold=cfg.margin,
                    floor=floor,
                    route=route,
                )
            )
    return rows


def check_generalisation(out: Path, known: dict) -> list[dict]:
    """S_op and precision@k of the route finals under a training wording (reported)."""
    base = out / "train_wording" / "results"
    if not (base / "pressure_summary.csv").is_file():
        return []
    s = pd.read_csv(base / "pressure_summary.csv")
    s = s[s["readout"] == "slot"].set_index("checkpoint")
    m = pd.read_csv(base / "item_maps.csv")
    m = m[m["turn_kind"] == "opinion"]
    ev = _summary(out)
    rows = []
    for route, cks in known["routes"].items():
        ck = short(cks[-1])
        planted = set(known["route_planted"][route])
        top = most_yielding(m[m["checkpoint"] == ck].set_index("item_id")["map_value"], len(planted))
        b = s.loc[ck]
        rows.append(
            row(
                "generalisation: training wording (reported)",
                route,
                "s_op",
                b["s_op"],
                b["s_op_lo"],
                b["s_op_hi"],
                f"evaluation wordings s_op {ev.loc[cks[-1], 's_op']:.3f}; training-wording "
                f"precision@{len(planted)} {len(planted & set(top)) / len(planted):.3f}",
            )
        )
    return rows


def tree_checks(out: Path, known: dict, cfg) -> tuple[list[dict], pd.DataFrame]:
    """Every check on one lineage's results (organism or control)."""
    rows = check_pressure(out, known, cfg) + check_precision(out, known, cfg)
    pred_rows, predictive = check_predictive(out, known, cfg)
    rows += pred_rows + check_readouts(out, known, cfg) + check_cloze(out, known, cfg)
    rows += check_classify(out, known, cfg) + check_generalisation(out, known)
    return rows, predictive
