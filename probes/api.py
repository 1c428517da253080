"""`interp probe` and `interp predict`: analyses that read the cache only, never a model."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analyses.io import write_table
from cache.store import Store, read_unit
from interp.errors import ConfigError
from probes.cache_io import probe_datasets
from probes.predictive import TABLE_COLUMNS, predictive_table
from probes.readouts import readout_with_null

PROBE_COLUMNS = ("checkpoint", "study", "layer", "target", "metric", "score", "null_mean", "null_p95",
                 "p_value", "n_items", "folds")


def run_probe(out: str | Path, *, study: str, target: str, layer: int | None = None, n_shuffles: int = 100,
              n_folds: int = 5, seed: int = 0) -> pd.DataFrame:
    """Linear readout with a grouped label-shuffle null for every cached unit; OUT/results/probes.csv.

    Rows for other (study, target, layer) combinations already in probes.csv are kept.
    """
    out = Path(out)
    rows, nulls = [], []
    for d in probe_datasets(out, study, target, layer=layer):
        if len(np.unique(d.groups)) < n_folds:
            raise ConfigError(f"{d.checkpoint}: {len(np.unique(d.groups))} items is fewer than {n_folds} folds")
        if d.kind == "logistic" and len(np.unique(d.y)) < 2:
            raise ConfigError(f"{d.checkpoint}: target {target} has a single class; nothing to read out")
        res = readout_with_null(d.X, d.y, d.groups, kind=d.kind, n_shuffles=n_shuffles, seed=seed, n_folds=n_folds)
        rows.append({"checkpoint": d.checkpoint, "study": study, "layer": d.layer, "target": target,
                     "metric": res.metric, "score": res.score, "null_mean": res.null_mean,
                     "null_p95": res.null_p95, "p_value": res.p_value, "n_items": res.n_items,
                     "folds": res.folds, "bank": d.bank, "n_rows": res.n_rows, "n_shuffles": res.n_shuffles})
        nulls.append((f"{d.checkpoint} ({d.bank}, L{d.layer})", res.score, np.asarray(res.null)))
    _null_figure(nulls, f"{study}: {target}", out / "figures" / f"probe_null_{study}_{target}.png")
    table = pd.DataFrame(rows)
    path = out / "results" / "probes.csv"
    if path.is_file():
        old = pd.read_csv(path)
        keep = ~((old["study"] == study) & (old["target"] == target) & old["layer"].isin(table["layer"]))
        table = pd.concat([old[keep], table], ignore_index=True)
    write_table(table, path, columns=PROBE_COLUMNS, sort=["study", "target", "layer", "checkpoint", "bank"])
    return table


def _null_figure(nulls: list[tuple[str, float, np.ndarray]], title: str, path: Path) -> None:
    """Label-shuffle null distribution of each readout with its observed score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(nulls)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 2.8), squeeze=False)
    for ax, (label, score, null) in zip(axes[0], nulls):
        ax.hist(null[np.isfinite(null)], bins=20, color="lightgrey", edgecolor="grey")
        ax.axvline(score, color="crimson", lw=2, label="observed")
        ax.set_title(label, fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{title}: label-shuffle null vs observed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _pressure_units(out: Path, bank: str | None):
    units = [read_unit(p) for p in Store(out / "cache").units("pressure")]
    if not units:
        raise ConfigError(f"{out}: no cached pressure units (run `interp sweep ... --study pressure`)")
    banks = sorted({str(u.attrs["bank"]) for u in units})
    if bank is None:
        bank = next((b for b in banks if b.startswith("moral")), banks[0])
    chosen = [u for u in units if str(u.attrs["bank"]) == bank]
    if not chosen:
        raise ConfigError(f"{out}: no pressure units for bank {bank!r} (have {', '.join(banks)})")
    return chosen, bank


READOUT_TRIALS = ("pressured", "all")


def readout_trial_mask(trials: pd.DataFrame, readout_trials: str = "pressured") -> np.ndarray:
    """Which slot trials feed a source's per-item readout features (mean residual per item).

    "pressured" (default): the turns the item map measures, i.e. the opposing stated opinion
    (turn_kind opinion, side oppose) and the bare challenges; the readout then describes the
    model's state under the pressure whose effect the map records. "all": every trial of the
    item, agreeing opinions and neutral fillers included (the behaviour before this option).
    """
    if readout_trials not in READOUT_TRIALS:
        raise ConfigError(f"readout_trials must be one of {', '.join(READOUT_TRIALS)}, got {readout_trials!r}")
    if readout_trials == "all":
        return np.ones(len(trials), dtype=bool)
    kind = trials["turn_kind"].astype(str)
    side = trials["turn_side"].fillna("").astype(str)
    return ((kind == "opinion") & (side == "oppose") | (kind == "challenge")).to_numpy()


def run_predict(out: str | Path, *, target: str, sources: Sequence[str] | None = None, bank: str | None = None,
                turn_kind: str = "opinion", n_shuffles: int = 100, k: int | None = None, seed: int = 0,
                with_readout: bool = True, alpha: float | None = None,
                readout_trials: str = "pressured") -> pd.DataFrame:
    """Held-out partial R² of each source's item map for the target's map; OUT/results/predictive.csv.

    `alpha`: 0 fits the base and full models by OLS (the paper's setting, for banks of hundreds
    of items); None (default) uses OLS unless a training fold has fewer items than the profile
    has columns + 2, where OLS is underdetermined, and then ridge with alpha = 1.0.
    `readout_trials`: which trials' residuals are averaged per item into the readout features
    (see :func:`readout_trial_mask`; default "pressured"). Columns: probes.predictive.TABLE_COLUMNS
    plus bank, alpha, readout_trials.
    """
    from analyses.pressure_metrics import item_maps, unpressured_profile

    out = Path(out)
    units, bank = _pressure_units(out, bank)
    maps, profiles, readouts = {}, {}, {}
    for u in units:
        ck = str(u.attrs["checkpoint"])
        trials = u.tables["trials"]
        slot = trials[trials["readout"] == "slot"].reset_index(drop=True)
        m = item_maps(slot)
        maps[ck] = m[m["turn_kind"] == turn_kind].set_index("item_id")["map_value"]
        profiles[ck] = unpressured_profile(slot)
        if with_readout:
            # per-item mean residual over the chosen trials: the source's internal state
            resid = u.arrays["resid"]
            if len(resid) != len(slot):
                raise ConfigError(f"{u.path}: {len(slot)} slot trials but {len(resid)} residual rows")
            keep = readout_trial_mask(slot, readout_trials)
            readouts[ck] = (pd.DataFrame(resid[keep].astype(np.float64))
                            .groupby(slot["item_id"].to_numpy()[keep]).mean())
    if target not in maps:
        raise ConfigError(f"target checkpoint {target!r} has no cached pressure unit (have {', '.join(sorted(maps))})")
    if sources:
        missing = [s for s in sources if s not in maps]
        if missing:
            raise ConfigError(f"source checkpoint(s) {', '.join(missing)} have no cached pressure unit")
    lineage = None
    if (out / "lineage.json").is_file():
        lineage = json.loads((out / "lineage.json").read_text()).get("lineage")
    if alpha is None:
        n_train = int(len(maps[target]) * 0.8)
        n_cols = max(p.shape[1] for p in profiles.values()) + 1
        alpha = 1.0 if n_train < n_cols + 2 else 0.0
    table = predictive_table(maps, profiles, target=target, sources=sources, lineage=lineage,
                             n_shuffles=n_shuffles, k=k, readouts=readouts or None, seed=seed, alpha=alpha)
    table["alpha"] = alpha
    table["readout_trials"] = readout_trials if with_readout else ""
    table.insert(2, "bank", bank)
    write_table(table, out / "results" / "predictive.csv", columns=TABLE_COLUMNS)
    _figure(table, lineage, out / "figures" / "predictive_I.png")
    return table


def _figure(table: pd.DataFrame, lineage: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from analyses.pressure_figures import lineage_order

    path.parent.mkdir(parents=True, exist_ok=True)
    by_source = table.set_index("source")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for route, cks in lineage_order(list(by_source.index), lineage):
        cks = [c for c in cks if c in by_source.index]
        if cks:
            ax.plot(range(len(cks)), by_source.loc[cks, "I"], marker="o", label=f"{route}: I")
            ax.plot(range(len(cks)), by_source.loc[cks, "null_mean"], ls=":", color="grey")
            ax.set_xticks(range(len(cks)), cks, rotation=45, ha="right", fontsize=7)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylabel(f"I (target {table['target'].iloc[0]})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
