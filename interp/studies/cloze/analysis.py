"""Cloze study results from cached units: scores, ABS, sanity, statistics, fertility,
mediation and figures (seeds/include_*).

Everything is computed per bank (a sweep may score several); each table carries a ``bank``
column after its declared columns. Files in OUT/results:

- cloze_scores.csv: checkpoint, prompt_id, language, axis, group, nll_stereo, nll_anti,
  nll_meaningless, delta, delta_clipped, then nll_*_sum, n_tokens_*, n_bytes_*, n_words_*,
  scored_span, per-item fertility, loss, nll_*_token_mean, nll_*_byte_mean. nll_* hold the
  loss of the row (column ``loss``), so delta == nll_anti - nll_stereo in every row;
  nll_*_sum is the summed NLL of the scored span, the other readings have their own columns.
- cloze_abs.csv: checkpoint, language, axis, abs, band, loss, odds, abs_token_mean,
  band_token_mean, n (analyses.cloze_metrics.abs_table: per axis, per language (axis "all"),
  and over checkpoints (checkpoint "all")). band only under token_mean (the paper's scale);
  odds = e^abs under sum; abs_token_mean / band_token_mean: the INCLUDE reading beside it.
- cloze_sanity.csv: share of items whose meaningless completion beats both real ones.
- cloze_stats.csv: one long table, column ``test`` in friedman (statistic = chi2, effect =
  Kendall's W), wilcoxon (pairs a, b; p_holm; effect = matched-pairs rank-biserial, positive
  when a > b; estimate = median of a - b), mixed_model (one row per fixed-effect term of
  measure ~ language [+ checkpoint] with a random intercept per prompt_id); per checkpoint
  and ``pooled`` (subjects = (checkpoint, prompt_id); checkpoint as fixed effect), for
  ``measure`` delta and delta_clipped.
- fertility.csv: per checkpoint tokenizer and language over the bank's parallel translations.
- mediation.csv: fertility mediation of each language's contrast with the reference language
  (analyses.mediation.mediation_by_language; outcome unclipped delta, mediator per-item
  fertility, prompt-clustered percentile bootstrap, cfg.n_boot resamples, seed cfg.seed).

Figures in OUT/figures: cloze_abs_<checkpoint>.png (language x axis heatmap, one per
checkpoint, plus "all" over checkpoints), fertility_bars.png, mediation_forest.png.

- cloze_abs_by_loss.csv: language-level ABS under each loss (sum, token_mean, byte_mean) side
  by side, the paper's band under token_mean only, odds_sum (analyses.cloze_loss.abs_by_loss).
- cloze_loss_check.csv: per (checkpoint or pooled, language): ABS, Wilcoxon-Holm effect vs the
  reference, rank by ABS and mediation (indirect CI excludes 0) under each loss, and the flags
  effect_not_under_sum / ranking_not_under_sum / mediation_not_under_sum (and the older
  effect_token_mean_only / mediation_token_mean_only) (analyses.cloze_loss.loss_check).

The loss (``loss`` column of cloze_scores, cloze_abs, cloze_stats, mediation) is the template's
(``sum`` in cloze_v1), or the option ``cloze_loss``; delta, ABS, sanity,
statistics and the mediation rows of that loss all use it. mediation.csv holds every loss x
mediator (context_fertility: the context's tokens per word; completion_fertility: the scored
completions'); fertility and mediation are this toolkit's additions, not INCLUDE's, and prompt
content can confound fertility and delta.

Analysis options (ClozeOptions, flags --reference-language, --mediation-outcome, --cloze-loss):
``reference_language`` ("en"), ``mediation_outcome`` ("delta" or "delta_clipped"),
``cloze_loss`` (sum, token_mean, byte_mean; default the template's, sum).
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.cloze_figures import plot_abs_heatmap, plot_fertility_bars, plot_mediation_forest
from analyses.cloze_metrics import SANITY_COLUMNS, abs_table, meaningless_sanity
from analyses.fertility import FERTILITY_COLUMNS, language_order
from analyses.figures import safe_name
from analyses.io import write_table
from analyses.mediation import BY_LANGUAGE_COLUMNS
from cache.store import Unit
from interp.core.errors import ConfigError
from interp.studies.cloze.options import ClozeOptions

log = logging.getLogger("interp.sweep")

SCORES_COLUMNS = (
    "checkpoint",
    "prompt_id",
    "language",
    "axis",
    "group",
    "nll_stereo",
    "nll_anti",
    "nll_meaningless",
    "delta",
    "delta_clipped",
)
CLOZE_ABS_FILE_COLUMNS = (  # declared first in cloze_abs.csv
    "checkpoint",
    "language",
    "axis",
    "abs",
    "band",
    "loss",
    "odds",
    "abs_token_mean",
    "band_token_mean",
)
STATS_COLUMNS = (
    "checkpoint",
    "measure",
    "test",
    "a",
    "b",
    "term",
    "statistic",
    "p_value",
    "p_holm",
    "effect",
    "effect_name",
    "estimate",
    "std_err",
    "ci_low",
    "ci_high",
    "n",
    "k",
    "note",
)
FERTILITY_TABLE_COLUMNS = (
    "tokenizer",
    "language",
    "fertility",
    "fertility_in_context",
    "continued_share",
    "parity",
    "n_sentences",
    "n_words",
)
# mediation_by_language's columns (its diagnostic "n" aside), then the loss and mediator of each row
MEDIATION_COLUMNS = (*(c for c in BY_LANGUAGE_COLUMNS if c != "n"), "loss", "mediator")


_safe = safe_name


def _single(df: pd.DataFrame, col: str, default: str) -> str:
    vals = df[col].dropna().unique() if col in df else []
    if len(vals) > 1:
        raise ConfigError(
            f"cloze units of one bank disagree on {col} ({', '.join(map(str, vals))}); analyze them separately"
        )
    return str(vals[0]) if len(vals) else default


# ---------------------------------------------------------------- statistics


def _term(term: str) -> str:
    term = re.sub(r"C\(language, Treatment\('([^']*)'\)\)\[T\.(.+)\]", r"language[\2 vs \1]", term)
    return re.sub(r"C\(checkpoint\)\[T\.(.+)\]", r"checkpoint[\1]", term)


def cloze_stats(
    scores: pd.DataFrame, *, reference: str = "en", measures: tuple[str, ...] = ("delta", "delta_clipped")
) -> pd.DataFrame:
    """Friedman + Kendall's W, pairwise Wilcoxon (Holm, rank-biserial) and a mixed model,
    per checkpoint and pooled over checkpoints, as one long table (columns STATS_COLUMNS).
    A test that cannot run on the data (too few languages or prompts) gives one row with
    the reason in ``note``."""
    from analyses.stats import friedman, friedman_row, mixed_model, pairwise_wilcoxon, wilcoxon_rows

    ckpts = sorted(scores["checkpoint"].astype(str).unique())
    groups: list[tuple[str, pd.DataFrame, object]] = [
        (ck, scores[scores["checkpoint"].astype(str) == ck], "prompt_id") for ck in ckpts
    ]
    if len(ckpts) > 1:
        groups.append(("pooled", scores, ["checkpoint", "prompt_id"]))
    rows: list[dict] = []
    for ck, df, subject in groups:
        langs = language_order(df["language"].unique())
        ref = reference if reference in langs else langs[0]
        order = [ref] + [lang for lang in langs if lang != ref]
        for measure in measures:
            base = {"checkpoint": ck, "measure": measure}
            data = df.dropna(subset=[measure])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fr = friedman(data, subject=subject, condition="language", value=measure)
                    rows.append({**base, **friedman_row(fr)})
                except (ValueError, KeyError) as exc:
                    rows.append({**base, "test": "friedman", "note": str(exc)})
                if len(langs) >= 2:
                    try:
                        pw = pairwise_wilcoxon(data, subject=subject, condition="language", value=measure, order=order)
                    except (ValueError, KeyError) as exc:
                        rows.append({**base, "test": "wilcoxon", "note": str(exc)})
                    else:
                        rows.extend({**base, **row} for row in wilcoxon_rows(pw, with_estimate=True))
                else:
                    rows.append({**base, "test": "wilcoxon", "note": "needs at least 2 languages"})
                rows.extend(_mixed_rows(data, base, measure, ref, pooled=ck == "pooled", mixed_model=mixed_model))
    out = pd.DataFrame(rows)
    for c in STATS_COLUMNS:
        if c not in out:
            out[c] = np.nan if c not in ("a", "b", "term", "note", "effect_name") else ""
    for c in ("a", "b", "term", "note", "effect_name"):
        out[c] = out[c].fillna("")
    return out[list(STATS_COLUMNS)]


def _mixed_rows(data: pd.DataFrame, base: dict, measure: str, ref: str, *, pooled: bool, mixed_model) -> list[dict]:
    if data["language"].nunique() < 2:
        return [{**base, "test": "mixed_model", "note": "needs at least 2 languages"}]
    if data["prompt_id"].nunique() < 2:
        return [{**base, "test": "mixed_model", "note": "needs at least 2 prompts"}]
    if data[measure].std() == 0 or not np.isfinite(data[measure].std()):
        return [{**base, "test": "mixed_model", "note": f"{measure} is constant"}]
    formula = f"{measure} ~ C(language, Treatment({ref!r}))"
    if pooled and data["checkpoint"].nunique() > 1:
        formula += " + C(checkpoint)"
    try:
        mm = mixed_model(data, formula=formula, groups="prompt_id")
    except (ValueError, np.linalg.LinAlgError) as exc:
        return [{**base, "test": "mixed_model", "note": f"fit failed: {exc}"}]
    note = "; ".join(mm.fit_warnings)
    if not mm.converged:
        note = ("not converged; " + note).strip("; ")
    return [
        {
            **base,
            "test": "mixed_model",
            "term": _term(term),
            "statistic": r.z,
            "p_value": r.p_value,
            "estimate": r.estimate,
            "std_err": r.std_err,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "n": mm.n_obs,
            "k": mm.n_groups,
            "note": note,
        }
        for term, r in mm.coefficients.iterrows()
    ]


# ---------------------------------------------------------------- fertility and mediation


def checkpoint_fertility(units: list[Unit], *, reference: str = "en") -> pd.DataFrame:
    """Fertility of each checkpoint's tokenizer over the bank's translations, as computed in
    the unit run (table ``fertility``, one block per possible reference language): no
    tokenizer is loaded here."""
    frames, seen = [], set()
    for u in units:
        name = str(u.attrs.get("checkpoint"))
        if name in seen:
            continue
        seen.add(name)
        fert = u.tables.get("fertility")
        if fert is None:
            log.warning("fertility: unit %s was written without a fertility table (older version); skipped", u.path)
            continue
        refs = set(fert["reference"].astype(str))
        chosen = reference if reference in refs else ""
        rows = fert[fert["reference"].astype(str) == chosen].drop(
            columns=["reference", "checkpoint", "bank"], errors="ignore"
        )
        rows = rows.assign(tokenizer=name)[list(FERTILITY_TABLE_COLUMNS)]
        frames.append(rows.reset_index(drop=True))
    cols = list(FERTILITY_COLUMNS) + ["fertility_in_context", "n_sentences", "n_words"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def _abs_with_token_mean(scores: pd.DataFrame, loss: str) -> pd.DataFrame:
    """ABS under ``loss`` with the INCLUDE reading beside it: abs_token_mean and the paper's
    band on its own scale, band_token_mean."""
    keys = ["checkpoint", "language", "axis"]
    t = abs_table(scores, loss=loss).assign(loss=loss)
    tm = abs_table(scores, loss="token_mean")[[*keys, "abs", "band"]]
    tm = tm.rename(columns={"abs": "abs_token_mean", "band": "band_token_mean"})
    return t.merge(tm, on=keys, how="left")


# ---------------------------------------------------------------- entry point


def analyze_cloze(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    """Write the cloze results tables and figures from the sweep's units; return the tables."""
    results_dir = Path(results_dir)
    figures = results_dir.parent / "figures"
    from analyses.bootstrap import TableError
    from analyses.cloze_loss import abs_by_loss, loss_check, mediation_under_losses
    from analyses.cloze_metrics import DEFAULT_LOSS, LOSSES, add_delta, canonical_loss
    from interp.studies.cloze.unit_loss import unit_scores

    opts: ClozeOptions = cfg.studies.get("cloze") or ClozeOptions()
    reference, outcome = opts.reference_language, opts.mediation_outcome
    scores = pd.concat([unit_scores(u) for u in units], ignore_index=True)
    banks = sorted(scores["bank"].astype(str).unique())
    keys = ("abs", "sanity", "stats", "fertility", "mediation", "abs_by_loss", "loss_check", "scores")
    out: dict[str, list[pd.DataFrame]] = {k: [] for k in keys}
    for bank in banks:
        sc = scores[scores["bank"].astype(str) == bank]
        try:
            loss = canonical_loss(str(opts.cloze_loss or _single(sc, "loss", DEFAULT_LOSS)))
            sc = add_delta(sc, loss=loss)
            has_bytes = {f"n_bytes_{k}" for k in ("stereo", "anti")} <= set(sc.columns)
            losses = LOSSES if has_bytes else tuple(dict.fromkeys((loss, "sum", "token_mean")))
            med = mediation_under_losses(
                sc, losses=losses, reference=reference, outcome=outcome, n_boot=int(cfg.n_boot), seed=int(cfg.seed)
            )
            check = loss_check(sc, loss=loss, reference=reference, mediation=med, losses=losses)
        except TableError as exc:
            raise ConfigError(
                f"cloze bank {bank}: {exc} (units cached before byte counts were stored: "
                "rescore, or set option cloze_loss to token_mean or sum)"
            ) from None
        bank_units = [u for u in units if str(u.attrs.get("bank")) == bank]
        parts = {
            "scores": sc,
            "abs": _abs_with_token_mean(sc, loss),
            "sanity": meaningless_sanity(sc, loss=loss).assign(loss=loss),
            "stats": cloze_stats(sc, reference=reference).assign(loss=loss),
            "fertility": checkpoint_fertility(bank_units, reference=reference),
            "mediation": med,
            "abs_by_loss": abs_by_loss(sc, losses=losses),
            "loss_check": check if check is not None else pd.DataFrame(),
        }
        for k, df in parts.items():
            out[k].append(df.assign(bank=bank) if k != "scores" else df)
    scores = pd.concat(out["scores"], ignore_index=True)
    tables = {
        "cloze_scores": scores,
        "cloze_abs_by_loss": pd.concat(out["abs_by_loss"], ignore_index=True),
        "cloze_loss_check": pd.concat(out["loss_check"], ignore_index=True),
        "cloze_abs": pd.concat(out["abs"], ignore_index=True),
        "cloze_sanity": pd.concat(out["sanity"], ignore_index=True),
        "cloze_stats": pd.concat(out["stats"], ignore_index=True),
        "fertility": pd.concat(out["fertility"], ignore_index=True),
        "mediation": pd.concat(out["mediation"], ignore_index=True),
    }
    write_table(
        tables["cloze_scores"],
        results_dir / "cloze_scores.csv",
        columns=SCORES_COLUMNS,
        sort=["bank", "checkpoint", "prompt_id", "language"],
    )
    write_table(
        tables["cloze_abs"],
        results_dir / "cloze_abs.csv",
        columns=CLOZE_ABS_FILE_COLUMNS,
        sort=["bank", "checkpoint", "language", "axis"],
    )
    write_table(
        tables["cloze_sanity"],
        results_dir / "cloze_sanity.csv",
        columns=SANITY_COLUMNS,
        sort=["bank", "checkpoint", "language"],
    )
    write_table(tables["cloze_stats"], results_dir / "cloze_stats.csv", columns=STATS_COLUMNS)
    write_table(tables["fertility"], results_dir / "fertility.csv", columns=FERTILITY_COLUMNS)
    write_table(tables["mediation"], results_dir / "mediation.csv", columns=MEDIATION_COLUMNS)
    write_table(tables["cloze_abs_by_loss"], results_dir / "cloze_abs_by_loss.csv")
    if not tables["cloze_loss_check"].empty:
        write_table(tables["cloze_loss_check"], results_dir / "cloze_loss_check.csv")
    _figures(tables, figures, several_banks=len(banks) > 1)
    return tables


def _figures(tables: dict[str, pd.DataFrame], figures: Path, *, several_banks: bool) -> None:
    abs_df = tables["cloze_abs"]
    for bank, df in abs_df.groupby("bank", sort=True):
        for ck in dict.fromkeys(df["checkpoint"].astype(str)):
            if ck == "all" and df["checkpoint"].astype(str).nunique() <= 2:
                continue  # one checkpoint: "all" repeats it
            stem = f"cloze_abs_{_safe(bank)}_{_safe(ck)}" if several_banks else f"cloze_abs_{_safe(ck)}"
            plot_abs_heatmap(df, ck, figures / f"{stem}.png")
    chosen = set(tables["cloze_abs"]["loss"]) if "loss" in tables["cloze_abs"] else set()
    for name, plot in (("fertility_bars", plot_fertility_bars), ("mediation_forest", plot_mediation_forest)):
        df = tables["fertility" if name == "fertility_bars" else "mediation"]
        if name == "mediation_forest" and "loss" in df and chosen:
            df = df[df["loss"].isin(chosen)]  # the chosen loss; cloze_loss_check.csv compares losses
        for bank, sub in df.groupby("bank", sort=True) if not df.empty else []:
            plot(sub, figures / (f"{name}_{_safe(bank)}.png" if several_banks else f"{name}.png"))
