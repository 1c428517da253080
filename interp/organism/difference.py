"""Organism − control difference checks of `interp validate` (issue #22, pre-registered in round 8,
before the v10 run; thresholds in `ValidateConfig.min_auc_gap` / `alpha_p`).

Why: in v9 the per-lineage checks "precision@k finds the planted set" and "readout separates
planted items" passed on the negative control too, because the planted sets are topics (home,
work/school stories) that yield more than chance without any plant. A per-lineage pass/fail
cannot separate the plant from the topic. These checks compare the two lineages directly, on the
same items: does the organism's route final rank its planted items above the rest by a larger
margin (AUC) than the control's route final does?

- **map AUC**: the score is the item's yield at the route final (minus its map value: most
  yielding = most negative map), i.e. the continuous form of precision@k;
- **readout AUC**: the score is the item's mean out-of-fold decision value of the ¾-depth logistic
  readout (planted vs rest, folds grouped by item, the same rows `checks.check_readouts` uses),
  fitted on each lineage separately.

Each is `stats.auc_difference` (AUC organism − AUC control, item bootstrap CI, sign-flip p with
its Monte-Carlo CI): kind "p", Holm-adjusted with the other headline p-values, and passes only with
the difference at least `min_auc_gap`. Its negative control (the "control" columns of the row) is
the same difference computed for the OTHER route's planted set, which was not planted on this
route: a check that passed there would be finding something other than the plant.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from interp.organism import stats as S
from interp.organism.checks import _maps, _pv, opposing_rows, readout_units, row

CONTROL_NOTE = "control columns hold the same difference for the other route's planted set (not planted on this route)"


def readout_item_scores(X: np.ndarray, ids: np.ndarray, planted: set[str], seed: int) -> pd.Series:
    """Per item: the mean out-of-fold decision value of a logistic readout of planted vs rest
    (5 folds grouped by item, `probes.readouts.LinearReadout`)."""
    from probes.readouts import LinearReadout

    y = np.isin(ids, sorted(planted)).astype(int)
    oof = LinearReadout("logistic", seed=seed).cross_val_predict(X, y, ids)
    return pd.Series(oof, index=ids).groupby(level=0).mean()


def _diff_row(check: str, route: str, figure: str, org: pd.Series, ctl: pd.Series, planted: set[str], cfg, seed):
    org, ctl = org.align(ctl, join="inner")
    mask = org.index.isin(sorted(planted))
    r = S.auc_difference(
        org.to_numpy(), ctl.to_numpy(), mask, n_flips=cfg.n_shuffles, n_boot=cfg.n_boot, ci=cfg.ci, seed=seed
    )
    ok = bool(r.diff >= cfg.min_auc_gap)
    return _pv(
        row(
            check,
            route,
            figure,
            r.diff,
            r.lo,
            r.hi,
            f"AUC organism {r.auc_org:.3f} vs control {r.auc_ctl:.3f}; {r.n_planted} planted vs {r.n_rest} other items",
            passed=bool(ok and r.p.p <= cfg.alpha_p),
            note=f"effect: difference >= {cfg.min_auc_gap}; the {CONTROL_NOTE}",
            kind="p",
            headline=True,
            threshold=cfg.alpha_p,
            effect_ok=ok,
            route=route,
        ),
        r.p,
    )


def difference_checks(org_out: Path, ctl_out: Path, known: dict, known_ctl: dict, cfg) -> tuple[list[dict], list[dict]]:
    """(rows on each route's planted set, the same rows on the other route's set: their control).
    `known` / `known_ctl`: the two lineages' organism.json (same nominal sets and route names)."""
    seed = int(known["seed"])
    maps_o, maps_c = _maps(org_out), _maps(ctl_out)
    units_o, units_c = readout_units(org_out), readout_units(ctl_out)
    routes = list(known["routes"])
    rows: tuple[list[dict], list[dict]] = ([], [])
    for route, cks in known["routes"].items():
        final, final_c = cks[-1], known_ctl["routes"][route][-1]
        other = next(r for r in routes if r != route)
        Xo, io = opposing_rows(units_o[final])
        Xc, ic = opposing_rows(units_c[final_c])
        for out, sets_from in zip(rows, (route, other)):
            planted = set(known["route_planted"][sets_from])
            out.append(
                _diff_row(
                    "planted items rank higher than on the control (map AUC)",
                    route,
                    "AUC organism - control",
                    -maps_o[final],
                    -maps_c[final_c],
                    planted,
                    cfg,
                    seed,
                )
            )
            out.append(
                _diff_row(
                    "readout separates planted items better than on the control",
                    route,
                    "readout AUC organism - control",
                    readout_item_scores(Xo, io, planted, seed),
                    readout_item_scores(Xc, ic, planted, seed),
                    planted,
                    cfg,
                    seed,
                )
            )
    return rows
