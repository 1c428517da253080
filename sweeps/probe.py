"""`interp probe` and `interp predict`: analyses that read the cache only, never a model.

(Moved from probes/api.py: probes/ is now a pure library of arrays in, scores out; reading
the cache and asking the study registry for targets happens here.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analyses.figures import UNRELATED, lineage_order, new_figure, redraw_on_change, save_figure
from analyses.io import write_table
from cache.store import Store, read_unit
from interp.core.atomic import atomic_write
from interp.core.errors import ConfigError
from interp.core.files import writable_dirs
from interp.studies import all_studies, get_study
from probes.predictive import TABLE_COLUMNS, predictive_table
from probes.readouts import readout_with_null
from sweeps.probe_data import probe_datasets

PROBE_COLUMNS = (
    "checkpoint",
    "study",
    "layer",
    "target",
    "metric",
    "score",
    "null_mean",
    "null_p95",
    "p_value",
    "n_items",
    "folds",
)


def run_probe(
    out: str | Path,
    *,
    study: str,
    target: str,
    layer: int | str | None = None,
    n_shuffles: int = 100,
    n_folds: int = 5,
    seed: int = 0,
) -> pd.DataFrame:
    """Linear readout of cached residuals with a grouped label-shuffle null, per unit.

    Parameters
    ----------
    out : str or Path
        A sweep's output directory; rows go to OUT/results/probes.csv (rows of other study,
        target and layer combinations already there are kept).
    study : str
        A registered study.
    target : str
        One of the study's probe targets (``StudySpec.probe_targets()``).
    layer : int, "all" or None
        A cached layer; "all": a row per cached layer and the figure
        OUT/figures/probe_depth_<study>_<target>.png (score and the null's 5-95% band against
        depth); None: each unit's floor(3 n_layers / 4).
    n_shuffles : int
        Label shuffles of the null.
    n_folds : int
        Item-grouped cross-validation folds.
    seed : int
        Seed of folds and shuffles.

    Returns
    -------
    pandas.DataFrame
        One row per unit and layer: score, null mean and 95th percentile, p-value, items, folds.
    """
    out = Path(out)
    writable_dirs(out / "results", out / "figures", error=ConfigError)  # before any work
    rows, nulls = [], []
    for d in probe_datasets(out, study, target, layer=layer):
        if len(np.unique(d.groups)) < n_folds:
            raise ConfigError(f"{d.checkpoint}: {len(np.unique(d.groups))} items is fewer than {n_folds} folds")
        if d.kind == "logistic" and len(np.unique(d.y)) < 2:
            raise ConfigError(f"{d.checkpoint}: target {target} has a single class; nothing to read out")
        res = readout_with_null(d.X, d.y, d.groups, kind=d.kind, n_shuffles=n_shuffles, seed=seed, n_folds=n_folds)
        rows.append(
            {
                "checkpoint": d.checkpoint,
                "study": study,
                "layer": d.layer,
                "target": target,
                "metric": res.metric,
                "score": res.score,
                "null_mean": res.null_mean,
                "null_p95": res.null_p95,
                "p_value": res.p_value,
                "n_items": res.n_items,
                "folds": res.folds,
                "bank": d.bank,
                "n_rows": res.n_rows,
                "n_shuffles": res.n_shuffles,
                "null_p05": _quantile(res.null, 0.05),
            }
        )
        nulls.append((f"{d.checkpoint} ({d.bank}, L{d.layer})", res.score, np.asarray(res.null)))
        save_probe_weights(out, d, study=study, target=target, seed=seed, n_folds=n_folds)
    if layer == "all":
        _depth_figure(pd.DataFrame(rows), f"{study}: {target}", out / "figures" / f"probe_depth_{study}_{target}.png")
    else:
        _null_figure(nulls, f"{study}: {target}", out / "figures" / f"probe_null_{study}_{target}.png")
    table = pd.DataFrame(rows).drop(columns="null_p05", errors="ignore")  # the figure's band only
    path = out / "results" / "probes.csv"
    if path.is_file():
        old = pd.read_csv(path)
        keep = ~((old["study"] == study) & (old["target"] == target) & old["layer"].isin(table["layer"]))
        table = pd.concat([old[keep], table], ignore_index=True)
    write_table(table, path, columns=PROBE_COLUMNS, sort=["study", "target", "layer", "checkpoint", "bank"])
    return table


def save_probe_weights(out: Path, d, *, study: str, target: str, seed: int = 0, n_folds: int = 5) -> Path:
    """Refit the readout on all rows and save its weights for steering and reuse:
    OUT/results/probe_weights/<study>_<target>_L<layer>_<checkpoint>_<bank>.npz.

    `direction` is the weight vector in raw residual space (the standardized coefficients
    divided by the feature scale), so `resid @ direction` ranks rows as the readout does;
    `coef`, `intercept`, `mean`, `scale` reproduce the pipeline exactly.
    """
    from probes.readouts import LinearReadout

    est = LinearReadout(d.kind, n_folds=n_folds, seed=seed).fit(d.X, d.y)
    scaler = est.pipeline_.named_steps["scale"]
    scale = np.where(scaler.scale_ == 0, 1.0, scaler.scale_)
    safe = d.checkpoint.replace("/", "--")
    path = out / "results" / "probe_weights" / f"{study}_{target}_L{d.layer}_{safe}_{d.bank}.npz"
    arrays = dict(
        direction=est.coef_ / scale,
        coef=est.coef_,
        intercept=np.float64(est.intercept_),
        mean=scaler.mean_,
        scale=scale,
        checkpoint=d.checkpoint,
        bank=d.bank,
        study=study,
        target=target,
        layer=np.int64(d.layer),
        kind=d.kind,
        n_rows=np.int64(len(d.y)),
    )

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object: np.savez would append .npz to a path
            np.savez(f, **arrays)

    return atomic_write(path, write)  # a reader never sees half a file


def _quantile(null, q: float) -> float:
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    return float(np.quantile(null, q)) if null.size else float("nan")


@redraw_on_change
def _depth_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Score against depth: one line per (checkpoint, bank), the label-shuffle null's 5-95% as a band."""
    fig = new_figure(6.5, 3.4)
    ax = fig.subplots()
    for (ck, bank), g in rows.groupby(["checkpoint", "bank"], sort=True):
        g = g.sort_values("layer")
        (line,) = ax.plot(g["layer"], g["score"], marker="o", ms=3, label=f"{ck} ({bank})")
        ax.fill_between(g["layer"], g["null_p05"], g["null_p95"], color=line.get_color(), alpha=0.15, lw=0)
        ax.plot(g["layer"], g["null_mean"], ls=":", color=line.get_color(), lw=0.8)
    ax.set_xlabel("layer (resid_pre: input of block L)")
    ax.set_ylabel(rows["metric"].iloc[0] if len(rows) else "score")
    ax.set_title(f"{title}: readout vs depth (band: label-shuffle null 5-95%)", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


@redraw_on_change
def _null_figure(nulls: list[tuple[str, float, np.ndarray]], title: str, path: Path) -> None:
    """Label-shuffle null distribution of each readout with its observed score."""
    n = len(nulls)
    fig = new_figure(3.2 * n, 2.8)
    axes = fig.subplots(1, n, squeeze=False)
    for ax, (label, score, null) in zip(axes[0], nulls):
        ax.hist(null[np.isfinite(null)], bins=20, color="lightgrey", edgecolor="grey")
        ax.axvline(score, color="crimson", lw=2, label="observed")
        ax.set_title(label, fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{title}: label-shuffle null vs observed", fontsize=9)
    save_figure(fig, path)


def predict_study(study: str | None = None):
    """The study `interp predict` reads: the one given, or the only registered one with item maps."""
    if study is not None:
        return get_study(study)
    able = [s for s in all_studies() if s.supports_predict]
    if len(able) != 1:
        raise ConfigError(f"predict: choose a study with --study ({', '.join(s.name for s in able)})")
    return able[0]


def _predict_units(out: Path, bank: str | None, spec):
    current, _stale = Store(out / "cache").current_units(spec.name)  # stale units are reported, not read
    units = [read_unit(p) for p in current]
    if not units:
        raise ConfigError(f"{out}: no cached {spec.name} units (run `interp sweep ... --study {spec.name}`)")
    banks = sorted({str(u.attrs["bank"]) for u in units})
    if bank is None:
        bank = spec.default_predict_bank(banks)
    chosen = [u for u in units if str(u.attrs["bank"]) == bank]
    if not chosen:
        raise ConfigError(f"{out}: no {spec.name} units for bank {bank!r} (have {', '.join(banks)})")
    return chosen, bank


PREDICT_FOLDS = 5  # item folds of the held-out partial R² (probes.predictive.predictive_table)


def predict_inputs(
    out: str | Path,
    *,
    bank: str | None = None,
    turn_kind: str = "opinion",
    with_readout: bool = True,
    study: str | None = None,
    layer: int | None = None,
    readout_trials: str = "pressured",
) -> tuple[dict[str, pd.Series], dict[str, pd.DataFrame], dict[str, pd.DataFrame], str]:
    """Per checkpoint of OUT's cache: the item map, the unpressured profile and (with_readout) the
    per-item residual readout features that `run_predict` fits, and the bank read (the arguments
    as in `run_predict`)."""
    from cache.layers import primary_layer, unit_at_layer

    spec = predict_study(study)
    units, bank = _predict_units(Path(out), bank, spec)
    maps, profiles, readouts = {}, {}, {}
    for u in units:
        ck = str(u.attrs["checkpoint"])
        if ck in maps:  # two current units of one checkpoint and bank (two layers): refuse, never pick one
            raise ConfigError(
                f"{u.path}: checkpoint {ck!r} has more than one current {bank} unit "
                "(different layers or backends); use a separate --out per setting"
            )
        if with_readout:  # the readout reads the residual at one cached layer
            u = unit_at_layer(u, primary_layer(u.attrs) if layer is None else layer)
        got = spec.predict_inputs(u, turn_kind=turn_kind, with_readout=with_readout, readout_trials=readout_trials)
        maps[ck] = got.item_map
        profiles[ck] = got.profile
        if got.readout is not None:
            readouts[ck] = got.readout
    return maps, profiles, readouts, bank


def default_alpha(maps: dict[str, pd.Series], profiles: dict[str, pd.DataFrame], target: str) -> float:
    """`run_predict`'s base/full-model penalty when none is given: OLS (0) unless a training fold
    has fewer items than the profile has columns + 2 (OLS underdetermined), then ridge 1.0."""
    n_train = int(len(maps[target]) * (PREDICT_FOLDS - 1) / PREDICT_FOLDS)
    n_cols = max(p.shape[1] for p in profiles.values()) + 1
    return 1.0 if n_train < n_cols + 2 else 0.0


def run_predict(
    out: str | Path,
    *,
    target: str,
    sources: Sequence[str] | None = None,
    bank: str | None = None,
    turn_kind: str = "opinion",
    n_shuffles: int = 100,
    k: int | None = None,
    seed: int = 0,
    with_readout: bool = True,
    alpha: float | None = None,
    study: str | None = None,
    layer: int | None = None,
    readout_trials: str = "pressured",
) -> pd.DataFrame:
    """Held-out partial R² of each source checkpoint's item map for the target's map.

    Parameters
    ----------
    out : str or Path
        A sweep's output directory; the table goes to OUT/results/predictive.csv.
    target : str
        The checkpoint whose item map is predicted.
    sources : sequence of str, optional
        Source checkpoints (default: every other cached one).
    bank : str, optional
        The bank whose units are read (default: the study's choice, moral for pressure).
    turn_kind : str
        Which item map: "opinion" or "challenge".
    n_shuffles : int
        Permutations of the nulls.
    k : int, optional
        precision@k (default: 10% of the items).
    seed : int
        Seed of folds and permutations.
    with_readout : bool
        Also fit the source's per-item residual readout (the ``I_readout*`` columns).
    alpha : float, optional
        0 fits the base and full models by OLS (the paper's setting, for banks of hundreds of
        items); None uses OLS unless a training fold has fewer items than the profile has
        columns + 2, where OLS is underdetermined, and then ridge with alpha = 1.0.
    study : str, optional
        The study (default: the one registered study with item maps).
    layer : int, optional
        The cached layer the residual readout uses (default: each unit's floor(3 n_layers / 4)).
    readout_trials : {"pressured", "all"}
        Which trials' residuals are averaged per item into the readout features
        (pressure: ``interp.studies.pressure.probe.readout_trial_mask``).

    Returns
    -------
    pandas.DataFrame
        ``probes.predictive.TABLE_COLUMNS`` plus bank, alpha and readout_trials.
    """
    out = Path(out)
    writable_dirs(out / "results", out / "figures", error=ConfigError)  # before any work
    spec = predict_study(study)
    maps, profiles, readouts, bank = predict_inputs(
        out,
        bank=bank,
        turn_kind=turn_kind,
        with_readout=with_readout,
        study=study,
        layer=layer,
        readout_trials=readout_trials,
    )
    if target not in maps:
        raise ConfigError(
            f"target checkpoint {target!r} has no cached {spec.name} unit (have {', '.join(sorted(maps))})"
        )
    if sources:
        missing = [s for s in sources if s not in maps]
        if missing:
            raise ConfigError(f"source checkpoint(s) {', '.join(missing)} have no cached {spec.name} unit")
    if not [s for s in (sources or maps) if s != target]:
        raise ConfigError(
            f"{out / 'cache'}: only the target checkpoint {target!r} has a cached {spec.name} unit of bank "
            f"{bank}; predict needs at least one source checkpoint besides it"
        )
    if len(maps[target]) < PREDICT_FOLDS:
        raise ConfigError(
            f"bank {bank}: {len(maps[target])} item(s) in the cached {spec.name} units; predict's "
            f"{PREDICT_FOLDS}-fold held-out fit needs at least {PREDICT_FOLDS} (sweep again with more --max-items)"
        )
    lineage = None
    if (out / "lineage.json").is_file():
        lineage = json.loads((out / "lineage.json").read_text()).get("lineage")
    if alpha is None:
        alpha = default_alpha(maps, profiles, target)
    table = predictive_table(
        maps,
        profiles,
        target=target,
        sources=sources,
        lineage=lineage,
        n_shuffles=n_shuffles,
        k=k,
        readouts=readouts or None,
        seed=seed,
        alpha=alpha,
        n_folds=PREDICT_FOLDS,
    )
    table["alpha"] = alpha
    table["readout_trials"] = readout_trials if with_readout else ""
    table.insert(2, "bank", bank)
    write_table(table, out / "results" / "predictive.csv", columns=TABLE_COLUMNS)
    _figure(table, lineage, out / "figures" / "predictive_I.png")
    return table


@redraw_on_change
def _figure(table: pd.DataFrame, lineage: dict | None, path: Path) -> None:
    by_source = table.set_index("source")
    fig = new_figure(7, 3.5)
    ax = fig.subplots()
    for route, cks in lineage_order(list(by_source.index), lineage):
        cks = [c for c in cks if c in by_source.index]
        if cks:  # a line only along one lineage; unrelated checkpoints are points
            joined = route not in UNRELATED
            ax.plot(
                range(len(cks)), by_source.loc[cks, "I"], marker="o", ls="-" if joined else "none", label=f"{route}: I"
            )
            ax.plot(
                range(len(cks)), by_source.loc[cks, "null_mean"], ls=":" if joined else "none", marker=".", color="grey"
            )
            ax.set_xticks(range(len(cks)), cks, rotation=45, ha="right", fontsize=7)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylabel(f"I (target {table['target'].iloc[0]})")
    ax.legend(fontsize=7)
    save_figure(fig, path)
