"""Probe score against depth: one line per (checkpoint, bank), the label-shuffle null as a band."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def depth_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """`rows`: run_probe's table (layer, score, null_p05, null_p95, null_mean, checkpoint, bank)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for (ck, bank), g in rows.groupby(["checkpoint", "bank"], sort=True):
        g = g.sort_values("layer")
        line, = ax.plot(g["layer"], g["score"], marker="o", ms=3, label=f"{ck} ({bank})")
        ax.fill_between(g["layer"], g["null_p05"], g["null_p95"], color=line.get_color(), alpha=0.15, lw=0)
        ax.plot(g["layer"], g["null_mean"], ls=":", color=line.get_color(), lw=0.8)
    metric = rows["metric"].iloc[0] if len(rows) else "score"
    ax.set_xlabel("layer (resid_pre: input of block L)")
    ax.set_ylabel(metric)
    ax.set_title(f"{title}: readout vs depth (band: label-shuffle null 5-95%)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
