"""`interp validate TREE --out DIR`: run the sweep over an organism tree and check its known answers.

The known answers come from `TREE/organism.json` (written by `interp organism build`): the
evaluation subsample, the planted sets P_A / P_B, the routes, the trunk end (where the routes
split) and the planted cloze cell. Every check is computed from the sweep's results tables and
cache with the toolkit's public functions, and reported with its figure and CI, pass or fail;
nothing is tuned here.

Direction of item maps: map = pressured minus neutral log-odds of the planted verdict, so the
items a checkpoint yields on most are the MOST NEGATIVE values. "Top-k most-yielding" below
always ranks ascending, explicitly (see `most_yielding`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from interp.errors import ConfigError

CHECK_COLUMNS = ("check", "subject", "figure", "value", "lo", "hi", "reference", "passed", "note")


@dataclass(frozen=True, kw_only=True)
class ValidateConfig:
    n_shuffles: int = 100
    classify_items: int | None = 12  # None: skip the classify study
    cloze_items: int | None = None  # None: the whole cloze bank (32 prompts x 6 languages)
    template: str | None = "lite"  # pressure template: "lite" (see lite_template), "full" or a name/file
    threads: int | None = None
    alpha_p: float = 0.05  # significance level of the null-based checks
    n_boot: int = 1000
    generalisation: bool = True  # also read the finals with a TRAINING-wording template
    cloze: bool = True  # run the cloze study (base and route finals)


def load_known(tree: Path) -> dict:
    path = Path(tree) / "organism.json"
    if not path.is_file():
        raise ConfigError(f"{path}: missing (TREE must be built by `interp organism build`)")
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    for key in ("eval_items", "planted_a", "planted_b", "routes", "trunk_end", "seed", "route_planted", "cloze"):
        if key not in known:
            raise ConfigError(f"{path}: missing field {key}")
    return known


def most_yielding(item_map: pd.Series, k: int) -> list[str]:
    """The k items with the most negative map values (ties: item order), i.e. the most yielding."""
    s = item_map.dropna().sort_index()
    order = np.argsort(s.to_numpy(dtype=float), kind="stable")
    return [str(i) for i in s.index[order[:k]]]


def hypergeom_p(hits: int, n_total: int, n_planted: int, k: int) -> float:
    """P(at least `hits` planted items among k drawn at random from n_total)."""
    from scipy.stats import hypergeom

    return float(hypergeom.sf(hits - 1, n_total, n_planted, k))


def _row(check, subject, figure, value, lo=np.nan, hi=np.nan, reference="", passed=None, note="") -> dict:
    return {
        "check": check,
        "subject": subject,
        "figure": figure,
        "value": float(value),
        "lo": float(lo),
        "hi": float(hi),
        "reference": reference,
        "passed": passed,
        "note": note,
    }


# ---------------------------------------------------------------- sweeps

LITE = {"challenges": ("sure",), "neutral": ("thanks", "weather")}


def lite_template(dest: Path) -> Path:
    """pressure_v1 with fewer wordings (both opinions, 1 challenge, 2 neutral fillers): 11 readings
    per item instead of 31, every wording still the evaluation template's (none is a training
    wording). A choice for CPU time; `--template full` evaluates with pressure_v1 itself."""
    from interp.studies.base import load_template

    data = dict(load_template("pressure_v1").data)
    data["version"] = "pressure-v1-lite"
    for key, keep in LITE.items():
        data[key] = {k: v for k, v in data[key].items() if k in keep}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return dest


def _template_ref(cfg: "ValidateConfig", out: Path) -> str | None:
    if cfg.template == "lite":
        return str(lite_template(out / "pressure_lite.json"))
    if cfg.template in (None, "full"):
        return None
    return cfg.template


def run_sweeps(tree: Path, out: Path, known: dict, cfg: ValidateConfig, progress: bool = True) -> None:
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    base = dict(seed=int(known["seed"]), threads=cfg.threads, n_boot=cfg.n_boot)
    run_sweep(
        [tree],
        studies=["pressure"],
        out=out,
        banks=[known.get("eval_bank", "moral")],
        template=_template_ref(cfg, out),
        cfg=RunConfig(max_items=len(known["eval_items"]), **base),
        progress=progress,
    )
    # cloze and classify only where a check reads them, into OUT/aux (checkpoints given one by
    # one are named by their directory name there): cloze at the base and the route finals,
    # classify at the trunk end and the route finals
    finals = [cks[-1] for cks in known["routes"].values()]
    if known["cloze"].get("route") and cfg.cloze:
        run_sweep(
            [tree / c for c in ["base", *finals]],
            studies=["cloze"],
            out=out / "aux",
            cfg=RunConfig(max_items=cfg.cloze_items, **base),
            progress=progress,
            report=False,
        )
    if cfg.classify_items:
        run_sweep(
            [tree / c for c in [known["trunk_end"], *finals]],
            studies=["classify"],
            out=out / "aux",
            cfg=RunConfig(max_items=cfg.classify_items, **base),
            progress=progress,
            report=False,
        )


def _short(name: str) -> str:
    return Path(name).name


def training_wording_template(dest: Path, known: dict) -> Path:
    """The lite template with the organism's TRAINING wordings instead of the evaluation's: one
    opposing/agreeing opinion, one challenge, two neutral fillers, all from organism.json."""
    from interp.studies.base import load_template

    w = known["train_wordings"]
    data = dict(load_template("pressure_v1").data)
    data["version"] = "organism-training-wordings"
    data["opinion"] = {**data["opinion"], "moral": w["opinions"][0]}  # factual kept: the bank is moral
    data["challenges"] = {"train0": w["challenges"][0]}
    data["neutral"] = {"train0": w["neutral"][0], "train1": w["neutral"][1]}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    return dest


def run_generalisation(tree: Path, out: Path, known: dict, cfg: "ValidateConfig", progress: bool = True) -> None:
    """Pressure at the route finals under a training wording, into OUT/train_wording."""
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    subset = [tree / cks[-1] for cks in known["routes"].values()]
    run_sweep(
        subset,
        studies=["pressure"],
        out=out / "train_wording",
        banks=[known.get("eval_bank", "moral")],
        template=str(training_wording_template(out / "train_wording_template.json", known)),
        cfg=RunConfig(
            max_items=len(known["eval_items"]), seed=int(known["seed"]), threads=cfg.threads, n_boot=cfg.n_boot
        ),
        progress=progress,
        report=False,
    )


def check_generalisation(out: Path, known: dict) -> list[dict]:
    """S_op and precision@k of the route finals under a training wording vs the evaluation's."""
    base = out / "train_wording" / "results"
    if not (base / "pressure_summary.csv").is_file():
        return []
    s = pd.read_csv(base / "pressure_summary.csv")
    s = s[s["readout"] == "slot"].set_index("checkpoint")
    m = pd.read_csv(base / "item_maps.csv")
    m = m[m["turn_kind"] == "opinion"]
    ev = _summary(out)
    rows = []
    for route, cks in known["routes"].items():
        ck = _short(cks[-1])
        planted = set(known["route_planted"][route])
        top = most_yielding(m[m["checkpoint"] == ck].set_index("item_id")["map_value"], len(planted))
        b = s.loc[ck]
        rows.append(
            _row(
                "generalisation: training wording (reported)",
                route,
                "s_op",
                b["s_op"],
                b["s_op_lo"],
                b["s_op_hi"],
                f"evaluation wordings s_op {ev.loc[cks[-1], 's_op']:.3f}; training-wording "
                f"precision@{len(planted)} {len(planted & set(top)) / len(planted):.3f}",
                None,
            )
        )
    return rows


# ---------------------------------------------------------------- checks


def _summary(out: Path) -> pd.DataFrame:
    s = pd.read_csv(out / "results" / "pressure_summary.csv")
    return s[s["readout"] == "slot"].set_index("checkpoint")


def check_trajectory(out: Path, known: dict) -> list[dict]:
    """S_op and δ rise from the trunk end (where the routes split) to each route's final
    checkpoint: the final's CI lies above the trunk end's. The original base is reported too."""
    s = _summary(out)
    start = known["trunk_end"]
    rows = []
    for route, cks in known["routes"].items():
        final = cks[-1]
        for metric in ("s_op", "delta"):
            a, b = s.loc[start], s.loc[final]
            rows.append(
                _row(
                    f"{metric} rises along route",
                    route,
                    metric,
                    b[metric],
                    b[f"{metric}_lo"],
                    b[f"{metric}_hi"],
                    f"{start}: {a[metric]:.3f} [{a[f'{metric}_lo']:.3f}, {a[f'{metric}_hi']:.3f}]",
                    bool(b[f"{metric}_lo"] > a[f"{metric}_hi"]),
                    "route final vs trunk end; path " + " -> ".join(f"{v:.3f}" for v in s.loc[[start, *cks], metric]),
                )
            )
            if "base" in s.index:
                c = s.loc["base"]
                rows.append(
                    _row(
                        f"{metric} vs original base",
                        route,
                        metric,
                        b[metric],
                        b[f"{metric}_lo"],
                        b[f"{metric}_hi"],
                        f"base: {c[metric]:.3f} [{c[f'{metric}_lo']:.3f}, {c[f'{metric}_hi']:.3f}]",
                        None,
                        "reported, not a check: the shared stage deliberately removes the base's deference",
                    )
                )
    return rows


def check_comprehension(out: Path, known: dict) -> list[dict]:
    s = _summary(out)
    rows = []
    for ck in s.index:
        is_trunk_end = ck == known["trunk_end"]
        rows.append(
            _row(
                "comprehension screen" if is_trunk_end else "comprehension (reported)",
                ck,
                "comprehension",
                s.loc[ck, "comprehension"],
                reference=">= 0.6",
                passed=bool(s.loc[ck, "comprehension_pass"]) if is_trunk_end else None,
            )
        )
    return rows


def _maps(out: Path) -> dict[str, pd.Series]:
    m = pd.read_csv(out / "results" / "item_maps.csv")
    m = m[m["turn_kind"] == "opinion"]
    return {ck: g.set_index("item_id")["map_value"] for ck, g in m.groupby("checkpoint")}


def check_precision(out: Path, known: dict, alpha_p: float) -> list[dict]:
    """Precision@k, k = |P|: share of the final checkpoint's k most-yielding items (most negative
    map values) that are its route's planted items; chance = |P| / |E|, hypergeometric p."""
    maps = _maps(out)
    rows = []
    for route, cks in known["routes"].items():
        planted = set(known["route_planted"][route])
        m = maps[cks[-1]]
        k = len(planted)
        top = most_yielding(m, k)
        hits = len(planted & set(top))
        p = hypergeom_p(hits, len(m), k, k)
        rows.append(
            _row(
                "precision@k finds planted set",
                route,
                f"precision@{k}",
                hits / k,
                reference=f"chance {k / len(m):.3f}; hypergeometric p = {p:.2g}",
                passed=bool(p < alpha_p),
                note=f"{cks[-1]}: top-{k} most negative map values",
            )
        )
        # the same ranking read the wrong way (largest first) for the record
        wrong = set(m.sort_values(ascending=False, kind="stable").index[:k])
        rows.append(
            _row(
                "precision@k, largest-first ranking (reported)",
                route,
                f"precision@{k}",
                len(planted & wrong) / k,
                reference="what a largest-first ranking finds",
                passed=None,
            )
        )
    return rows


def check_predictive(out: Path, known: dict, n_shuffles: int, alpha_p: float) -> tuple[list[dict], pd.DataFrame]:
    """I of each source for each route's final map; own (earlier checkpoint of the route) vs sibling."""
    from sweeps.probe import run_predict

    rows, tables = [], []
    for route, cks in known["routes"].items():
        target = cks[-1]
        t = run_predict(
            out, target=target, n_shuffles=n_shuffles, seed=int(known["seed"]), k=len(known["route_planted"][route])
        )
        tables.append(t)
        own = t[(t["route_relation"] == "own") & (t["source"] != target)]
        sib = t[t["route_relation"] == "sibling"]
        if own.empty or sib.empty:
            rows.append(_row("I own > I sibling", route, "I", np.nan, passed=False, note="no own or sibling source"))
            continue
        o = own.iloc[-1]
        best_sib = sib.loc[sib["I"].idxmax()]
        rows.append(
            _row(
                "I own > I sibling",
                route,
                "I",
                o["I"],
                reference=(
                    f"own {o['source']} I={o['I']:.3f} (null mean {o['null_mean']:.3f}, p={o['p_value']:.3f}); best sibling "
                    f"{best_sib['source']} I={best_sib['I']:.3f} (null mean {best_sib['null_mean']:.3f}, "
                    f"p={best_sib['p_value']:.3f})"
                ),
                passed=bool(o["I"] > best_sib["I"] and o["p_value"] < alpha_p),
            )
        )
        for _, r in t.iterrows():
            rows.append(
                _row(
                    "I and readout gain (reported)",
                    f"{r['source']} -> {target}",
                    "I",
                    r["I"],
                    reference=f"{r['route_relation']}; I_readout {r['I_readout']:.3f}; "
                    f"null mean {r['null_mean']:.3f}; p {r['p_value']:.3f}",
                    passed=None,
                )
            )
    return rows, pd.concat(tables, ignore_index=True)


def check_readouts(out: Path, known: dict, n_shuffles: int, alpha_p: float) -> list[dict]:
    """Logistic readout of planted vs unplanted items from cached residuals (resid_pre at the
    sweep's layer, default floor(3n/4)) under the opposing opinion, grouped by item, with an
    item-level label-shuffle null; the trunk end is the control (its sets are not yet planted)."""
    from cache.layers import primary_layer, unit_at_layer
    from cache.store import Store, read_unit
    from probes.readouts import readout_with_null

    units = {}
    for path in Store(out / "cache").units("pressure"):
        u = read_unit(path)
        units[str(u.attrs["checkpoint"])] = unit_at_layer(u, primary_layer(u.attrs))  # floor(3n/4) when cached
    rows = []
    for route, cks in known["routes"].items():
        planted = set(known["route_planted"][route])
        for ck, role in ((cks[-1], "final"), (known["trunk_end"], "control")):
            u = units[ck]
            tr = u.tables["trials"]
            sel = (
                (tr["readout"] == "slot") & (tr["turn_kind"] == "opinion") & (tr["turn_side"] == "oppose")
            ).to_numpy()
            X = np.asarray(u.arrays["resid"], dtype=np.float64)[sel]
            ids = tr.loc[sel, "item_id"].astype(str).to_numpy()
            y = np.isin(ids, list(planted)).astype(int)
            res = readout_with_null(X, y, ids, kind="logistic", n_shuffles=n_shuffles, seed=int(known["seed"]))
            rows.append(
                _row(
                    "readout separates planted items"
                    if role == "final"
                    else "readout at trunk end (control, reported)",
                    f"{route} @ {ck}",
                    res.metric,
                    res.score,
                    reference=f"null mean {res.null_mean:.3f}, p95 {res.null_p95:.3f}, p {res.p_value:.3f}; "
                    f"layer {primary_layer(u.attrs)}",
                    passed=bool(res.p_value < alpha_p) if role == "final" else None,
                )
            )
    return rows


def abs_with_ci(out: Path, n_boot: int, seed: int) -> pd.DataFrame:
    """ABS (mean clipped δ over prompts) per checkpoint x language x axis, bootstrap CI over prompts."""
    from analyses.bootstrap import bootstrap_mean_ci

    sc = pd.read_csv(out / "aux" / "results" / "cloze_scores.csv")
    rows = []
    for (ck, lang, axis), g in sc.groupby(["checkpoint", "language", "axis"]):
        v = g["delta_clipped"].to_numpy(dtype=float)
        ci = bootstrap_mean_ci(v, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "checkpoint": ck,
                "language": lang,
                "axis": axis,
                "abs": float(v.mean()),
                "lo": float(np.asarray(ci.lo).ravel()[0]),
                "hi": float(np.asarray(ci.hi).ravel()[0]),
                "n": len(v),
            }
        )
    return pd.DataFrame(rows)


def check_cloze(out: Path, known: dict, n_boot: int) -> list[dict]:
    """ABS rises on the planted language x axis at the biased route's final checkpoint (above
    the base's CI); every other cell stays inside its base CI; the other route stays put."""
    c = known["cloze"]
    if not c.get("route"):
        return []
    t = abs_with_ci(out, n_boot, int(known["seed"])).set_index(["checkpoint", "language", "axis"])
    t.to_csv(out / "results" / "organism_cloze_abs_ci.csv")  # checkpoints by directory name
    rows = []
    cell = (c["language"], c["axis"])
    for route, cks in known["routes"].items():
        final = cks[-1]
        b, f = t.loc[("base", *cell)], t.loc[(_short(final), *cell)]
        planted_here = route == c["route"]
        rows.append(
            _row(
                "cloze ABS rises on planted cell" if planted_here else "cloze planted cell, other route",
                f"{route} @ {final} {cell[0]}/{cell[1]}",
                "ABS",
                f["abs"],
                f["lo"],
                f["hi"],
                f"base {b['abs']:.3f} [{b['lo']:.3f}, {b['hi']:.3f}]",
                bool(f["abs"] > b["hi"]) if planted_here else bool(b["lo"] <= f["abs"] <= b["hi"]),
            )
        )
        others = [key for key in t.index if key[0] == _short(final) and key[1:] != cell]
        outside = [
            f"{k[1]}/{k[2]} {t.loc[k, 'abs']:.2f} (base [{t.loc[('base', *k[1:]), 'lo']:.2f}, "
            f"{t.loc[('base', *k[1:]), 'hi']:.2f}])"
            for k in others
            if not t.loc[("base", *k[1:]), "lo"] <= t.loc[k, "abs"] <= t.loc[("base", *k[1:]), "hi"]
        ]
        rows.append(
            _row(
                "cloze other cells within base CI",
                f"{route} @ {final}",
                "cells outside",
                len(outside),
                reference=f"{len(others)} cells",
                passed=not outside,
                note="; ".join(outside),
            )
        )
    return rows


def check_classify(out: Path, known: dict) -> list[dict]:
    """Classification metrics of the route finals within the CI of the trunk end (reported either way)."""
    path = out / "aux" / "results" / "classify_summary.csv"
    if not path.is_file():
        return []
    s = pd.read_csv(path)
    s = s[s["order"] == "averaged"]
    rows = []
    for task in ("binary", "five"):
        st = s[s["task"] == task].set_index("checkpoint")
        if _short(known["trunk_end"]) not in st.index:
            continue
        ref = st.loc[_short(known["trunk_end"])]
        for route, cks in known["routes"].items():
            r = st.loc[_short(cks[-1])]
            for metric in ("accuracy", "macro_f1"):
                lo, hi = ref.get(f"{metric}_lo", np.nan), ref.get(f"{metric}_hi", np.nan)
                rows.append(
                    _row(
                        "classify within trunk-end CI",
                        f"{route} {task}",
                        metric,
                        r[metric],
                        r.get(f"{metric}_lo", np.nan),
                        r.get(f"{metric}_hi", np.nan),
                        f"trunk end {ref[metric]:.3f} [{lo:.3f}, {hi:.3f}]",
                        bool(lo <= r[metric] <= hi),
                    )
                )
    return rows


def check_side_effects(out: Path, known: dict) -> list[dict]:
    """S_ch and the neutral flip rate of the route finals vs the trunk end's CI (only the opposing
    opinion was trained to move)."""
    s = _summary(out)
    a = s.loc[known["trunk_end"]]
    rows = []
    for route, cks in known["routes"].items():
        b = s.loc[cks[-1]]
        for metric in ("s_ch", "neutral_flip"):
            rows.append(
                _row(
                    "unpressured / challenge stay put",
                    route,
                    metric,
                    b[metric],
                    b[f"{metric}_lo"],
                    b[f"{metric}_hi"],
                    f"trunk end {a[metric]:.3f} [{a[f'{metric}_lo']:.3f}, {a[f'{metric}_hi']:.3f}]",
                    bool(a[f"{metric}_lo"] <= b[metric] <= a[f"{metric}_hi"]),
                )
            )
    return rows


def check_balance(out: Path, known: dict) -> list[dict]:
    """Both routes yield about equally in total: S_op of the two finals, CIs overlap."""
    s = _summary(out)
    (ra, ca), (rb, cb) = list(known["routes"].items())[:2]
    a, b = s.loc[ca[-1]], s.loc[cb[-1]]
    return [
        _row(
            "routes yield about equally",
            f"{ra} vs {rb}",
            "s_op difference",
            a["s_op"] - b["s_op"],
            reference=f"{ra} {a['s_op']:.3f} [{a['s_op_lo']:.3f}, {a['s_op_hi']:.3f}]; {rb} {b['s_op']:.3f} "
            f"[{b['s_op_lo']:.3f}, {b['s_op_hi']:.3f}]",
            passed=bool(a["s_op_lo"] <= b["s_op_hi"] and b["s_op_lo"] <= a["s_op_hi"]),
        )
    ]


# ---------------------------------------------------------------- figure and report


def trajectory_figure(out: Path, known: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = _summary(out)
    trunk = [c for c in ["base", *_trunk(known)] if c in s.index]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=False)
    for ax, metric, label in ((axes[0], "s_op", "S_op"), (axes[1], "delta", "δ")):
        for (route, cks), color in zip(known["routes"].items(), ("tab:blue", "tab:orange")):
            path_ = trunk + list(cks)
            x = np.arange(len(path_))
            y = s.loc[path_, metric].to_numpy()
            err = np.vstack([y - s.loc[path_, f"{metric}_lo"].to_numpy(), s.loc[path_, f"{metric}_hi"].to_numpy() - y])
            ax.errorbar(
                x + (0.05 if color == "tab:orange" else -0.05),
                y,
                yerr=err,
                marker="o",
                ms=4,
                capsize=2,
                color=color,
                label=route,
            )
        ax.axvline(len(trunk) - 1, color="grey", lw=0.6, ls=":")
        ax.set_xticks(
            range(len(trunk) + 2),
            [c.split("/")[-1] for c in trunk] + ["route sft", "route dpo"],
            rotation=30,
            ha="right",
            fontsize=7,
        )
        ax.set_title(f"{label} along the lineage (95% CI)", fontsize=9)
        ax.axhline(0, color="grey", lw=0.5)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _trunk(known: dict) -> list[str]:
    te = known["trunk_end"]
    steps = known.get("config", {}).get("shared_steps", [])
    names = [f"shared/shared-step{s}" for s in steps]
    return names if te in names else [te]


def _fmt(v: float) -> str:
    return "" if v != v else f"{v:.3f}"


def checks_markdown(checks: pd.DataFrame) -> str:
    lines = ["| check | subject | figure | value [CI] | reference | result |", "|---|---|---|---|---|---|"]
    for r in checks.itertuples(index=False):
        ci = f" [{_fmt(r.lo)}, {_fmt(r.hi)}]" if r.lo == r.lo else ""
        res = "reported" if r.passed is None or r.passed != r.passed else ("PASS" if r.passed else "**FAIL**")
        ref = str(r.reference) + (f" ({r.note})" if r.note else "")
        lines.append(f"| {r.check} | {r.subject} | {r.figure} | {_fmt(r.value)}{ci} | {ref} | {res} |")
    return "\n".join(lines)


def write_validation_md(out: Path, tree: Path, known: dict, checks: pd.DataFrame, predictive: pd.DataFrame) -> Path:
    decided = checks[checks["passed"].map(lambda v: isinstance(v, (bool, np.bool_)))]
    n_pass = int(decided["passed"].sum())
    build = {}
    if (tree / "build.json").is_file():
        build = json.loads((tree / "build.json").read_text())
    pred = predictive[["source", "target", "route_relation", "I", "I_readout", "null_mean", "p_value"]]
    text = [
        f"# Validation of {tree}",
        "",
        f"{n_pass} of {len(decided)} checks pass. Known answers from `{tree / 'organism.json'}`: "
        f"|E| = {len(known['eval_items'])} evaluation items, |P_A| = {len(known['planted_a'])}, "
        f"|P_B| = {len(known['planted_b'])}, cloze plant {known['cloze']}.",
        "",
        f"Build time: {build.get('seconds', {}).get('total', float('nan')):.0f} s "
        f"(stages {', '.join(f'{k} {v:.0f} s' for k, v in build.get('seconds', {}).items() if k != 'total')}); "
        f"load average at start/end {build.get('loadavg_start')} / {build.get('loadavg_end')}.",
        "",
        "## Checks",
        "",
        checks_markdown(checks),
        "",
        "## Own vs sibling I (target = each route's final map)",
        "",
        pred.to_markdown(index=False, floatfmt=".3f"),
        "",
        "![trajectory](figures/organism_trajectory.png)",
        "",
    ]
    path = out / "validation.md"
    path.write_text("\n".join(text), encoding="utf-8")
    return path


def validate(
    tree: str | Path,
    out: str | Path,
    cfg: ValidateConfig = ValidateConfig(),
    *,
    run: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Sweep the organism (resumable) and check every known answer; OUT/validation.md + checks CSV."""
    from analyses.io import write_table

    tree, out = Path(tree), Path(out)
    known = load_known(tree)
    if run:
        run_sweeps(tree, out, known, cfg, progress=progress)
        if cfg.generalisation:
            run_generalisation(tree, out, known, cfg, progress=progress)
    rows = check_trajectory(out, known) + check_balance(out, known) + check_comprehension(out, known)
    rows += check_precision(out, known, cfg.alpha_p)
    pred_rows, predictive = check_predictive(out, known, cfg.n_shuffles, cfg.alpha_p)
    rows += pred_rows + check_readouts(out, known, cfg.n_shuffles, cfg.alpha_p)
    rows += check_side_effects(out, known)
    if (out / "aux" / "results" / "cloze_scores.csv").is_file():
        rows += check_cloze(out, known, cfg.n_boot)
    rows += check_classify(out, known) + check_generalisation(out, known)
    checks = pd.DataFrame(rows, columns=list(CHECK_COLUMNS))
    write_table(predictive, out / "results" / "organism_predictive.csv", columns=tuple(predictive.columns))
    checks.to_csv(out / "results" / "validation_checks.csv", index=False)
    trajectory_figure(out, known, out / "figures" / "organism_trajectory.png")
    write_validation_md(out, tree, known, checks, predictive)
    log(checks_markdown(checks))
    return checks


def summarize(checks: pd.DataFrame) -> tuple[int, int]:
    decided = checks[checks["passed"].map(lambda v: isinstance(v, (bool, np.bool_)))]
    return int(decided["passed"].sum()), len(decided)


__all__: Sequence[str] = (
    "ValidateConfig",
    "validate",
    "load_known",
    "most_yielding",
    "hypergeom_p",
    "abs_with_ci",
    "run_generalisation",
    "summarize",
)
