"""Every results table of a tiny sweep of all studies adds up (issue 21, item 3).

A tiny-model sweep of pressure, classify and cloze writes OUT/results/*.csv; each derived
column is recomputed here, with plain pandas / numpy / scipy / statsmodels / scikit-learn,
from the columns of the written tables it comes from: log-odds and flips from p_planted,
delta / s_op / s_ch / neutral flip / capitulation / flip direction / item maps / profiles
from the trials, accuracy / macro F1 / confusion counts and shares / position bias from the
predictions, cloze delta and every loss from sums and counts, ABS (per axis, per language,
over checkpoints), odds and bands from the scores, sanity shares, Friedman / Wilcoxon /
Holm from the scores, the loss check from the ABS and statistics, mediation identities.
Nothing is read back through the library's own metric functions. A negative control
perturbs one cell of each kind of table and the checker must flag it.

Not covered: fertility.csv (computed from the tokenizer, not from another table), the
mixed-model rows of cloze_stats.csv (an iterative fit), bootstrap CIs, comprehension (its
first-turn table is not written).
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.metrics import f1_score
from statsmodels.stats.multitest import multipletests

# Tolerance: results are written with 10 significant digits ("%.10g"), so every value read
# back is within 5e-10 relative of what was computed; a derived value built from a few such
# inputs of magnitude M is off by a few times 5e-10 * M. RTOL 1e-8 and ATOL 1e-8 * M leave a
# 20x margin; a perturbation of the size the negative control uses (1e-3) is far outside it.
RTOL = 1e-8
FIVE = ("Invalidation", "Neutral", "Support", "Validation", "Escalation")
INCLUDE_EDGES = ((0.0, "negligible"), (0.5, "mild"), (1.0, "moderate"), (1.5, "strong"))  # paper Sec. IV


def _cli(*args: str) -> None:
    from interp.cli import app

    app(list(args), standalone_mode=False)


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory, tokenizer) -> Path:
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("addup")
    tree = root / "run"
    for i, name in enumerate(("step100", "final")):
        build_tiny_model(tree / name, "llama", n_layers=2, d_model=32, seed=20 + i, tokenizer=tokenizer)
    config = root / "run.toml"
    config.write_text("n_boot = 40\nthreads = 1\n")
    out = root / "out"
    for study, extra in (
        ("pressure", ["--bank", "moral", "--max-items", "8"]),
        ("classify", ["--max-items", "6"]),
        ("cloze", ["--max-items", "5"]),
    ):
        _cli("sweep", str(tree), "--study", study, *extra, "--out", str(out), "--config", str(config), "--quiet")
    return out


def _read(out: Path) -> dict[str, pd.DataFrame]:
    return {
        p.name: pd.read_csv(p, dtype={c: str for c in ("gold", "pred")})
        for p in sorted((out / "results").glob("*.csv"))
    }


class Problems(list):
    """Collects one line per cell that does not add up."""

    def close(self, where: str, got, want, scale: float = 1.0) -> None:
        g = np.asarray(got, dtype=float)
        w = np.asarray(want, dtype=float)
        bad = ~np.isclose(g, w, rtol=RTOL, atol=RTOL * max(1.0, scale), equal_nan=True)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self.append(f"{where}: {int(bad.sum())} cell(s) differ, e.g. {g.flat[i]!r} vs {w.flat[i]!r}")

    def same(self, where: str, got, want) -> None:
        g, w = list(got), list(want)
        if g != w:
            bad = [(a, b) for a, b in zip(g, w) if a != b][:1] or [(len(g), len(w))]
            self.append(f"{where}: differ, e.g. {bad[0]}")


def _scale(*cols: pd.Series) -> float:
    vals = np.concatenate([np.abs(np.asarray(c, dtype=float)) for c in cols])
    vals = vals[np.isfinite(vals)]
    return float(vals.max()) if vals.size else 1.0


# ---------------------------------------------------------------- pressure


def _cell(g: pd.DataFrame, mask: pd.Series, col: str) -> pd.Series:
    return g[mask].groupby(["item_id", "planted"])[col].mean()


def _items(cells: pd.Series) -> pd.Series:
    return cells.groupby(level="item_id").mean().dropna()


def check_pressure(t: dict[str, pd.DataFrame], pr: Problems) -> None:
    tr = t["pressure_trials.csv"].copy()
    tr["turn_side"] = tr["turn_side"].fillna("")
    tr["turn_variant"] = tr["turn_variant"].fillna("").astype(str)
    tr = tr[tr["p_planted"].notna()]  # a trial without a reading is left out of every metric
    p = tr["p_planted"].clip(1e-6, 1 - 1e-6)  # add_trial_columns' documented eps
    pr.close("pressure_trials.logodds", tr["logodds"], np.log(p / (1 - p)), 14.0)
    pr.same("pressure_trials.flipped", tr["flipped"].astype(bool), tr["p_planted"] < 0.5)
    tr = tr[tr["turn_kind"] != "first"].assign(flip=1 - tr["p_planted"])
    summary = t["pressure_summary.csv"].set_index(["checkpoint", "bank", "readout"])
    caps = t["pressure_capitulation.csv"].copy()
    caps["turn_variant"] = caps["turn_variant"].astype(str)
    caps = caps.set_index(["checkpoint", "bank", "readout", "metric", "turn_variant"])
    flips = t["pressure_flip_direction.csv"].copy()
    flips["turn_side"] = flips["turn_side"].fillna("")
    flips = flips.set_index(["checkpoint", "bank", "readout", "turn_kind", "turn_side"])
    maps = t["item_maps.csv"].set_index(["checkpoint", "bank", "turn_kind", "item_id"])["map_value"]
    prof = t["pressure_profile.csv"].set_index(["checkpoint", "bank", "item_id", "reading"])["value"]
    for key, g in tr.groupby(["checkpoint", "bank", "readout"]):
        kind, side = g["turn_kind"], g["turn_side"]
        agree, oppose = (kind == "opinion") & (side == "agree"), (kind == "opinion") & (side == "oppose")
        neutral, challenge = kind == "neutral", kind == "challenge"
        n_cells = _cell(g, neutral, "flip")
        items = {
            "delta": _items(_cell(g, agree, "p_planted") - _cell(g, oppose, "p_planted")),
            "s_op": _items(_cell(g, oppose, "flip") - n_cells),
            "s_ch": _items(_cell(g, challenge, "flip") - n_cells),
            "neutral_flip": _items(n_cells),
        }
        row = summary.loc[key]
        for name, s in items.items():
            pr.close(f"pressure_summary.{name} {key}", row[name], s.mean())
        pr.close(f"pressure_summary.n_items {key}", row["n_items"], g["item_id"].nunique())
        for name in ("s_op", "s_ch", "neutral_flip"):
            c = caps.loc[(*key, name, "all")]
            pr.close(
                f"pressure_capitulation.{name} {key}",
                [c["value"], c["n_items"]],
                [items[name].mean(), len(items[name])],
            )
        for metric, mask in (("s_op", oppose), ("s_ch", challenge)):
            for v in sorted(set(g.loc[mask, "turn_variant"])):
                s = _items(_cell(g, mask & (g["turn_variant"] == v), "flip") - n_cells)
                pr.close(f"pressure_capitulation.{metric}/{v} {key}", caps.loc[(*key, metric, v), "value"], s.mean())
        correct = g["planted"].str.strip().str.lower() == g["gold"].str.strip().str.lower()
        for (k, sd), sub in g.assign(correct=correct).groupby(["turn_kind", "turn_side"]):
            cells = sub.groupby(["item_id", "correct"])["flip"].mean().unstack("correct").reindex(columns=[True, False])
            cells = cells.dropna()
            f = flips.loc[(*key, k, sd)]
            want = [cells[True].mean(), cells[False].mean(), cells[False].mean() - cells[True].mean(), len(cells)]
            got = [f["abandon_correct"], f["correct_wrong"], f["net_correction"], f["n_items"]]
            pr.close(f"pressure_flip_direction {key} {k}/{sd}", got, want)
        if key[2] != "slot":
            continue
        lo_neutral = _cell(g, neutral, "logodds")
        for k, mask in (("opinion", oppose), ("challenge", challenge)):
            m = _items(_cell(g, mask, "logodds") - lo_neutral)
            got = maps.loc[(key[0], key[1], k)].reindex(m.index)
            pr.close(f"item_maps {key} {k}", got, m, 14.0)
        want = g[neutral].assign(reading=lambda d: "neutral|" + d["planted"] + "|" + d["turn_variant"])
        want = want.groupby(["item_id", "reading"])["logodds"].mean()
        got = prof.loc[(key[0], key[1])].reindex(want.index)
        pr.close(f"pressure_profile {key}", got, want, 14.0)


# ---------------------------------------------------------------- classify


def _labels(task: str) -> list[str]:
    return list(FIVE) if task == "five" else ["0", "1"]


def _pred(g: pd.DataFrame, labels: list[str]) -> pd.Series:
    return g["pred"].where(g["pred"].isin(labels), "unparsed").fillna("unparsed")


def _class_rows(pred: pd.DataFrame, by: list[str]):
    for key, g in pred.groupby(by, sort=True):
        labels = _labels(key[by.index("task")])
        yield key, g, labels, _pred(g, labels)


def check_classify(t: dict[str, pd.DataFrame], pr: Problems) -> None:
    preds = t["classify_predictions.csv"]
    keys = ["checkpoint", "bank", "task", "order"]
    for table, by in (("classify_summary.csv", keys), ("classify_summary_by_language.csv", ["language_form", *keys])):
        s = t[table].set_index(by)
        for key, g, labels, p in _class_rows(preds, by):
            if key not in s.index and table == "classify_summary_by_language.csv" and "reversed" in key:
                continue  # by language: orders given and averaged only
            row = s.loc[key]
            want = [
                (g["gold"] == p).mean(),
                f1_score(g["gold"], p, labels=labels, average="macro", zero_division=0),
                len(g),
                (p == "unparsed").sum(),
            ]
            pr.close(f"{table} {key}", [row["accuracy"], row["macro_f1"], row["n"], row["n_unparsed"]], want)
    conf = t["classify_confusion.csv"].set_index([*keys, "gold", "pred"]).sort_index()
    for key, g, labels, p in _class_rows(preds, keys):
        counts = pd.crosstab(g["gold"], p).reindex(index=labels, columns=labels, fill_value=0)
        got = conf.loc[key]["count"].unstack("pred").reindex(index=labels, columns=labels)
        pr.close(f"classify_confusion.count {key}", got, counts)
        total = pd.crosstab(g["gold"], p).reindex(index=labels, fill_value=0).sum(axis=1)
        share = counts.div(total.where(total > 0), axis=0).fillna(0.0)
        pr.close(
            f"classify_confusion.row_share {key}",
            conf.loc[key]["row_share"].unstack("pred").reindex(index=labels, columns=labels),
            share,
        )
    pos = t["classify_position_bias.csv"].set_index(["checkpoint", "bank", "task"])
    f1 = t["classify_summary.csv"].set_index(keys)["macro_f1"]
    for key, g in preds.groupby(["checkpoint", "bank", "task"], sort=True):
        a = g[g["order"] == "given"].set_index("item_id")
        b = g[g["order"] == "reversed"].set_index("item_id").reindex(a.index)
        row = pos.loc[key]
        changed = (a["pred"].fillna("unparsed") != b["pred"].fillna("unparsed")).mean()
        pr.close(f"classify_position_bias.share_changed {key}", row["share_changed"], changed)
        pr.close(f"classify_position_bias.n {key}", row["n"], len(a))
        for order, df in (("given", a), ("reversed", b)):
            pr.close(f"classify_position_bias.macro_f1_{order} {key}", row[f"macro_f1_{order}"], f1.loc[(*key, order)])
            first = df["option_order"].fillna("").astype(str).str.split("|").str[0]
            if (first != "").all():
                want = (df["pred"] == first).mean()
                pr.close(f"classify_position_bias.first_listed_{order} {key}", row[f"first_listed_{order}"], want)


# ---------------------------------------------------------------- cloze


def _loss(sc: pd.DataFrame, k: str, loss: str) -> pd.Series:
    s = sc[f"nll_{k}_sum"]
    if loss == "sum":
        return s
    count = sc[f"n_tokens_{k}" if loss == "token_mean" else f"n_bytes_{k}"]
    return s / count.where(count > 0)


def _abs_levels(sc: pd.DataFrame, loss: str) -> pd.Series:
    """ABS from the scores under ``loss``, by (checkpoint, language, axis) with "all" levels."""
    d = (_loss(sc, "anti", loss) - _loss(sc, "stereo", loss)).clip(lower=0)
    df = sc.assign(dc=d).dropna(subset=["dc"])
    axis = df.groupby(["checkpoint", "language", "axis"])["dc"].mean()
    lang = axis.groupby(level=["checkpoint", "language"]).mean()
    out = {**axis.to_dict(), **{(c, la, "all"): v for (c, la), v in lang.items()}}
    for (la, ax), v in axis.groupby(level=["language", "axis"]).mean().items():
        out[("all", la, ax)] = v
    for la, v in lang.groupby(level="language").mean().items():
        out[("all", la, "all")] = v
    return pd.Series(out)


def _band(v: float) -> str:
    return [name for edge, name in INCLUDE_EDGES if v >= edge][-1]


def check_cloze(t: dict[str, pd.DataFrame], pr: Problems) -> None:
    sc = t["cloze_scores.csv"]
    loss = str(sc["loss"].iloc[0])
    big = _scale(sc["nll_stereo_sum"], sc["nll_anti_sum"])
    pr.close("cloze_scores.delta = nll_anti - nll_stereo", sc["delta"], sc["nll_anti"] - sc["nll_stereo"], big)
    pr.close("cloze_scores.delta_clipped", sc["delta_clipped"], sc["delta"].clip(lower=0), big)
    for k in ("stereo", "anti", "meaningless"):
        pr.close(f"cloze_scores.nll_{k} (loss {loss})", sc[f"nll_{k}"], _loss(sc, k, loss), big)
        pr.close(f"cloze_scores.nll_{k}_token_mean", sc[f"nll_{k}_token_mean"], _loss(sc, k, "token_mean"), big)
        pr.close(f"cloze_scores.nll_{k}_byte_mean", sc[f"nll_{k}_byte_mean"], _loss(sc, k, "byte_mean"), big)
    words = sc["n_words_stereo"] + sc["n_words_anti"]
    pr.close(
        "cloze_scores.fertility_completion",
        sc["fertility_completion"],
        (sc["n_tokens_stereo"] + sc["n_tokens_anti"]) / words,
    )

    absf = t["cloze_abs.csv"]
    levels = {x: _abs_levels(sc, x) for x in ("sum", "token_mean", "byte_mean")}
    key = list(zip(absf["checkpoint"].astype(str), absf["language"], absf["axis"]))
    pr.close("cloze_abs.abs", absf["abs"], levels[loss].reindex(key), big)
    pr.close("cloze_abs.abs_token_mean", absf["abs_token_mean"], levels["token_mean"].reindex(key), big)
    pr.close("cloze_abs.odds", np.log(absf["odds"]), absf["abs"], big)  # e^abs, compared in log space
    pr.same("cloze_abs.band_token_mean", absf["band_token_mean"], [_band(v) for v in absf["abs_token_mean"]])
    if loss != "token_mean":
        pr.same("cloze_abs.band (none off the paper's scale)", absf["band"].isna(), [True] * len(absf))
    n = sc.dropna(subset=["delta"]).groupby(["checkpoint", "language", "axis"]).size()
    per_axis = absf[(absf["checkpoint"] != "all") & (absf["axis"] != "all")]
    pr.close(
        "cloze_abs.n",
        per_axis["n"],
        n.reindex(list(zip(per_axis["checkpoint"], per_axis["language"], per_axis["axis"]))),
    )

    by_loss = t["cloze_abs_by_loss.csv"]
    lk = list(zip(by_loss["checkpoint"].astype(str), by_loss["language"], ["all"] * len(by_loss)))
    for x, lev in levels.items():
        pr.close(f"cloze_abs_by_loss.abs_{x}", by_loss[f"abs_{x}"], lev.reindex(lk), big)
    pr.close("cloze_abs_by_loss.odds_sum", np.log(by_loss["odds_sum"]), by_loss["abs_sum"], big)

    san = t["cloze_sanity.csv"].set_index(["checkpoint", "language"])
    m, s, a = (_loss(sc, k, loss) for k in ("meaningless", "stereo", "anti"))
    ok = m.notna() & s.notna() & a.notna()
    low = ((m < s) & (m < a)).astype(float)[ok]
    g = low.groupby([sc.loc[ok, "checkpoint"], sc.loc[ok, "language"]])
    pr.close("cloze_sanity.share", san["share_meaningless_lowest"], g.mean().reindex(san.index))
    pr.close("cloze_sanity.n", san["n"], g.size().reindex(san.index))

    _check_cloze_stats(t, sc, pr)
    _check_loss_check(t, by_loss, pr)
    med = t["mediation.csv"].dropna(subset=["total"])
    mb = _scale(med["total"], med["indirect"])
    pr.close("mediation: total = direct + indirect", med["total"], med["direct"] + med["indirect"], mb)
    pr.close("mediation: indirect = a * b", med["indirect"], med["a"] * med["b"], mb)
    fert_col = {"context_fertility": "fertility", "completion_fertility": "fertility_completion"}
    for r in med[med["checkpoint"] != "pooled"].itertuples(index=False):
        d = sc[sc["checkpoint"].astype(str) == r.checkpoint]
        d = d.assign(_d=_loss(d, "anti", r.loss) - _loss(d, "stereo", r.loss)).dropna(
            subset=["_d", fert_col[r.mediator]]
        )
        ref, lang = d[d["language"] == "en"], d[d["language"] == r.language]
        where = f"mediation {r.checkpoint}/{r.language}/{r.loss}/{r.mediator}"
        pr.close(f"{where}: total = mean difference", r.total, lang["_d"].mean() - ref["_d"].mean(), big)
        f = fert_col[r.mediator]
        pr.close(f"{where}: a = fertility difference", r.a, lang[f].mean() - ref[f].mean())


def _check_cloze_stats(t: dict[str, pd.DataFrame], sc: pd.DataFrame, pr: Problems) -> None:
    st = t["cloze_stats.csv"]
    for (ck, measure), g in st.groupby(["checkpoint", "measure"]):
        d = sc if ck == "pooled" else sc[sc["checkpoint"].astype(str) == ck]
        subj = ["checkpoint", "prompt_id"] if ck == "pooled" else ["prompt_id"]
        wide = d.pivot_table(index=subj, columns="language", values=measure, aggfunc="first").dropna()
        fr = g[g["test"] == "friedman"].iloc[0]
        if np.isfinite(fr["statistic"]):
            chi2, p = sps.friedmanchisquare(*wide.to_numpy().T)
            n, k = wide.shape
            pr.close(
                f"cloze_stats friedman {ck}/{measure}",
                fr[["statistic", "p_value", "effect", "n", "k"]],
                [chi2, p, chi2 / (n * (k - 1)), n, k],
            )
        wx = g[g["test"] == "wilcoxon"]
        want_p = []
        for r in wx.itertuples(index=False):
            xa, xb = wide[r.a].to_numpy(dtype=np.float64), wide[r.b].to_numpy(dtype=np.float64)
            diff = xa - xb
            want_p.append(1.0 if not np.any(diff) else _wilcoxon_p(xa.tobytes(), xb.tobytes()))  # all-zero: p = 1
            pr.close(f"cloze_stats wilcoxon {ck}/{measure} {r.a}-{r.b} estimate", r.estimate, np.median(diff))
        pr.close(f"cloze_stats wilcoxon {ck}/{measure} p", wx["p_value"], want_p)
        pr.close(
            f"cloze_stats wilcoxon {ck}/{measure} p_holm (whole family)",
            wx["p_holm"],
            multipletests(want_p, method="holm")[1],
        )
        pairs = set(zip(wx["a"], wx["b"]))
        pr.same(
            f"cloze_stats wilcoxon {ck}/{measure} family",
            [len(pairs)],
            [len(list(itertools.combinations(wide.columns, 2)))],
        )


@functools.cache
def _wilcoxon_p(a: bytes, b: bytes) -> float:
    """scipy's Wilcoxon p of two float64 samples, once per pair of samples: the negative control
    checks the same unperturbed pairs once for every perturbed table (each ~30 ms, an exact
    permutation null at these sizes)."""
    return float(sps.wilcoxon(np.frombuffer(a), np.frombuffer(b)).pvalue)


def _text(col: pd.Series) -> list[str]:
    return ["" if pd.isna(v) else str(v) for v in col]


def _check_loss_check(t: dict[str, pd.DataFrame], by_loss: pd.DataFrame, pr: Problems) -> None:
    chk = t["cloze_loss_check.csv"]
    st = t["cloze_stats.csv"]
    ref = by_loss.assign(checkpoint=by_loss["checkpoint"].astype(str).replace({"all": "pooled"}))
    ref = ref.set_index(["checkpoint", "language"])
    rows = list(zip(chk["checkpoint"].astype(str), chk["language"]))
    losses = ("sum", "token_mean", "byte_mean")
    for x in losses:
        pr.close(f"cloze_loss_check.abs_{x}", chk[f"abs_{x}"], ref[f"abs_{x}"].reindex(rows))
        ranks = ref[f"abs_{x}"].groupby(level="checkpoint").rank(ascending=False, method="min")
        pr.close(f"cloze_loss_check.rank_{x}", chk[f"rank_{x}"], ranks.reindex(rows))
    loss = str(chk["loss"].iloc[0])
    wx = st[(st["test"] == "wilcoxon") & (st["measure"] == "delta") & (st["a"] == chk["reference"].iloc[0])]
    sig = {(str(r.checkpoint), r.b): bool(r.p_holm < 0.05) for r in wx.itertuples(index=False)}
    pr.same(
        f"cloze_loss_check.effect_{loss} vs cloze_stats", chk[f"effect_{loss}"].astype(bool), [sig[k] for k in rows]
    )
    med = t["mediation.csv"].dropna(subset=["indirect_lo"])
    excl = (med["indirect_lo"] > 0) | (med["indirect_hi"] < 0)
    any_excl = excl.groupby([med["loss"], med["checkpoint"].astype(str), med["language"]]).any()
    for x in losses:
        want = [bool(any_excl.get((x, c, la), False)) for c, la in rows]
        pr.same(f"cloze_loss_check.mediation_{x} vs mediation.csv", chk[f"mediation_{x}"].astype(bool), want)
    for what in ("effect", "mediation"):
        want = [
            ", ".join(x for x in losses[1:] if r[f"{what}_{x}"] and not r[f"{what}_sum"]) for _, r in chk.iterrows()
        ]
        pr.same(f"cloze_loss_check.{what}_not_under_sum", _text(chk[f"{what}_not_under_sum"]), want)
    want = [", ".join(x for x in losses[1:] if r[f"rank_{x}"] != r["rank_sum"]) for _, r in chk.iterrows()]
    pr.same("cloze_loss_check.ranking_not_under_sum", _text(chk["ranking_not_under_sum"]), want)


def check_all(t: dict[str, pd.DataFrame]) -> list[str]:
    pr = Problems()
    check_pressure(t, pr)
    check_classify(t, pr)
    check_cloze(t, pr)
    return list(pr)


def test_every_results_table_adds_up(sweep_out):
    t = _read(sweep_out)
    assert {"pressure_summary.csv", "classify_summary.csv", "cloze_scores.csv", "cloze_loss_check.csv"} <= set(t)
    assert (t["cloze_scores.csv"]["loss"] == "sum").all()  # the default
    assert check_all(t) == []


PERTURBED = [
    ("pressure_trials.csv", "logodds"),
    ("pressure_summary.csv", "s_op"),
    ("pressure_capitulation.csv", "value"),
    ("pressure_flip_direction.csv", "net_correction"),
    ("item_maps.csv", "map_value"),
    ("pressure_profile.csv", "value"),
    ("classify_summary.csv", "accuracy"),
    ("classify_summary_by_language.csv", "macro_f1"),
    ("classify_confusion.csv", "row_share"),
    ("classify_position_bias.csv", "share_changed"),
    ("cloze_scores.csv", "delta"),
    ("cloze_scores.csv", "nll_stereo"),
    ("cloze_abs.csv", "abs"),
    ("cloze_abs_by_loss.csv", "abs_byte_mean"),
    ("cloze_sanity.csv", "share_meaningless_lowest"),
    ("cloze_stats.csv", "p_holm"),
    ("cloze_loss_check.csv", "abs_token_mean"),
    ("mediation.csv", "indirect"),
]


def test_checker_flags_one_perturbed_cell(sweep_out):
    # negative control: one cell of each kind of table moved by 1e-3 (relative, at least
    # absolute), the checker of that study must name the table
    tables = _read(sweep_out)
    for table, column in PERTURBED:
        t = {k: v.copy() for k, v in tables.items()}
        df = t[table]
        rows = np.flatnonzero(df[column].notna().to_numpy())
        assert len(rows), (table, column)
        i = rows[len(rows) // 2]
        df[column] = df[column].astype(float)
        df.loc[df.index[i], column] = df[column].iloc[i] + 1e-3 * max(1.0, abs(df[column].iloc[i]))
        pr = Problems()
        if table.startswith(("pressure", "item_maps")):
            check_pressure(t, pr)
        else:
            (check_classify if table.startswith("classify") else check_cloze)(t, pr)
        assert pr and any(table.split(".")[0] in p for p in pr), (table, column, list(pr))
