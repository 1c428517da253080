"""`interp steer`: is a readout's direction causal? Rerun a study while adding alpha × direction.

For every checkpoint and bank already cached in OUT (by `interp sweep`), the study is rerun on
the same items with a steering hook at resid_pre of `layer` (interp.runner.steering) at each
alpha, and the study's summary (for pressure: δ, S_op, S_ch with bootstrap CIs) is collected
against alpha into OUT/results/steer_<study>.csv and OUT/figures/steer_<study>.png. Steered
units live in OUT/steer/cache (steering is part of their identity), so OUT's own results and
cache are untouched and a rerun reuses finished alphas. Each checkpoint and bank sweeps into its own
OUT/steer/<checkpoint>--<bank>: a sweep refuses to drop rows of another checkpoint computed with
other settings (sweeps.report), and each checkpoint's steering direction is its own.

Choices (parameters, stated in the table):
* direction `probe:<target>` is the readout `interp probe` fitted on this checkpoint's cached
  residuals at `layer` (its raw-space weight vector, unit norm); or a .npy / .npz file.
* units `sd` (default): alpha is in standard deviations of the cached residuals' projection on
  the direction, so alpha = 1 moves that coordinate by its natural spread across trials;
  `raw`: alpha multiplies the unit vector (residual-norm units).
* positions `read` (default): only the position whose next token is the verdict; `all`: every
  position of the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.io import write_table
from cache.store import Store, read_unit
from cache.views import activations
from interp.core.errors import ConfigError
from interp.studies.base import RunConfig

STEER_COLUMNS = ("checkpoint", "bank", "study", "layer", "direction", "positions", "units", "scale", "alpha")
_SUMMARY = {"pressure": "pressure_summary"}
_METRICS = {"pressure": ("delta", "s_op", "s_ch")}


def parse_alphas(spec: str) -> list[float]:
    """`-4..4` (integer steps), `-4..4:0.5` (given step) or a comma list `-2,0,2`."""
    spec = spec.strip()
    m = re.fullmatch(r"(-?[\d.]+)\.\.(-?[\d.]+)(?::([\d.]+))?", spec)
    try:
        if m:
            lo, hi, step = float(m.group(1)), float(m.group(2)), float(m.group(3) or 1.0)
            if step <= 0 or hi < lo:
                raise ValueError
            n = int(round((hi - lo) / step))
            return [round(lo + k * step, 10) for k in range(n + 1)]
        return [float(a) for a in spec.split(",") if a.strip()]
    except ValueError:
        raise ConfigError(f"--alpha {spec!r}: expected LO..HI, LO..HI:STEP or a comma list") from None


def _bank_subsample(name: str) -> tuple[int | None, int]:
    m = re.search(r"\[n=(\d+),seed=(\d+)\]$", name)
    return (int(m.group(1)), int(m.group(2))) if m else (None, 0)


def _direction(out: Path, spec: str, *, study: str, layer: int, checkpoint: str, bank: str) -> tuple[np.ndarray, str]:
    from interp.runner.steering import direction_from_file, direction_from_probe

    if spec.startswith("probe:"):
        d, path = direction_from_probe(
            out, study=study, target=spec.split(":", 1)[1], layer=layer, checkpoint=checkpoint, bank=bank
        )
        return d, f"{spec} ({path.name})"
    return direction_from_file(spec), spec


def run_steer(
    out: str | Path,
    *,
    study: str = "pressure",
    direction: str,
    layer: int,
    alphas: Sequence[float],
    positions: str = "read",
    units: str = "sd",
    checkpoints: Sequence[str] | None = None,
    banks: Sequence[str] | None = None,
    cfg: RunConfig = RunConfig(),
    progress: bool = False,
) -> pd.DataFrame:
    """A study's summary against steering strength: the study rerun with a direction added.

    Writes OUT/results/steer_<study>.csv and its figure; the sweep's own results stay untouched.

    Parameters
    ----------
    out : str or Path
        A sweep's output directory (its cache gives the checkpoints, banks and probe weights).
    study : str
        The study to rerun.
    direction : str
        ``probe:TARGET`` (the readout `interp probe` fitted on this checkpoint's cached residuals
        at ``layer``: its raw-space weight vector, unit norm) or a ``.npy`` / ``.npz`` file.
    layer : int
        The block whose input is steered.
    alphas : sequence of float
        Steering strengths (0 reproduces the sweep).
    positions : {"read", "all"}
        Only the position whose next token is the verdict, or every position of the prompt.
    units : {"sd", "raw"}
        "sd": alpha in standard deviations of the cached residuals' projection on the direction;
        "raw": alpha multiplies the unit vector (residual-norm units).
    checkpoints : sequence of str, optional
        Checkpoints to rerun (default: all cached).
    banks : sequence of str, optional
        Banks to rerun (default: all cached).
    cfg : RunConfig
        Run options of the reruns.
    progress : bool
        Progress bars.

    Returns
    -------
    pandas.DataFrame
        One row per checkpoint, bank, readout and alpha with the study's summary metrics.
    """
    import interp
    from interp.runner.steering import Steering
    from sweeps.api import run_sweep

    out = Path(out)
    if study not in _SUMMARY:
        raise ConfigError(f"interp steer: study {study!r} not supported (choose {', '.join(_SUMMARY)})")
    if units not in ("sd", "raw"):
        raise ConfigError(f"--units {units!r}: choose sd or raw")
    paths = Store(out / "cache").units(study)
    if not paths:
        raise ConfigError(f"{out}: no cached {study} units (run `interp sweep ... --study {study} --out {out}` first)")
    cached = [read_unit(p) for p in paths]
    cached = [
        u
        for u in cached
        if (not checkpoints or str(u.attrs["checkpoint"]) in checkpoints)
        and (not banks or str(u.attrs["bank"]).split("[")[0] in banks or str(u.attrs["bank"]) in banks)
    ]
    if not cached:
        raise ConfigError(f"{out}: no cached {study} unit matches the requested checkpoints / banks")
    rows = []
    for u in cached:
        ck, bank = str(u.attrs["checkpoint"]), str(u.attrs["bank"])
        ck_path = str(u.attrs.get("checkpoint_path", ""))
        if not ck_path or ck_path == "in-memory" or not Path(ck_path).is_dir():
            raise ConfigError(
                f"{u.path}: checkpoint {ck} is not on disk ({ck_path or 'no path recorded'}); steering reruns the model"
            )
        d, source = _direction(out, direction, study=study, layer=layer, checkpoint=ck, bank=bank)
        if units == "sd":
            try:
                resid = activations(u, layer).values
            except ConfigError:
                raise ConfigError(
                    f"{u.path}: --units sd needs cached residuals at layer {layer} "
                    f"(cached: layer {u.attrs['layer']}); use --units raw or sweep with --layer {layer}"
                ) from None
            from interp.runner.steering import projection_sd

            if resid.ndim != 2 or d.shape[0] != resid.shape[1]:
                raise ConfigError(
                    f"{source}: direction has {d.shape[0]} values, but the residuals cached in {u.path.name} "
                    f"have {resid.shape[-1]} (the model's d_model)"
                )
            scale = projection_sd(resid, d)
        else:
            scale = 1.0
        n, seed = _bank_subsample(bank)
        lm = interp.load(ck_path, backend=str(u.attrs.get("backend", "hf")), threads=cfg.threads)
        if d.shape[0] != lm.d_model:  # before any steered sweep writes into OUT/steer
            raise ConfigError(f"{source}: direction has {d.shape[0]} values; the model's d_model is {lm.d_model}")
        lm.info = replace(lm.info, name=ck)  # tables keep the cached checkpoint name
        base = replace(cfg, max_items=n, seed=seed, layer=None, layers=str(u.attrs["layer"]))  # the cached layers
        for alpha in alphas:
            steer = Steering(layer=layer, direction=d * scale, alpha=float(alpha), positions=positions, source=source)
            run_cfg = replace(base, steering=steer.to_options())
            tables = run_sweep(
                [lm],
                studies=[study],
                banks=[str(u.attrs.get("bank_source") or bank)],
                out=out / "steer" / re.sub(r"[^A-Za-z0-9._=,-]+", "_", f"{ck}--{bank}"),
                cfg=run_cfg,
                progress=progress,
                report=False,
            )
            summary = tables[_SUMMARY[study]]
            for rec in summary.to_dict(orient="records"):
                rows.append(
                    {
                        "checkpoint": ck,
                        "bank": bank,
                        "study": study,
                        "layer": layer,
                        "direction": source,
                        "positions": positions,
                        "units": units,
                        "scale": scale,
                        "alpha": float(alpha),
                        **{k: v for k, v in rec.items() if k not in ("checkpoint", "bank")},
                    }
                )
    table = pd.DataFrame(rows)
    write_table(
        table,
        out / "results" / f"steer_{study}.csv",
        columns=STEER_COLUMNS,
        sort=["checkpoint", "bank", "readout", "alpha"] if "readout" in table else ["checkpoint", "bank", "alpha"],
    )
    steer_figure(table, _METRICS[study], out / "figures" / f"steer_{study}.png")
    return table


def steer_figure(table: pd.DataFrame, metrics: Sequence[str], path: Path) -> None:
    """Each metric against alpha with its bootstrap CI band, one line per checkpoint and bank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.0), squeeze=False)
    sub = table[table["readout"] == "slot"] if "readout" in table else table
    for ax, m in zip(axes[0], metrics):
        for (ck, bank), g in sub.groupby(["checkpoint", "bank"], sort=True):
            g = g.sort_values("alpha")
            ax.plot(g["alpha"], g[m], marker="o", ms=3, label=f"{ck} ({bank})")
            if f"{m}_lo" in g:
                ax.fill_between(g["alpha"], g[f"{m}_lo"], g[f"{m}_hi"], alpha=0.2)
        ax.axvline(0, color="grey", lw=0.6)
        ax.set_xlabel(f"alpha ({table['units'].iloc[0]})")
        ax.set_title(m, fontsize=9)
    axes[0, 0].legend(fontsize=6)
    fig.suptitle(f"steering at resid_pre L{table['layer'].iloc[0]} along {table['direction'].iloc[0]}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
