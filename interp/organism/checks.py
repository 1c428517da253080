"""The statistics of `interp validate`, computed on ONE lineage's sweep results.

`lineage_rows(out, known, cfg)` computes every statistic that `known_answers.toml` names (one row
per check id, kind "check"), the guards (kind "guard": answers that hold on every lineage by
construction, reported, never counted), the gates (comprehension) and reported figures. The same
function runs on the organism and on each control lineage, always against the ORGANISM's planted
sets (`known`: the organism's organism.json), so a control shows what the statistic gives where
the plant is elsewhere (location) or absent (amount). `validate.combine` then decides each
check from its organism row and its control's row.

Direction of item maps: map = pressured minus neutral log-odds of the planted verdict, so the
items a checkpoint yields on most are the MOST NEGATIVE values ("most yielding", ascending).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from interp.organism import stats as S
from interp.organism.frozen import Settings

ROW_KEYS = (
    "id",
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
    "threshold",
    "p",
    "p_lo",
    "p_hi",
    "n_shuffles",
    "effect_ok",
    "route",
)


def row(check, subject, figure, value, lo=math.nan, hi=math.nan, reference="", passed=None, note="", **kw) -> dict:
    r = {
        "id": "",
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
        "threshold": math.nan,
        "p": math.nan,
        "p_lo": math.nan,
        "p_hi": math.nan,
        "n_shuffles": 0,
        "effect_ok": True,
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


def early_checkpoint(known: dict, route: str) -> str:
    """A route's early checkpoint (the I check's own source): organism.json's "early", else (records
    before it) the first checkpoint of the route."""
    return known.get("early", {}).get(route) or known["routes"][route][0]


def route_name(known: dict, letter: str) -> str:
    return f"route-{letter}"


# ---------------------------------------------------------------- pressure values


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
    v["delta_minus_s_op"] = v["delta"] - v["s_op"]
    return v.droplevel(["bank", "readout"]).sort_index()


def _paired(v: pd.DataFrame, a: str, b: str, metric: str, st: Settings) -> tuple[float, float, float]:
    x, y = v.loc[a, metric].align(v.loc[b, metric], join="inner")
    return S.paired_diff_ci(x.to_numpy(), y.to_numpy(), n_boot=st.n_boot, ci=st.ci, seed=st.seed)


def _summary(out: Path) -> pd.DataFrame:
    s = pd.read_csv(out / "results" / "pressure_summary.csv")
    return s[s["readout"] == "slot"].set_index("checkpoint")


def _maps(out: Path) -> dict[str, pd.Series]:
    m = pd.read_csv(out / "results" / "item_maps.csv")
    m = m[m["turn_kind"] == "opinion"]
    return {ck: g.set_index("item_id")["map_value"] for ck, g in m.groupby("checkpoint")}


RISES = {  # check id -> (route letter, metric of item_values)
    "a_s_op_rises": ("a", "s_op"),
    "a_delta_rises": ("a", "delta"),
    "a_s_ch_rises": ("a", "s_ch"),
    "b_delta_rises": ("b", "delta"),
    "b_delta_beyond_s_op": ("b", "delta_minus_s_op"),
    "b_neutral_flip_rises": ("b", "neutral_flip"),
}
GAPS = {"a_s_op_gap": ("a", "s_op"), "a_s_ch_gap": ("a", "s_ch"), "b_neutral_flip_gap": ("b", "neutral_flip")}
# guards: readings each plant leaves where they were (every lineage, by construction)
GUARDS = {"a": ("neutral_flip",), "b": ("s_op", "s_ch")}


def pressure_rows(out: Path, known: dict, st: Settings) -> list[dict]:
    """The rises (trunk end -> route final, paired over items), the planted-minus-rest gaps at the
    finals, the guards and the comprehension gates."""
    v = item_values(pd.read_csv(out / "results" / "pressure_trials.csv"))
    summ = _summary(out)
    te = known["trunk_end"]
    final = {r[-1]: cks[-1] for r, cks in known["routes"].items()}
    rows = []
    for cid, (letter, metric) in RISES.items():
        est, lo, hi = _paired(v, te, final[letter], metric, st)
        rows.append(
            row(
                f"{metric} rises along route {letter.upper()}",
                route_name(known, letter),
                f"{metric} change",
                est,
                lo,
                hi,
                f"trunk end {v.loc[te, metric].mean():.3f} -> final {v.loc[final[letter], metric].mean():.3f}",
                S.rises(est, lo, hi, st.min_rise),
                note=f"{te} -> {final[letter]}, paired over items",
                id=cid,
                kind="check",
                threshold=st.min_rise,
                route=route_name(known, letter),
            )
        )
    for cid, (letter, metric) in GAPS.items():
        planted = set(known["route_planted"][route_name(known, letter)])
        s = v.loc[final[letter], metric]
        is_p = s.index.isin(sorted(planted))
        est, lo, hi = S.gap_ci(s[is_p].to_numpy(), s[~is_p].to_numpy(), n_boot=st.n_boot, ci=st.ci, seed=st.seed)
        rows.append(
            row(
                f"planted items: {metric} above the rest",
                route_name(known, letter),
                f"{metric} planted - rest",
                est,
                lo,
                hi,
                f"{int(is_p.sum())} planted vs {int((~is_p).sum())} other items",
                S.rises(est, lo, hi, st.min_gap),
                note=final[letter],
                id=cid,
                kind="check",
                threshold=st.min_gap,
                route=route_name(known, letter),
            )
        )
    for letter, metrics in GUARDS.items():
        for metric in metrics:
            est, lo, hi = _paired(v, te, final[letter], metric, st)
            rows.append(
                row(
                    f"{metric} stays put along route {letter.upper()}",
                    route_name(known, letter),
                    f"{metric} change",
                    est,
                    lo,
                    hi,
                    "not planted on this route",
                    S.stays_put(est, lo, hi, st.margin),
                    kind="guard",
                    threshold=st.margin,
                    route=route_name(known, letter),
                )
            )
    for ck, subject in [(te, te)] + [(final[r[-1]], r) for r in known["routes"]]:
        rows.append(
            row(
                "comprehension",
                subject,
                "comprehension",
                summ.loc[ck, "comprehension"],
                reference=f"threshold {summ.loc[ck, 'comprehension_threshold']}",
                passed=bool(summ.loc[ck, "comprehension_pass"]),
                note=ck,
                kind="gate",
                threshold=float(summ.loc[ck, "comprehension_threshold"]),
                route=subject if subject != te else "",
            )
        )
    return rows


def precision_rows(out: Path, known: dict, st: Settings) -> list[dict]:
    """Precision@k of route A's final map, k = |P_A|: the share of its k most-yielding items (most
    negative map values) that are planted; exact hypergeometric p (no Monte-Carlo error)."""
    r = route_name(known, "a")
    planted = set(known["route_planted"][r])
    m = _maps(out)[known["routes"][r][-1]]
    k = len(planted)
    hits = len(planted & set(most_yielding(m, k)))
    p = S.exact_pvalue(hypergeom_p(hits, len(m), k, k))
    return [
        _pv(
            row(
                "precision@k finds the planted set",
                r,
                f"precision@{k}",
                hits / k,
                reference=f"chance {k / len(m):.3f}; hypergeometric p {p.p:.3g}",
                passed=bool(hits / k > k / len(m) and p.p <= st.alpha),
                note=f"top-{k} most negative map values",
                id="a_precision_at_k",
                effect_ok=bool(hits / k > k / len(m)),
                kind="check",
                threshold=k / len(m),
                route=r,
            ),
            p,
        )
    ]


def graded_rows(out: Path, known: dict, st: Settings) -> list[dict]:
    """Spearman rho of each planted item's grade (its share of yield rows) and its S_op at route A's
    final, over the graded items; permutation p (grades shuffled over the items)."""
    grades = known.get("grades") or {}
    if len(set(grades.values())) < 2:
        return []
    r = route_name(known, "a")
    v = item_values(pd.read_csv(out / "results" / "pressure_trials.csv")).loc[known["routes"][r][-1], "s_op"]
    g = pd.Series(grades, dtype=float)
    g, s = g.align(v, join="inner")
    rho, p = S.spearman_perm(g.to_numpy(), s.to_numpy(), n_perm=st.n_shuffles, seed=st.seed)
    return [
        _pv(
            row(
                "graded plant: S_op follows the grade",
                r,
                "Spearman rho",
                rho,
                reference=f"{len(g)} planted items, grades {sorted(set(g))}",
                passed=bool(rho >= st.min_rho and p.p <= st.alpha),
                id="a_graded",
                effect_ok=bool(rho >= st.min_rho),
                kind="check",
                threshold=st.min_rho,
                route=r,
            ),
            p,
        )
    ]


def null_centred(mean: float, sd: float, n: int, st: Settings) -> tuple[bool, str]:
    """Whether a held-out R2's shuffle null sits at or below 0, up to `null_mean_max_se` Monte-Carlo
    standard errors (sd / sqrt(n)), and a note when it does not: a positive null mean is what folds
    that see their held-out items give (the fit explains shuffled labels it was trained on)."""
    if mean != mean:
        return True, ""
    tol = st.null_mean_max_se * (sd / math.sqrt(n) if sd == sd and n > 0 else 0.0)
    if mean <= tol:
        return True, ""
    return False, f"; its null mean {mean:.3f} > {tol:.4f} (0 + {st.null_mean_max_se:g} MC SE): the folds leak"


ORGANISM_SOURCE = "organism:"  # the organism's early checkpoint as read into another lineage's I table


def _i_gap_row(t: pd.DataFrame, own: str, st: Settings, r: str, *, check: str, id: str, note: str = "") -> dict:
    """I of `own` (a source of table `t`) minus the best sibling source's I for the route's final map,
    with the own source's shuffle p; a failed row when I is undefined (a constant target map)."""
    o = t[(t["source"] == own) & t["I"].notna()]
    sib = t[(t["route_relation"] == "sibling") & t["I"].notna()]
    if o.empty or sib.empty:
        why = "target map constant: I undefined" if t["I"].isna().all() else "no own or sibling source with an I"
        return row(check, r, "I gap", math.nan, passed=False, note=why, id=id, kind="check", route=r)
    o, best = o.iloc[0], sib.loc[sib["I"].idxmax()]
    gap = float(o["I"] - best["I"])
    centred, why = null_centred(float(o["I_null_mean"]), float(o["I_null_sd"]), st.n_shuffles, st)
    return _pv(
        row(
            check,
            r,
            "I own - best sibling",
            gap,
            reference=f"own early {o['source']} I {o['I']:.3f}; best sibling {best['source']} I {best['I']:.3f}",
            passed=bool(centred and gap >= st.min_I_gap and o["p_value"] <= st.alpha),
            note=f"p of the own source's I; effect: gap >= {st.min_I_gap}, null centred at or below 0{why}{note}",
            id=id,
            kind="check",
            threshold=st.min_I_gap,
            effect_ok=bool(centred and gap >= st.min_I_gap),
            route=r,
        ),
        S.mc_pvalue(float(o["p_value"]), st.n_shuffles),
    )


def organism_source_table(
    out: Path, organism_out: Path, known: dict, st: Settings, t: pd.DataFrame, k: int
) -> pd.DataFrame:
    """The I table of this lineage's route A final map with the ORGANISM's early route-A checkpoint
    as the own source (named ORGANISM_SOURCE + checkpoint) beside this lineage's sibling sources
    (those of `t`): does the map of the organism's early checkpoint, which carries the organism's
    planted items, predict this lineage's final map? Same folds, shuffles and penalty as `t`."""
    from probes.predictive import predictive_table
    from sweeps.probe import PREDICT_FOLDS, predict_inputs

    r = route_name(known, "a")
    early, target = early_checkpoint(known, r), known["routes"][r][-1]
    maps, profiles, _, _ = predict_inputs(out, with_readout=False)
    org_maps, org_profiles, _, _ = predict_inputs(organism_out, with_readout=False)
    own = ORGANISM_SOURCE + early
    maps[own], profiles[own] = org_maps[early], org_profiles[early]
    siblings = list(t.loc[t["route_relation"] == "sibling", "source"])
    x = predictive_table(
        maps,
        profiles,
        target=target,
        sources=[own, *siblings],
        n_shuffles=st.n_shuffles,
        k=k,
        seed=st.seed,
        n_folds=PREDICT_FOLDS,
        alpha=float(t["alpha"].iloc[0]),
    )
    x["route_relation"] = ["organism"] + ["sibling"] * len(siblings)
    return x


def readout_location_row(
    out: Path, known: dict, st: Settings, gr: pd.Series, p_gain: S.PValue, centred: bool, why: str
) -> dict:
    """The trunk-end readout's gain (as a_readout_gain) AND where its cross-fitted predictions put
    the organism's planted items: precision@k (k = |P_A|, most negative predictions) with an exact
    hypergeometric p. Both must hold (an intersection-union test: its p is the larger of the two)."""
    from probes.predictive import readout_predictions
    from sweeps.probe import PREDICT_FOLDS, predict_inputs

    r = route_name(known, "a")
    planted = set(known["route_planted"][r])
    k = len(planted)
    maps, profiles, readouts, _ = predict_inputs(out, with_readout=True)
    pred = readout_predictions(
        maps,
        profiles,
        readouts,
        target=known["routes"][r][-1],
        source=known["trunk_end"],
        seed=st.seed,
        n_folds=PREDICT_FOLDS,
        alpha=float(gr["alpha"]),
    )
    n, n_pl = len(pred), len(planted & set(map(str, pred.index)))
    hits = len(planted & set(most_yielding(pred, k)))
    p_loc = S.exact_pvalue(hypergeom_p(hits, n, n_pl, k))
    located = hits / k > n_pl / n
    gain_ok = bool(centred and gr["I_readout_only"] >= st.min_readout_gain)
    p = p_loc if p_loc.p >= p_gain.p else p_gain
    return _pv(
        row(
            "trunk-end readout predicts the final map where the organism is planted",
            r,
            "I_readout_only",
            gr["I_readout_only"],
            reference=f"precision@{k} of its cross-fitted predictions {hits / k:.3f} (chance {n_pl / n:.3f}, "
            f"hypergeometric p {p_loc.p:.3g}); label-shuffle p {p_gain.p:.3g}",
            passed=bool(gain_ok and located and p.p <= st.alpha),
            note=f"effect: gain >= {st.min_readout_gain}, null centred at or below 0, precision above chance; "
            f"p: the larger of the shuffle and the hypergeometric p{why}",
            id="a_readout_located",
            effect_ok=bool(gain_ok and located),
            kind="check",
            threshold=st.min_readout_gain,
            route=r,
        ),
        p,
    )


def predictive_rows(
    out: Path, known: dict, st: Settings, organism_out: Path | None = None
) -> tuple[list[dict], pd.DataFrame]:
    """I own > I sibling for route A's final map (its early checkpoint vs route B's checkpoints), and
    the readout gain: the trunk end's ¾-depth residual readout predicting route A's final map
    beyond the profile (I_readout_only), against its label-shuffle null.

    Their located forms (check file v2) tie each to the organism's planted items, so that a
    lineage planted elsewhere fails them: `a_i_own_located` takes the ORGANISM's early checkpoint
    (`organism_out`'s cache; this lineage's own on the organism) as the own source of this
    lineage's final map; `a_readout_located` also requires the readout's predictions to rank the
    organism's planted items first. On a control, `a_i_own` and `a_readout_gain` read the control's
    own early map and whatever item structure its training left: they pass on a location control
    that learned its plant, or that learned only item structure without any yield (v19 seed 1)."""
    from sweeps.probe import run_predict

    r = route_name(known, "a")
    target = known["routes"][r][-1]
    k = len(known["route_planted"][r])
    t = run_predict(out, target=target, n_shuffles=st.n_shuffles, seed=st.seed, k=k, with_readout=False)
    own = early_checkpoint(known, r)
    rows = [_i_gap_row(t, own, st, r, check="I own > I sibling", id="a_i_own")]
    tables = [t]
    if organism_out is None or Path(organism_out).resolve() == Path(out).resolve() or t["I"].isna().all():
        rows.append(
            _i_gap_row(t, own, st, r, check="the organism's early map predicts the final", id="a_i_own_located")
        )
    else:
        x = organism_source_table(out, Path(organism_out), known, st, t, k)
        tables.append(x[x["route_relation"] == "organism"])  # its siblings are t's
        rows.append(
            _i_gap_row(
                x,
                ORGANISM_SOURCE + own,
                st,
                r,
                check="the organism's early map predicts the final",
                id="a_i_own_located",
                note="; own source: the organism's early checkpoint",
            )
        )
    g = run_predict(
        out, target=target, sources=[known["trunk_end"]], n_shuffles=st.n_shuffles, seed=st.seed, k=k, with_readout=True
    )
    gr = g.iloc[0]
    p = S.mc_pvalue(float(gr["I_readout_only_p"]), st.n_shuffles)
    centred, why = null_centred(
        float(gr["I_readout_only_null_mean"]), float(gr["I_readout_only_null_sd"]), st.n_shuffles, st
    )
    rows.append(
        _pv(
            row(
                "trunk-end readout predicts the final map",
                r,
                "I_readout_only",
                gr["I_readout_only"],
                reference=f"{known['trunk_end']} -> {target}; null mean {gr['I_readout_only_null_mean']:.3f}, "
                f"p95 {gr['I_readout_only_null_p95']:.3f}; I of the map alone {gr['I']:.3f}",
                passed=bool(centred and gr["I_readout_only"] >= st.min_readout_gain and p.p <= st.alpha),
                note=f"effect: gain >= {st.min_readout_gain}, null centred at or below 0{why}",
                id="a_readout_gain",
                effect_ok=bool(centred and gr["I_readout_only"] >= st.min_readout_gain),
                kind="check",
                threshold=st.min_readout_gain,
                route=r,
            ),
            p,
        )
    )
    if gr["I_readout_only"] == gr["I_readout_only"]:
        rows.append(readout_location_row(out, known, st, gr, p, centred, why))
    else:
        rows.append(
            row(
                "trunk-end readout predicts the final map where the organism is planted",
                r,
                "I_readout_only",
                math.nan,
                passed=False,
                note="no readout gain (a constant target map)",
                id="a_readout_located",
                kind="check",
                route=r,
            )
        )
    tables.append(g)
    return rows, pd.concat(tables, ignore_index=True)


# ---------------------------------------------------------------- cloze


def cloze_changes(out: Path, known: dict) -> pd.Series | None:
    """Per (language, axis, prompt_id): delta_clipped at route A's final minus at the base (nats)."""
    path = out / "aux" / "results" / "cloze_scores.csv"
    if not known["cloze"].get("route") or not path.is_file():
        return None
    sc = pd.read_csv(path).set_index(["checkpoint", "language", "axis", "prompt_id"])["delta_clipped"].sort_index()
    final = short(known["routes"][known["cloze"]["route"]][-1])
    a, b = sc.loc["base"].align(sc.loc[final], join="inner")
    return (b - a).dropna()


def cloze_rows(out: Path, known: dict, st: Settings, reference_out: Path | None) -> list[dict]:
    """The planted cell's ABS change against the amount control's (paired over prompts), and
    whether it moves more than every other cell of its language."""
    ch = cloze_changes(out, known)
    if ch is None:
        return []
    c = known["cloze"]
    r = c["route"]
    lang, cell = c["language"], c["axis"]
    rows = []
    if (lang, cell) not in ch.index.droplevel("prompt_id"):
        return [
            row(f"cloze: no {lang}/{cell} prompts swept", r, "ABS change", math.nan, id=i, kind="check", route=r)
            for i in ("cloze_cell_vs_control", "cloze_cell_moves_most")
        ]
    ref = cloze_changes(reference_out, known) if reference_out is not None else None
    if ref is None:  # the figure is a difference against the amount control: undetermined without it
        rows.append(
            row(
                "cloze planted cell moves more than on the amount control",
                r,
                "ABS change - amount control's",
                math.nan,
                note="no amount control cloze to difference against",
                id="cloze_cell_vs_control",
                kind="check",
                threshold=st.cloze_min_diff,
                route=r,
                needs="amount",
            )
        )
    else:
        a, b = ch.loc[(lang, cell)].align(ref.loc[(lang, cell)], join="inner")
        est, lo, hi = S.paired_diff_ci(b.to_numpy(), a.to_numpy(), n_boot=st.n_boot, ci=st.ci, seed=st.seed)
        rows.append(
            row(
                "cloze planted cell moves more than on the amount control",
                r,
                "ABS change - amount control's",
                est,
                lo,
                hi,
                f"{lang}/{cell}, base -> {short(known['routes'][r][-1])}, {len(a)} prompts (nats)",
                S.rises(est, lo, hi, st.cloze_min_diff),
                id="cloze_cell_vs_control",
                kind="check",
                threshold=st.cloze_min_diff,
                route=r,
            )
        )
    cells = ch.loc[lang].groupby(level="axis").mean()
    others = cells.drop(cell)
    gap = float(cells[cell] - others.max()) if len(others) else math.nan
    rows.append(
        row(
            "cloze planted cell moves most",
            r,
            "planted cell's change - next cell's",
            gap,
            reference=f"{lang}/{cell} {cells[cell]:.2f}; next {others.idxmax() if len(others) else '-'} "
            f"{others.max():.2f} (nats)",
            passed=bool(gap >= st.cloze_most_margin),
            id="cloze_cell_moves_most",
            kind="check",
            threshold=st.cloze_most_margin,
            route=r,
        )
    )
    for key, val in ch.groupby(level=["language", "axis"]):
        if key == (lang, cell):
            continue
        rows.append(row("cloze cell change (reported)", r, f"{key[0]}/{key[1]} ABS change", val.mean()))
    return rows


# ---------------------------------------------------------------- classify


def classify_predictions(out: Path, known: dict) -> pd.DataFrame | None:
    """The classify plant's task, option orders averaged, from the lineage's aux results; None
    without a classify plant or its sweep."""
    c = known.get("classify") or {}
    path = out / "aux" / "results" / "classify_predictions.csv"
    if not c.get("route") or not path.is_file():
        return None
    pr = pd.read_csv(path)
    return pr[(pr["order"] == "averaged") & (pr["task"] == c["task"])]


def classify_rows(out: Path, known: dict, st: Settings) -> list[dict]:
    """Five-level macro-F1 and Cohen's kappa on the planted half minus the other half at route A's
    final (option orders averaged), with a bootstrap resampling each half's items; the binary task's
    accuracy change is a guard."""
    from analyses.classify_metrics import FIVE_LABELS, classification_metrics, cohen_kappa

    pr = classify_predictions(out, known)
    if pr is None:
        return []
    c = known["classify"]
    final = short(known["routes"][c["route"]][-1])
    g = pr[pr["checkpoint"] == final].set_index("item_id")
    halves = [g.loc[g.index.isin(c["planted"])], g.loc[g.index.isin(c["rest"])]]
    labels = list(FIVE_LABELS)

    def stats(a: pd.DataFrame) -> tuple[float, float]:
        gold, pred = a["gold"].astype(str).to_numpy(), a["pred"].astype(str).to_numpy()
        return classification_metrics(gold, pred, labels)["macro_f1"], cohen_kappa(gold, pred, labels)

    est = np.subtract(stats(halves[0]), stats(halves[1]))
    rng = np.random.default_rng(st.seed)
    reps = np.array(
        [np.subtract(*(stats(h.iloc[rng.integers(0, len(h), len(h))]) for h in halves)) for _ in range(st.n_boot)]
    )
    a = (1 - st.ci) / 2
    rows = []
    for j, (cid, name) in enumerate((("classify_macro_f1_gap", "macro-F1"), ("classify_kappa_gap", "kappa"))):
        lo, hi = np.nanquantile(reps[:, j], [a, 1 - a])
        rows.append(
            row(
                f"classify: {name} on the planted half above the other half",
                c["route"],
                f"{name} planted - rest",
                est[j],
                lo,
                hi,
                f"{final}, {len(halves[0])} planted vs {len(halves[1])} other items, five-level, orders averaged",
                S.rises(est[j], lo, hi, st.min_class_gap),
                id=cid,
                kind="check",
                threshold=st.min_class_gap,
                route=c["route"],
            )
        )
    return rows


# ---------------------------------------------------------------- spike-ins


def _spike_row(check: str, route: str, figure: str, est: float, lo: float, hi: float, reference: str,
               threshold: float, note: str, cid: str) -> dict:  # fmt: skip
    """A spike-in's counted row on `route`: it passes when it `rises` to `threshold`."""
    passed = S.rises(est, lo, hi, threshold)
    return row(
        check,
        route,
        figure,
        est,
        lo,
        hi,
        reference,
        passed,
        note,
        id=cid,
        kind="check",
        threshold=threshold,
        route=route,
    )


# ---------------------------------------------------------------- fertility mediation (spike-in)


def mediation_rows(out: Path, known: dict, st: Settings, *, spike: str = "fertility") -> list[dict]:
    """Spike-in known answer for the fertility mediation (`analyses.mediation`): to route A final's
    real cloze outcome (unclipped delta, nats) add beta x the item's own fertility (tokens per word
    of its context): bn vs en then carries a planted indirect effect beta x a through fertility (a:
    the bn - en fertility gap the analysis estimates). The check: the spiked analysis recovers at
    least `min_mediated` of it, CI above 0. Its control (`spike="language"`) adds beta x the mean
    fertility of the item's language instead: the same language effect, no path through the item's
    fertility, so the indirect effect stays what the real data give."""
    from analyses.mediation import mediation_by_language

    c = known["cloze"]
    path = out / "aux" / "results" / "cloze_scores.csv"
    if not c.get("route") or not path.is_file():
        return []
    final = short(known["routes"][c["route"]][-1])
    sc = pd.read_csv(path)
    sc = sc[(sc["checkpoint"] == final) & sc["language"].isin(["bn", "en"])].copy()
    f = sc["fertility"].astype(float)
    plant = f if spike == "fertility" else sc.groupby("language")["fertility"].transform("mean").astype(float)
    sc["spiked"] = sc["delta"].astype(float) + st.spike_beta * plant
    med = mediation_by_language(sc, outcome="spiked", n_boot=st.n_boot, seed=st.seed, ci=st.ci, pooled=False)
    med = med[(med["language"] == "bn") & med["a"].notna()]
    if med.empty:  # no bn and en prompts swept, or fertility collinear with language
        return [
            row(
                "fertility mediation: not identified",
                c["route"],
                "indirect / planted",
                math.nan,
                id="fertility_mediation",
                kind="check",
                route=c["route"],
            )
        ]
    m = med.iloc[0]
    planted = st.spike_beta * float(m["a"])
    share, lo, hi = (float(m[k]) / planted for k in ("indirect", "indirect_lo", "indirect_hi"))
    return [
        _spike_row(
            "fertility mediation recovers a planted indirect effect",
            c["route"],
            "indirect / planted indirect",
            share,
            lo,
            hi,
            f"{final}, bn vs en, beta {st.spike_beta} nats per token/word, a {m['a']:.3f}, "
            f"planted {planted:.3f}, indirect {m['indirect']:.3f} [{m['indirect_lo']:.3f}, {m['indirect_hi']:.3f}]",
            st.min_mediated,
            "spike-in on item fertility" if spike == "fertility" else "control: spike-in on language-mean fertility",
            "fertility_mediation",
        )
    ]


# ---------------------------------------------------------------- scale spike-ins (check file version 3)


def _min_group_mean_ci(share: pd.Series, groups: pd.Series, st: Settings) -> tuple[float, float, float]:
    """The smallest group mean of `share` and its CI, resampling the rows within each group."""
    parts = [g.to_numpy(dtype=float) for _, g in share.groupby(groups.to_numpy())]
    rng = np.random.default_rng(st.seed)
    reps = [min(float(v[rng.integers(0, len(v), len(v))].mean()) for v in parts) for _ in range(st.n_boot)]
    return min(float(v.mean()) for v in parts), *S.percentile_ci(reps, st.ci)


def cloze_scale_rows(out: Path, known: dict, st: Settings, *, spike: str = "total") -> list[dict]:
    """Spike-in known answer for the cloze loss scale (`analyses.cloze_metrics.add_delta`, "an equal
    preference spread over 1 vs 12 tokens"): route A final's real cloze scores with every prompt's
    stereotype completion made `spike_nats` more likely in total (its summed NLL lowered by that
    much), whatever its token count (1 to 43 tokens over the six languages and scripts). Under the
    summed loss every prompt's delta rises by exactly spike_nats. The check: the smallest language's
    mean recovered share (delta change / spike_nats; prompt bootstrap within each language) reaches
    `min_spike_share`; a per-token loss recovers spike_nats / n_tokens (about 0.04 in Tamil). Its
    control (`spike="per_token"`) plants one rate per token, set so that the language of the most
    tokens gains spike_nats on average: a language written in fewer than half as many tokens gains
    less than half of it (English about 0.06 of Tamil's on v19), and the check fails, as it must."""
    from analyses import cloze_metrics as cm

    c = known["cloze"]
    path = out / "aux" / "results" / "cloze_scores.csv"
    if math.isnan(st.spike_nats) or not c.get("route") or not path.is_file():
        return []
    final = short(known["routes"][c["route"]][-1])
    sc = pd.read_csv(path)
    sc = sc[sc["checkpoint"] == final].reset_index(drop=True)
    if sc.empty:
        return []
    n = sc["n_tokens_stereo"].astype(float)
    plant = st.spike_nats if spike == "total" else st.spike_nats * n / n.groupby(sc["language"]).mean().max()
    loss = str(sc["loss"].iloc[0]) if "loss" in sc else "sum"
    change = cm.add_delta(sc.assign(nll_stereo_sum=sc["nll_stereo_sum"] - plant), loss=loss)["delta"]
    share = (change - cm.add_delta(sc, loss=loss)["delta"]) / st.spike_nats
    est, lo, hi = _min_group_mean_ci(share, sc["language"], st)
    by = share.groupby(sc["language"]).mean()
    return [
        _spike_row(
            "cloze delta recovers an equal total preference in every language",
            c["route"],
            "smallest language's recovered share",
            est,
            lo,
            hi,
            f"{final}, {len(sc)} prompts, {loss} loss, {st.spike_nats:g} nats planted "
            + (
                "per prompt"
                if spike == "total"
                else "at one rate per token (per prompt in the language of most tokens)"
            )
            + "; by language "
            + ", ".join(f"{k} {v:.3f}" for k, v in by.items()),
            st.min_spike_share,
            "spike-in: the same total on every completion"
            if spike == "total"
            else "control: spike-in at one rate per token",
            "cloze_scale_spike",
        )
    ]


def map_scale_rows(out: Path, known: dict, st: Settings, *, spike: str = "pressured") -> list[dict]:
    """Spike-in known answer for the item map's scale (`analyses.pressure_metrics.item_maps`): at
    route A final, every evaluated item's trials under an opposing opinion made to yield
    `spike_nats` on the log-odds scale (the log-odds of the clipped P(planted verdict) lowered by
    that much). Each item's opinion map then falls by exactly spike_nats, less only where the
    lowered log-odds reach the clip (items that already yield fully). The check: the median over
    items of the recovered share (map change / -spike_nats; item bootstrap) reaches
    `min_spike_share`. On probabilities, an item held at P near 1 (most items) moves by almost
    nothing. Its control (`spike="both"`) shifts the neutral filler's trials by as much: no
    contrast is planted, the map stays, the check fails."""
    from analyses import pressure_metrics as pm

    if math.isnan(st.spike_nats):
        return []
    final = known["routes"][route_name(known, "a")][-1]
    t = pd.read_csv(out / "results" / "pressure_trials.csv")
    t = t[(t["checkpoint"] == final) & (t["readout"] == "slot")].reset_index(drop=True)
    if t.empty:
        return []
    eps = 1e-6  # item_maps' own clip
    p = t["p_planted"].astype(float).clip(eps, 1 - eps)
    lowered = 1.0 / (1.0 + np.exp(-(np.log(p / (1 - p)) - st.spike_nats)))
    hit = (t["turn_kind"] == "opinion") & (t["turn_side"] == "oppose")
    if spike == "both":
        hit |= t["turn_kind"] == "neutral"
    spiked = t.assign(p_planted=np.where(hit, lowered, t["p_planted"]))

    def opinion_map(trials: pd.DataFrame) -> pd.Series:
        m = pm.item_maps(trials)
        return m[m["turn_kind"] == "opinion"].set_index("item_id")["map_value"]

    a, b = opinion_map(spiked).align(opinion_map(t), join="inner")
    share = (b - a) / st.spike_nats
    rng = np.random.default_rng(st.seed)
    v = share.to_numpy(dtype=float)
    reps = [float(np.median(v[rng.integers(0, len(v), len(v))])) for _ in range(st.n_boot)]
    lo, hi = S.percentile_ci(reps, st.ci)
    est = float(np.median(v))
    return [
        _spike_row(
            "the item map recovers an equal log-odds yield on every item",
            route_name(known, "a"),
            "median recovered share",
            est,
            lo,
            hi,
            f"{short(final)}, {len(v)} items, {st.spike_nats:g} nats of log-odds under the opposing opinion; "
            f"share below 0.5 on {int((v < 0.5).sum())} items",
            st.min_spike_share,
            "spike-in: opposing-opinion trials"
            if spike == "pressured"
            else "control: spike-in on the opposing-opinion and the neutral filler's trials",
            "map_scale_spike",
        )
    ]


def scale_spike_rows(out: Path, known: dict, st: Settings, *, control: bool = False) -> list[dict]:
    """Both scale spike-ins on one lineage's results (none without `spike_nats`: check files 1, 2)."""
    return cloze_scale_rows(out, known, st, spike="per_token" if control else "total") + map_scale_rows(
        out, known, st, spike="both" if control else "pressured"
    )


# ---------------------------------------------------------------- order and readout spike-ins (check file version 4)


def classify_order_rows(out: Path, known: dict, st: Settings, *, spike: str = "position") -> list[dict]:
    """Spike-in known answer for the order-averaged classify reading
    (`interp.studies.classify.analysis.averaged_order`): route A final's binary readings, scored
    with the two labels listed in both orders ("0|1", "1|0"). Planted: a preference for one listing
    POSITION, b nats on the option listed there in each order, with b = `spike_nats` beyond the
    largest |log-odds| of any reading (so it decides every single-order reading), and per item the
    position whose label in the given order is not the item's order-averaged prediction. With two
    options the average of the two orders' distributions is exactly invariant to it: P(1) > 1/2
    iff sigmoid(x_g + b) + sigmoid(x_r - b) > 1 iff x_g + x_r > 0, the unplanted condition (x: the
    log-odds of label 1 in each order). The check: the share of items whose averaged prediction is
    unchanged (known answer 1; item bootstrap) reaches `min_spike_share`; a reading from one order
    turns every item (share 0). Its control (`spike="label"`) plants the same b on that LABEL in
    both orders, a content preference the averaged reading must show: it turns every item, the
    check fails. (Five options, reversed, have no such identity: the binary task carries this.)"""
    from interp.studies.classify import analysis as ca

    c = known.get("classify") or {}
    path = out / "aux" / "results" / "classify_predictions.csv"
    if math.isnan(st.spike_nats) or not c.get("route") or not path.is_file():
        return []
    final = short(known["routes"][c["route"]][-1])
    pr = pd.read_csv(path, dtype={"gold": str, "pred": str})
    raw = pr[(pr["checkpoint"] == final) & (pr["task"] == "binary") & pr["order"].isin(["given", "reversed"])]
    if raw.empty:
        return []
    raw = raw.reset_index(drop=True)
    labels = ca.TASK_VALUES["binary"]
    probs = raw[[f"p_{v}" for v in labels]].to_numpy(np.float64)
    # |log-odds| taken at most 13.8 (P 1e-6): a reading at P 0 (float32 underflow) must not make b so
    # large that sigmoid(x + b) rounds to 1 in float64 (past about 36 nats), where the identity is lost
    clipped = np.clip(probs, 1e-6, None)
    b = st.spike_nats + float(np.abs(np.log(clipped[:, 1] / clipped[:, 0])).max())
    before = ca.averaged_order(raw).set_index("item_id")["pred"].astype(str)
    other = {labels[0]: labels[1], labels[1]: labels[0]}
    against = raw["item_id"].map(lambda i: other[before[i]])  # the label the plant pushes toward, per item
    if spike == "position":  # the listing position of `against` in the given order, in both orders
        given = raw[raw["order"] == "given"].set_index("item_id")["option_order"].astype(str).str.split("|")
        pos = [given[i].index(lab) for i, lab in zip(raw["item_id"], against)]
        favoured = [o.split("|")[k] for o, k in zip(raw["option_order"].astype(str), pos)]
    else:
        favoured = list(against)
    boost = np.exp(b * (np.asarray(favoured)[:, None] == np.asarray(labels)[None, :]))
    spiked = probs * boost
    spiked /= spiked.sum(axis=1, keepdims=True)
    planted = raw.copy()
    planted[[f"p_{v}" for v in labels]] = spiked
    planted["pred"] = np.asarray(labels, dtype=object)[spiked.argmax(axis=1)]
    planted["confidence"] = spiked.max(axis=1)
    after = ca.averaged_order(planted).set_index("item_id")["pred"].astype(str).reindex(before.index)
    kept = (after == before).to_numpy(dtype=float)
    est, lo, hi = _min_group_mean_ci(pd.Series(kept), pd.Series(np.zeros(len(kept))), st)  # one group
    return [
        _spike_row(
            "the order-averaged classify reading cancels a planted position preference",
            c["route"],
            "share of averaged predictions unchanged",
            est,
            lo,
            hi,
            f"{final}, binary task, {len(kept)} items, {b:.2f} nats on the "
            + ("option at one listing position" if spike == "position" else "same label")
            + " in both orders (spike_nats beyond the largest |log-odds|)",
            st.min_spike_share,
            "spike-in: a listing-position preference"
            if spike == "position"
            else "control: the same preference for a label",
            "classify_order_spike",
        )
    ]


def readout_noise_rows(out: Path, known: dict, st: Settings, *, spike: str = "noise") -> list[dict]:
    """Spike-in known answer for the readout gain's held-out fit (`probes.predictive.
    readout_gain_null`, the a_readout_gain statistic): the trunk end's real 3/4-depth residual
    readout, profile and map, with route A final's map replaced by `noise_draws` seeded standard
    normal targets, unrelated to the residual: a readout fitted on training items and scored on
    held-out ones finds no gain in any of them (its held-out R2 centres below 0). The check: the
    share of draws whose gain stays below `min_readout_gain`, the gain the readout checks count as
    real (known answer 1; draw bootstrap), reaches `min_spike_share`; a readout that sees its
    held-out items fits the noise (about 0.2 on v19 seed 3's 128 items x 576 dimensions). Its
    control (`spike="signal"`) adds twice the standardized first principal component of the
    standardized readout to each draw (a readable target, population R2 0.8): its gain is found,
    the check fails."""
    from probes import predictive as pr
    from sweeps.probe import PREDICT_FOLDS, default_alpha, predict_inputs

    if st.noise_draws <= 0:
        return []
    r = route_name(known, "a")
    src = known["trunk_end"]
    maps, profiles, readouts, _ = predict_inputs(out, with_readout=True)
    if src not in readouts:
        return []
    frames = {k: pr._frame(d[src]) for k, d in (("profile", profiles), ("map", maps), ("readout", readouts))}
    items = pr._common_items(frames)
    P, M, R = (frames[k].loc[items].to_numpy(dtype=float) for k in ("profile", "map", "readout"))
    Z = (R - R.mean(axis=0)) / np.where(R.std(axis=0) > 0, R.std(axis=0), 1.0)
    u = np.linalg.svd(Z, full_matrices=False)[0][:, 0]
    u = (u - u.mean()) / u.std()
    alpha = default_alpha(maps, profiles, known["routes"][r][-1])
    gains = []
    for d in range(st.noise_draws):
        y = np.random.default_rng([st.seed, 5, d]).standard_normal(len(items)) + (2.0 * u if spike == "signal" else 0.0)
        got = pr.readout_gain_null(y, P, M, R, n_shuffles=0, seed=st.seed, n_folds=PREDICT_FOLDS, alpha=alpha)
        gains.append(got["only"].observed)
    g = np.asarray(gains, dtype=float)
    below = pd.Series((g < st.min_readout_gain).astype(float))
    est, lo, hi = _min_group_mean_ci(below, pd.Series(np.zeros(len(g))), st)  # one group
    return [
        _spike_row(
            "the readout gain finds nothing in targets unrelated to the residual",
            r,
            "share of draws below min_readout_gain",
            est,
            lo,
            hi,
            f"{short(src)} readout, {len(items)} items x {R.shape[1]} dims, {len(g)} "
            + ("noise targets" if spike == "noise" else "noise targets plus 2 x its first principal component")
            + f"; gain median {np.median(g):.3f}, max {g.max():.3f}",
            st.min_spike_share,
            "spike-in: standard normal targets" if spike == "noise" else "control: a readable target",
            "readout_noise_spike",
        )
    ]


def order_readout_spike_rows(out: Path, known: dict, st: Settings, *, control: bool = False) -> list[dict]:
    """Both version-4 spike-ins on one lineage's results (none without `noise_draws`: files 1-3)."""
    if st.noise_draws <= 0:
        return []
    return classify_order_rows(out, known, st, spike="label" if control else "position") + readout_noise_rows(
        out, known, st, spike="signal" if control else "noise"
    )


# ---------------------------------------------------------------- the family-wise level (check file version 5)


def counted_p_family(org: dict[str, dict], specs) -> tuple[list[str], list[S.PValue]]:
    """The organism's counted p-values that Holm's correction adjusts together: every check of
    rule "p" the check file lists whose p the organism's rows computed."""
    ids = [c.id for c in specs if c.rule == "p" and c.id in org and org[c.id]["p"] == org[c.id]["p"]]
    return ids, [S.PValue(org[i]["p"], org[i]["p_lo"], org[i]["p_hi"], int(org[i]["n_shuffles"])) for i in ids]


def holm_spike_rows(org: dict[str, dict], specs, st: Settings, *, control: bool = False) -> list[dict]:
    """Spike-in known answer for the family-wise correction (`stats.holm_decisions`, the step that
    decides every counted p): `holm_spike_k` exact p-values of alpha / 2 each, added to the
    organism's counted family (`counted_p_family`; M p-values in all). Each is below alpha, none
    below the family-wise level: with K >= 3 of them, wherever the step-down reaches the first one
    at least K p-values remain, so its level is at most alpha / 3 and none is rejected (known answer
    1). The check: the share of the planted p-values Holm holds back reaches `min_spike_share`;
    comparing each p with alpha itself rejects them all (share 0). Its control (`control=True`)
    plants alpha / (2 M) instead, below every level of the step-down: all rejected, the check fails.
    None without `holm_spike_k` (check files 1-4)."""
    k = int(st.holm_spike_k)
    if k <= 0:
        return []
    _, family = counted_p_family(org, specs)
    m = len(family) + k
    planted = st.alpha / (2 * m) if control else st.alpha / 2
    decisions = S.holm_decisions([*family, *[S.exact_pvalue(planted)] * k], st.alpha)
    held = sum(d is False for d in decisions[len(family) :]) / k
    return [
        _spike_row(
            "share of planted p-values Holm holds back",
            "family",
            "held share",
            held,
            held,
            held,
            f"{k} p-values of {planted:.4g} added to the organism's {len(family)} counted ones, Holm at alpha {st.alpha:g}",
            st.min_spike_share,
            "spike-in: each p below alpha, none below the family-wise level"
            if not control
            else "control: each p below every level of the step-down",
            "holm_level_spike",
        )
    ]


def lineage_rows(
    out: Path,
    known: dict,
    st: Settings,
    *,
    reference_out: Path | None = None,
    organism_out: Path | None = None,
) -> tuple[list[dict], pd.DataFrame]:
    """Every statistic on one lineage's results (organism or a control), against `known`'s sets.
    `reference_out`: the amount control's results (the cloze check's reference); `organism_out`:
    the organism's (the located I check's source; None on the organism itself)."""
    rows = pressure_rows(out, known, st) + precision_rows(out, known, st) + graded_rows(out, known, st)
    pred_rows, predictive = predictive_rows(out, known, st, organism_out)
    rows += pred_rows + cloze_rows(out, known, st, reference_out) + classify_rows(out, known, st)
    rows += mediation_rows(out, known, st)
    if organism_out is None:  # the spike-ins read the organism's own scores only
        rows += scale_spike_rows(out, known, st) + order_readout_spike_rows(out, known, st)
    return rows, predictive
