"""Cloze study results from cached units: scores, ABS, sanity, statistics, fertility,
mediation and figures (seeds/include_*).

Everything is computed per bank (a sweep may score several); each table carries a ``bank``
column after its declared columns. Files in OUT/results:

- cloze_scores.csv: checkpoint, prompt_id, language, axis, group, nll_stereo, nll_anti,
  nll_meaningless, delta, delta_clipped, then nll_*_sum, n_tokens_*, scored_span, per-item
  fertility, loss. nll_* is the mean per-token NLL and nll_*_sum the summed NLL of the scored
  span; delta uses the template's loss (column ``loss``): nll_anti - nll_stereo by default.
- cloze_abs.csv: checkpoint, language, axis, abs, band, n (analyses.cloze_metrics.abs_table:
  per axis, per language (axis "all"), and over checkpoints (checkpoint "all")).
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

- cloze_abs_by_loss.csv: language-level ABS and band under each loss (sum, token_mean,
  byte_mean) side by side (analyses.cloze_loss.abs_by_loss).
- cloze_loss_check.csv: per (checkpoint or pooled, language): ABS, Wilcoxon-Holm effect vs the
  reference and mediation (indirect CI excludes 0) under each loss, and the flags
  effect_token_mean_only / mediation_token_mean_only (analyses.cloze_loss.loss_check).

The loss (``loss`` column of cloze_scores, cloze_abs, cloze_stats, mediation) is the template's
(``byte_mean`` in cloze_v1), or the analysis option ``cloze_loss``; delta, ABS, bands, sanity,
statistics and the mediation rows of that loss all use it. mediation.csv holds every loss x
mediator (context_fertility: the context's tokens per word; completion_fertility: the scored
completions'); fertility and mediation are this toolkit's additions, not INCLUDE's, and prompt
content can confound fertility and delta.

Analysis options (RunConfig.options): ``reference_language`` ("en"), ``mediation_outcome``
("delta" or "delta_clipped"), ``cloze_loss`` (sum, token_mean, byte_mean; default the template's).
"""
from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.cloze_metrics import SANITY_COLUMNS, abs_table, meaningless_sanity
from analyses.io import write_table
from analyses.fertility_run import FERTILITY_COLUMNS, bank_parallel_texts, language_order, tokenizer_fertility
from cache.store import Unit
from interp.errors import ConfigError

log = logging.getLogger("interp.sweep")

SCORES_COLUMNS = ("checkpoint", "prompt_id", "language", "axis", "group", "nll_stereo", "nll_anti",
                  "nll_meaningless", "delta", "delta_clipped")
ABS_COLUMNS = ("checkpoint", "language", "axis", "abs", "band", "loss")
STATS_COLUMNS = ("checkpoint", "measure", "test", "a", "b", "term", "statistic", "p_value", "p_holm",
                 "effect", "effect_name", "estimate", "std_err", "ci_low", "ci_high", "n", "k", "note")
MEDIATION_COLUMNS = ("checkpoint", "language", "total", "direct", "indirect", "total_lo", "total_hi",
                     "direct_lo", "direct_hi", "indirect_lo", "indirect_hi", "loss", "mediator")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "x"


def _single(df: pd.DataFrame, col: str, default: str) -> str:
    vals = df[col].dropna().unique() if col in df else []
    if len(vals) > 1:
        raise ConfigError(f"cloze units of one bank disagree on {col} ({', '.join(map(str, vals))}); "
                          "analyze them separately")
    return str(vals[0]) if len(vals) else default


# ---------------------------------------------------------------- statistics

def _term(term: str) -> str:
    term = re.sub(r"C\(language, Treatment\('([^']*)'\)\)\[T\.(.+)\]", r"language[\2 vs \1]", term)
    return re.sub(r"C\(checkpoint\)\[T\.(.+)\]", r"checkpoint[\1]", term)


def cloze_stats(scores: pd.DataFrame, *, reference: str = "en",
                measures: tuple[str, ...] = ("delta", "delta_clipped")) -> pd.DataFrame:
    """Friedman + Kendall's W, pairwise Wilcoxon (Holm, rank-biserial) and a mixed model,
    per checkpoint and pooled over checkpoints, as one long table (columns STATS_COLUMNS).
    A test that cannot run on the data (too few languages or prompts) gives one row with
    the reason in ``note``."""
    from analyses.stats import friedman, mixed_model, pairwise_wilcoxon

    ckpts = sorted(scores["checkpoint"].astype(str).unique())
    groups: list[tuple[str, pd.DataFrame, object]] = [
        (ck, scores[scores["checkpoint"].astype(str) == ck], "prompt_id") for ck in ckpts]
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
                    rows.append({**base, "test": "friedman", "statistic": fr.statistic, "p_value": fr.p_value,
                                 "effect": fr.kendall_w, "effect_name": "kendall_w", "n": fr.n_subjects,
                                 "k": fr.k_conditions,
                                 "note": f"{fr.n_dropped} incomplete subjects dropped" if fr.n_dropped else ""})
                except (ValueError, KeyError) as exc:
                    rows.append({**base, "test": "friedman", "note": str(exc)})
                if len(langs) >= 2:
                    try:
                        pw = pairwise_wilcoxon(data, subject=subject, condition="language", value=measure,
                                               order=order)
                    except (ValueError, KeyError) as exc:
                        rows.append({**base, "test": "wilcoxon", "note": str(exc)})
                    else:
                        for r in pw.itertuples(index=False):
                            rows.append({**base, "test": "wilcoxon", "a": r.a, "b": r.b, "statistic": r.statistic,
                                         "p_value": r.p_value, "p_holm": r.p_holm, "effect": r.rank_biserial,
                                         "effect_name": "rank_biserial", "estimate": r.median_diff, "n": r.n,
                                         "k": 2, "note": "" if r.n_nonzero else "all differences zero"})
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
    return [{**base, "test": "mixed_model", "term": _term(term), "statistic": r.z, "p_value": r.p_value,
             "estimate": r.estimate, "std_err": r.std_err, "ci_low": r.ci_low, "ci_high": r.ci_high,
             "n": mm.n_obs, "k": mm.n_groups, "note": note}
            for term, r in mm.coefficients.iterrows()]


# ---------------------------------------------------------------- fertility and mediation

def checkpoint_fertility(units: list[Unit], texts: pd.DataFrame, *, reference: str = "en") -> pd.DataFrame:
    """Fertility of each checkpoint's tokenizer over the bank's translations (one bank's texts)."""
    from analyses.fertility_run import load_any_tokenizer

    lang_texts, parallel = bank_parallel_texts(texts)
    frames, seen = [], set()
    for u in units:
        name, path = str(u.attrs.get("checkpoint")), u.attrs.get("checkpoint_path")
        if name in seen:
            continue
        seen.add(name)
        if not path or not Path(str(path)).exists():
            log.warning("fertility: checkpoint %s is no longer at %s; skipped", name, path)
            continue
        tok = load_any_tokenizer(Path(str(path)))
        frames.append(tokenizer_fertility(tok, lang_texts, name=name, parallel=parallel, reference=reference))
    cols = list(FERTILITY_COLUMNS) + ["fertility_in_context", "n_sentences", "n_words"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def cloze_mediation(scores: pd.DataFrame, *, reference: str = "en", outcome: str = "delta",
                    n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    from analyses.mediation import mediation_by_language

    data = scores.dropna(subset=[outcome, "fertility"])
    med = mediation_by_language(data, reference=reference, outcome=outcome, mediator="fertility",
                                cluster="prompt_id", n_boot=n_boot, seed=seed)
    med["outcome"] = outcome
    med["n_boot"] = n_boot
    return med


# ---------------------------------------------------------------- figures

def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _figure(w: float, h: float):
    from matplotlib.figure import Figure  # no pyplot: no global backend or figure state

    return Figure(figsize=(w, h), layout="constrained")


def plot_abs_heatmap(abs_df: pd.DataFrame, checkpoint: str, path: Path) -> Path | None:
    """Language x axis heatmap of one checkpoint's per-axis ABS, values written in the cells."""
    df = abs_df[(abs_df["checkpoint"].astype(str) == str(checkpoint)) & (abs_df["axis"] != "all")]
    if df.empty:
        return None
    wide = df.pivot(index="language", columns="axis", values="abs")
    wide = wide.reindex(index=language_order(wide.index), columns=sorted(wide.columns))
    fig = _figure(1.2 + 1.1 * wide.shape[1], 1.0 + 0.45 * wide.shape[0])
    ax = fig.subplots()
    vals = wide.to_numpy(dtype=float)
    vmax = max(1.5, float(np.nanmax(vals)) if np.isfinite(vals).any() else 1.5)
    im = ax.imshow(vals, cmap="Reds", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(wide.shape[1]), labels=list(wide.columns), rotation=30, ha="right")
    ax.set_yticks(range(wide.shape[0]), labels=list(wide.index))
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            if np.isfinite(vals[i, j]):
                ax.text(j, i, f"{vals[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if vals[i, j] > 0.6 * vmax else "black")
    ax.set_title(f"ABS (mean clipped delta): {checkpoint}", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _save(fig, path)


def plot_fertility_bars(fert: pd.DataFrame, path: Path) -> Path | None:
    """Grouped bars per language, one bar per tokenizer: fertility and parity vs the reference."""
    if fert.empty:
        return None
    langs = language_order(fert["language"].unique())
    toks = list(dict.fromkeys(fert["tokenizer"].astype(str)))
    panels = [("fertility", "tokens per word (isolated)")]
    if fert["parity"].notna().any():
        panels.append(("parity", "parity vs reference"))
    fig = _figure(max(5.0, 0.5 * len(langs) * max(1, len(toks)) + 2), 2.6 * len(panels))
    axes = np.atleast_1d(fig.subplots(len(panels), 1, squeeze=False)[:, 0])
    width = 0.8 / max(1, len(toks))
    for ax, (col, label) in zip(axes, panels):
        for t, tok in enumerate(toks):
            sub = fert[fert["tokenizer"].astype(str) == tok].set_index("language")[col].reindex(langs)
            ax.bar(np.arange(len(langs)) + (t - (len(toks) - 1) / 2) * width, sub.to_numpy(dtype=float),
                   width=width, label=tok)
        ax.set_xticks(range(len(langs)), labels=langs)
        ax.set_ylabel(label, fontsize=8)
        if col == "parity":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    axes[0].legend(fontsize=7, ncols=min(3, len(toks)))
    axes[0].set_title("Tokenizer fertility by language", fontsize=9)
    return _save(fig, path)


def plot_mediation_forest(med: pd.DataFrame, path: Path) -> Path | None:
    """Total, direct and indirect (via fertility) effect of each language vs the reference,
    with percentile-bootstrap CIs, one row per (checkpoint, language)."""
    rows = med.dropna(subset=["total"]).reset_index(drop=True) if not med.empty else med
    if rows.empty:
        return None
    fig = _figure(6.5, 1.0 + 0.32 * len(rows))
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    for k, (eff, marker, color) in enumerate((("total", "o", "black"), ("direct", "s", "tab:blue"),
                                                ("indirect", "D", "tab:red"))):
        pos = y + (1 - k) * 0.22
        est = rows[eff].to_numpy(dtype=float)
        lo, hi = rows[f"{eff}_lo"].to_numpy(dtype=float), rows[f"{eff}_hi"].to_numpy(dtype=float)
        err = np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)])
        ok = np.isfinite(est)
        ax.errorbar(est[ok], pos[ok], xerr=np.nan_to_num(err[:, ok]), fmt=marker, color=color, ms=4,
                    capsize=2, lw=1, label=eff)
    ax.axvline(0.0, color="grey", lw=0.8, ls="--")
    meds = rows["mediator"] if "mediator" in rows else [""] * len(rows)
    ax.set_yticks(y, labels=[f"{c} / {lang}" + (f" / {m}" if m else "")
                             for c, lang, m in zip(rows["checkpoint"], rows["language"], meds)], fontsize=7)
    ax.set_xlabel("effect on delta vs reference language", fontsize=8)
    ax.set_title("Fertility mediation of the language effect", fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, path)


# ---------------------------------------------------------------- entry point

def analyze_cloze(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    """Write the cloze results tables and figures from the sweep's units; return the tables."""
    results_dir = Path(results_dir)
    figures = results_dir.parent / "figures"
    opts = getattr(cfg, "options", {}) or {}
    reference = str(opts.get("reference_language", "en"))
    outcome = str(opts.get("mediation_outcome", "delta"))
    if outcome not in ("delta", "delta_clipped"):
        raise ConfigError(f"option mediation_outcome must be delta or delta_clipped, got {outcome!r}")
    from analyses.bootstrap import TableError
    from analyses.cloze_loss import abs_by_loss, loss_check, mediation_under_losses
    from analyses.cloze_metrics import LOSSES, add_delta, canonical_loss

    scores = pd.concat([u.tables["scores"] for u in units], ignore_index=True)
    texts = pd.concat([u.tables["texts"] for u in units], ignore_index=True)
    banks = sorted(scores["bank"].astype(str).unique())
    keys = ("abs", "sanity", "stats", "fertility", "mediation", "abs_by_loss", "loss_check", "scores")
    out: dict[str, list[pd.DataFrame]] = {k: [] for k in keys}
    for bank in banks:
        sc = scores[scores["bank"].astype(str) == bank]
        try:
            loss = canonical_loss(str(opts.get("cloze_loss") or _single(sc, "loss", "token_mean")))
            sc = add_delta(sc, loss=loss).assign(loss=loss)
            losses = LOSSES if {f"n_bytes_{k}" for k in ("stereo", "anti")} <= set(sc.columns) else (loss, "token_mean", "sum")
            med = mediation_under_losses(sc, losses=losses, reference=reference, outcome=outcome,
                                         n_boot=int(cfg.n_boot), seed=int(cfg.seed))
            check = loss_check(sc, loss=loss, reference=reference, mediation=med) if losses == LOSSES else None
        except TableError as exc:
            raise ConfigError(f"cloze bank {bank}: {exc} (units cached before byte counts were stored: "
                              "rescore, or set option cloze_loss to token_mean or sum)") from None
        bank_units = [u for u in units if str(u.attrs.get("bank")) == bank]
        parts = {
            "scores": sc,
            "abs": abs_table(sc, loss=loss).assign(loss=loss),
            "sanity": meaningless_sanity(sc, loss=loss).assign(loss=loss),
            "stats": cloze_stats(sc, reference=reference).assign(loss=loss),
            "fertility": checkpoint_fertility(bank_units, texts[texts["bank"].astype(str) == bank],
                                              reference=reference),
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
    write_table(tables["cloze_scores"], results_dir / "cloze_scores.csv", columns=SCORES_COLUMNS,
                sort=["bank", "checkpoint", "prompt_id", "language"])
    write_table(tables["cloze_abs"], results_dir / "cloze_abs.csv", columns=ABS_COLUMNS,
                sort=["bank", "checkpoint", "language", "axis"])
    write_table(tables["cloze_sanity"], results_dir / "cloze_sanity.csv", columns=SANITY_COLUMNS,
                sort=["bank", "checkpoint", "language"])
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
