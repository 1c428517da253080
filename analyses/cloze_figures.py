"""Cloze figures (moved from analyses/cloze_report.py): ABS heatmap, fertility bars,
mediation forest. Tables in, PNG files out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analyses.fertility import language_order
from analyses.figures import new_figure, redraw_on_change, save_figure


@redraw_on_change
def plot_abs_heatmap(abs_df: pd.DataFrame, checkpoint: str, path: Path) -> Path | None:
    """Language x axis heatmap of one checkpoint's per-axis ABS, values written in the cells."""
    df = abs_df[(abs_df["checkpoint"].astype(str) == str(checkpoint)) & (abs_df["axis"] != "all")]
    if df.empty:
        return None
    wide = df.pivot(index="language", columns="axis", values="abs")
    wide = wide.reindex(index=language_order(wide.index), columns=sorted(wide.columns))
    fig = new_figure(1.2 + 1.1 * wide.shape[1], 1.0 + 0.45 * wide.shape[0])
    ax = fig.subplots()
    vals = wide.to_numpy(dtype=float)
    vmax = max(1.5, float(np.nanmax(vals)) if np.isfinite(vals).any() else 1.5)
    im = ax.imshow(vals, cmap="Reds", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(wide.shape[1]), labels=list(wide.columns), rotation=30, ha="right")
    ax.set_yticks(range(wide.shape[0]), labels=list(wide.index))
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            if np.isfinite(vals[i, j]):
                ax.text(
                    j,
                    i,
                    f"{vals[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if vals[i, j] > 0.6 * vmax else "black",
                )
    loss = str(df["loss"].iloc[0]) if "loss" in df and df["loss"].nunique() == 1 else ""
    what = {
        "sum": "mean clipped log-odds, nats",
        "token_mean": "mean clipped delta, per-token loss",
        "byte_mean": "mean clipped delta, per-byte loss",
    }
    ax.set_title(f"ABS ({what.get(loss, 'mean clipped delta')}): {checkpoint}", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return save_figure(fig, path)


@redraw_on_change
def plot_fertility_bars(fert: pd.DataFrame, path: Path) -> Path | None:
    """Grouped bars per language, one bar per tokenizer: fertility and parity vs the reference."""
    if fert.empty:
        return None
    langs = language_order(fert["language"].unique())
    toks = list(dict.fromkeys(fert["tokenizer"].astype(str)))
    panels = [("fertility", "tokens per word (isolated)")]
    if fert["parity"].notna().any():
        panels.append(("parity", "parity vs reference"))
    fig = new_figure(max(5.0, 0.5 * len(langs) * max(1, len(toks)) + 2), 2.6 * len(panels))
    axes = np.atleast_1d(fig.subplots(len(panels), 1, squeeze=False)[:, 0])
    width = 0.8 / max(1, len(toks))
    for ax, (col, label) in zip(axes, panels):
        for t, tok in enumerate(toks):
            sub = fert[fert["tokenizer"].astype(str) == tok].set_index("language")[col].reindex(langs)
            ax.bar(
                np.arange(len(langs)) + (t - (len(toks) - 1) / 2) * width,
                sub.to_numpy(dtype=float),
                width=width,
                label=tok,
            )
        ax.set_xticks(range(len(langs)), labels=langs)
        ax.set_ylabel(label, fontsize=8)
        if col == "parity":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    axes[0].legend(fontsize=7, ncols=min(3, len(toks)))
    axes[0].set_title("Tokenizer fertility by language", fontsize=9)
    return save_figure(fig, path)


@redraw_on_change
def plot_mediation_forest(med: pd.DataFrame, path: Path) -> Path | None:
    """Total, direct and indirect (via fertility) effect of each language vs the reference,
    with percentile-bootstrap CIs, one row per (checkpoint, language)."""
    rows = med.dropna(subset=["total"]).reset_index(drop=True) if not med.empty else med
    if rows.empty:
        return None
    fig = new_figure(6.5, 1.0 + 0.32 * len(rows))
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    for k, (eff, marker, color) in enumerate(
        (("total", "o", "black"), ("direct", "s", "tab:blue"), ("indirect", "D", "tab:red"))
    ):
        pos = y + (1 - k) * 0.22
        est = rows[eff].to_numpy(dtype=float)
        lo, hi = rows[f"{eff}_lo"].to_numpy(dtype=float), rows[f"{eff}_hi"].to_numpy(dtype=float)
        err = np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)])
        ok = np.isfinite(est)
        ax.errorbar(
            est[ok], pos[ok], xerr=np.nan_to_num(err[:, ok]), fmt=marker, color=color, ms=4, capsize=2, lw=1, label=eff
        )
    ax.axvline(0.0, color="grey", lw=0.8, ls="--")
    meds = rows["mediator"] if "mediator" in rows else [""] * len(rows)
    ax.set_yticks(
        y,
        labels=[
            f"{c} / {lang}" + (f" / {m}" if m else "") for c, lang, m in zip(rows["checkpoint"], rows["language"], meds)
        ],
        fontsize=7,
    )
    loss = str(rows["loss"].iloc[0]) if "loss" in rows and rows["loss"].nunique() == 1 else ""
    unit = " (nats of log-odds)" if loss == "sum" else (f" (loss {loss})" if loss else "")
    ax.set_xlabel(f"effect on delta vs reference language{unit}", fontsize=8)
    ax.set_title("Fertility mediation of the language effect", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
