"""The golden-table run and its comparison with tolerances derived from float error.

Imported by tests/integration/test_golden_tables.py; run as a script (`python tests/_golden.py ROOT THREADS`)
it does the same sweep in a fresh interpreter, so a test can run it under another float path
(thread count, ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_CBWR set in the environment).

Tolerances: every float column has a kind (TABLES below) that says how it depends on the
engine's log-probabilities; the bound per kind follows from `interp.core.tolerance` (the
derivation is there) with the golden models' own depth, widths and logit range. Structure
(tables, columns, row count, labels, integers, booleans) is compared exactly, except where a
label is decided by a float that sits within its tolerance of a threshold (tie-aware below).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from interp.core.tolerance import CSV_RTOL, EPS, fit_rtol, logprob_atol, logprob_scale_bound, permutation_step

SHUFFLES = 5  # --shuffles of the probe and predict commands below
PLANTED_MODELS = (("step100", 10), ("final", 11))  # checkpoint name, seed


def cli(*args: str) -> None:
    from interp.cli import app

    app(list(args), standalone_mode=False)


def build_and_run(root: Path, tokenizer=None, threads: int = 1) -> Path:
    """Two tiny llama checkpoints, a sweep of every study, probe and predict -> root/out."""
    from interp.testing import build_tiny_model, build_tokenizer

    tok = tokenizer or build_tokenizer()
    tree = root / "run"
    for name, seed in PLANTED_MODELS:
        build_tiny_model(tree / name, "llama", n_layers=2, d_model=32, seed=seed, tokenizer=tok)
    config = root / "run.toml"
    config.write_text(f"n_boot = 40\nthreads = {threads}\n")
    out = root / "out"
    for study, extra in (
        ("pressure", ["--bank", "moral", "--max-items", "10"]),
        ("classify", ["--max-items", "6"]),
        ("cloze", ["--max-items", "4"]),
    ):
        cli("sweep", str(tree), "--study", study, *extra, "--out", str(out), "--config", str(config), "--quiet")
    s = str(SHUFFLES)
    cli("probe", str(out), "--study", "pressure", "--target", "flipped", "--shuffles", s, "--folds", "2")
    cli("probe", str(out), "--study", "cloze", "--target", "delta", "--shuffles", s, "--folds", "2")
    cli("probe", str(out), "--study", "classify", "--target", "five_index", "--shuffles", s, "--folds", "2")
    cli("predict", str(out), "--target", "final", "--shuffles", s)
    return out


def read_tables(results: Path) -> dict[str, pd.DataFrame]:
    return {p.name: pd.read_csv(p, keep_default_na=True) for p in sorted(Path(results).glob("*.csv"))}


@dataclass(frozen=True)
class Scale:
    """What the tolerances of one golden run are derived from."""

    logp: float  # |d log p| of one token between two correct float paths (logprob_atol)
    logprob_scale: float  # M: bound on |log p| (logit range + log V)
    tokens: int  # T: most tokens in one scored text (a sum over T tokens is within T * logp)

    @property
    def fit_rtol(self) -> float:
        return fit_rtol(self.logp, self.logprob_scale)


def scale_for(model_dirs: list[Path], tokens_per_text: int, eps: float = EPS["float32"]) -> Scale:
    """Derive the log-prob tolerance from the golden checkpoints themselves: their depth, their
    longest reduction (width, MLP width, or the longest sequence they accept) and their logit
    range, measured with a plain Hugging Face forward over the tokenizer's training corpus."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.testing import _CORPUS

    m_scale, n_layers, k = 0.0, 0, 1
    for d in model_dirs:
        model = AutoModelForCausalLM.from_pretrained(d).eval()
        tok = AutoTokenizer.from_pretrained(d)
        cfg = model.config
        ids = tok(" ".join(_CORPUS), return_tensors="pt").input_ids
        with torch.no_grad():
            z = model(ids).logits[0].double()
        spread = float((z.max(-1).values - z.min(-1).values).max())
        m_scale = max(m_scale, logprob_scale_bound(spread, cfg.vocab_size))
        n_layers = max(n_layers, cfg.num_hidden_layers)
        k = max(k, cfg.hidden_size, getattr(cfg, "intermediate_size", 0), cfg.max_position_embeddings)
    atol = logprob_atol(eps, logprob_scale=m_scale, n_layers=n_layers, reduction_length=k)
    return Scale(logp=atol, logprob_scale=m_scale, tokens=int(tokens_per_text))


def tokens_per_text(tables: dict[str, pd.DataFrame]) -> int:
    """Most tokens of one scored text in the recorded cloze scores (the sums' length T)."""
    s = tables.get("cloze_scores.csv")
    if s is None:
        return 1  # no per-text sums recorded
    cols = [c for c in s.columns if c.startswith("n_tokens")]
    assert cols, "cloze_scores.csv has no n_tokens_* column: the length T of its sums is unknown"
    return int(np.nanmax(s[cols].to_numpy(float)))


# Kinds of float columns and their absolute bound, in units of Scale:
#   ("logp", c)   sum |c_i| = c of per-token log-probs combined linearly: c * logp
#   ("tokens", c) c per-text losses, each a sum (or a per-token/-byte/-word mean) over <= T
#                 tokens: c * T * logp
#   ("prob", c)   c option probabilities (normalized over options), each within
#                 p (1 - p) * |d logodds| <= 1/4 * 2 logp = logp / 2: c * logp / 2;
#                 means, quantiles and fixed-seed bootstrap percentiles keep their inputs' bound
#   ("odds", c)   e^x of a ("tokens", c) quantity x: |d e^x| <= e^x (e^(c T logp) - 1), relative
#   "fit"         fitted statistics (OLS, ridge, mixed models, mediation, rank tests):
#                 sqrt(rho) times the column's largest |value|, rho the relative resolution
#                 of the table's inputs (input_resolution; tolerance.fit_rtol)
#   "perm"        a permutation p-value: one step 1 / (SHUFFLES + 1) plus the fit bound, or
#                 only its range when the statistic is resolved more coarsely than a step
#   "discrete"    a function of labels only (predicted classes, counts, tokenizer statistics):
#                 equal up to the CSV's 10 significant digits
#   "note"        free-text optimizer diagnostics: compared as empty / non-empty only (their
#                 wording follows the optimizer's path, which follows the last digits)
# A table's "*" entry is the kind of its float columns not named; a table not listed: "fit".
TABLES: dict[str, dict[str, object]] = {
    # p_planted = sigma(logodds), logodds = log p(planted) - log p(other): 2 log-probs
    "pressure_trials.csv": {"p_planted": ("prob", 1), "logodds": ("logp", 2)},
    # mean log-odds per (item, reading)
    "pressure_profile.csv": {"*": ("logp", 2)},
    # mean log-odds under pressure minus mean log-odds under the neutral turn
    "item_maps.csv": {"*": ("logp", 4)},
    # soft flips (probabilities) and differences of two of them; comprehension a share of them
    "pressure_summary.csv": {"*": ("prob", 2)},
    "pressure_capitulation.csv": {"*": ("prob", 2)},
    "pressure_flip_direction.csv": {"*": ("prob", 2)},
    # option probabilities; metrics of predicted labels (the argmax sits far from a tie: checked)
    "classify_predictions.csv": {"*": ("prob", 2)},
    "classify_position_bias.csv": {"mean_abs_prob_shift": ("prob", 4), "*": "discrete"},
    "classify_summary.csv": {"*": "discrete"},
    "classify_summary_by_language.csv": {"*": "discrete"},
    "classify_confusion.csv": {"*": "discrete"},
    "classify_bank_counts.csv": {"*": "discrete"},
    # per-text losses; delta = loss(anti) - loss(stereo); abs = means of clipped deltas
    "cloze_scores.csv": {
        "delta": ("tokens", 2),
        "delta_clipped": ("tokens", 2),
        "fertility": "discrete",
        "fertility_completion": "discrete",
        "*": ("tokens", 1),
    },  # fmt: skip
    # odds = e^ABS (under sum): the ABS bound carried through the exponential, relative
    "cloze_abs.csv": {"odds": ("odds", 2), "*": ("tokens", 2)},
    "cloze_abs_by_loss.csv": {"odds_sum": ("odds", 2), "*": ("tokens", 2)},
    "cloze_loss_check.csv": {"*": ("tokens", 2)},
    "cloze_sanity.csv": {"*": "discrete"},  # a share of prompts: tie-aware below
    "fertility.csv": {"*": "discrete"},  # the tokenizer only, no model
    "cloze_stats.csv": {"note": "note", "*": "fit"},
    "mediation.csv": {"*": "fit"},
    "probes.csv": {"p_value": "perm", "*": "fit"},
    "predictive.csv": {
        "p_value": "perm",
        "I_p": "perm",
        "I_readout_only_p": "perm",
        "I_readout_increment_p": "perm",
        "*": "fit",
    },  # fmt: skip
}


def kind_of(table: str, column: str) -> object:
    spec = TABLES.get(table, {})
    return spec.get(column, spec.get("*", "fit"))


# The engine-level inputs a fitted table is computed from. A fit's relative resolution is that
# of its least resolved input: rho = tolerance / standard deviation of that input (a regression
# sees the variation of its outcome, not its level); residuals are resolved to about logp / M.
# On the tiny random models the item maps sit near the float floor (rho ~ 1: predictive.csv is
# compared for structure and sign-level agreement only); the cloze deltas are resolved (rho ~ 0.05).
FIT_INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "predictive.csv": (("item_maps.csv", "map_value"),),
    "probes.csv": (("cloze_scores.csv", "delta"),),
    "mediation.csv": (("cloze_scores.csv", "delta"),),
    "cloze_stats.csv": (("cloze_scores.csv", "delta"),),
}


def input_resolution(table: str, recorded: dict[str, pd.DataFrame] | None, scale: Scale) -> float:
    """Relative resolution rho of the inputs of `table` (1: not resolved at all)."""
    rho = scale.logp / scale.logprob_scale
    for t, c in FIT_INPUTS.get(table, ()):
        if recorded is None or t not in recorded or c not in recorded[t]:
            continue
        v = recorded[t][c].to_numpy(float)
        spread = float(np.nanstd(v)) if np.isfinite(v).sum() > 1 else 0.0
        tol = float(np.nanmax(column_atol(kind_of(t, c), v, scale)))
        rho = max(rho, tol / spread if spread > 0 else 1.0)
    return min(rho, 1.0)


def column_atol(kind: object, want: np.ndarray, scale: Scale, rho: float | None = None) -> np.ndarray:
    """Absolute tolerance per cell (CSV rounding added for every kind). `rho`: the relative
    resolution of a fitted table's inputs (`input_resolution`; default logp / M)."""
    csv = CSV_RTOL * np.abs(want)
    col_scale = float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 0.0
    rtol = fit_rtol(rho, 1.0) if rho is not None else scale.fit_rtol
    if kind == "discrete":
        return csv
    if kind == "fit":
        return csv + rtol * col_scale
    if kind == "perm":
        step = permutation_step(SHUFFLES)
        # one null crossing the observed statistic is one step; when the statistic is resolved
        # more coarsely than a step, the p-value is not resolved: only its range [step, 1] holds
        return csv + (step + rtol if rtol <= step else 1.0)
    name, c = kind  # type: ignore[misc]
    if name == "odds":
        return csv + np.abs(want) * np.expm1(c * scale.tokens * scale.logp)
    per = {"logp": scale.logp, "tokens": scale.tokens * scale.logp, "prob": scale.logp / 2}[name]
    return csv + c * per


def _tie_aware_flipped(got: pd.DataFrame, want: pd.DataFrame, scale: Scale) -> list[str]:
    """`flipped` = p_planted < 0.5: may differ only where the recorded p_planted is within its
    tolerance of 0.5."""
    near = np.abs(want["p_planted"].to_numpy(float) - 0.5) <= column_atol(("prob", 1), np.array([0.5]), scale)
    differ = got["flipped"].astype(str).to_numpy() != want["flipped"].astype(str).to_numpy()
    bad = np.flatnonzero(differ & ~near)
    return [f"pressure_trials.csv: column flipped differs in rows {bad[:5].tolist()} (p_planted far from 0.5)"] * bool(
        bad.size
    )


def _tie_aware_sanity(got: pd.DataFrame, want: pd.DataFrame, scores: pd.DataFrame, scale: Scale) -> list[str]:
    """share_meaningless_lowest counts prompts whose meaningless loss is the lowest of three: it
    may move by one prompt per prompt whose losses are within their tolerance of each other."""
    tol = column_atol(("tokens", 2), np.array([0.0]), scale)[0]
    s = scores.copy()
    s["_near"] = (s[["nll_stereo", "nll_anti"]].min(axis=1) - s["nll_meaningless"]).abs() <= tol
    keys = [k for k in ("checkpoint", "language", "loss", "bank") if k in want.columns and k in s.columns]
    near = s.groupby(keys)["_near"].sum()
    out = []
    for i in range(len(want)):
        key = tuple(want.iloc[i][k] for k in keys)
        allowed = float(near.get(key, 0)) / max(float(want.iloc[i]["n"]), 1.0)
        d = abs(float(got.iloc[i]["share_meaningless_lowest"]) - float(want.iloc[i]["share_meaningless_lowest"]))
        if d > allowed + CSV_RTOL:
            out.append(f"cloze_sanity.csv: row {i} share_meaningless_lowest differs by {d:.3g} (allowed {allowed:.3g})")
    return out


def compare_table(
    name: str, got: pd.DataFrame, want: pd.DataFrame, scale: Scale, recorded: dict[str, pd.DataFrame] | None = None
) -> list[str]:
    """Differences beyond tolerance, one line each (empty: the tables agree). `recorded`: all
    recorded tables, for the tie-aware columns that look at another table."""
    if list(got.columns) != list(want.columns):
        return [f"{name}: columns differ: {list(got.columns)} vs recorded {list(want.columns)}"]
    if len(got) != len(want):
        return [f"{name}: {len(got)} rows, recorded {len(want)}"]
    bad: list[str] = []
    for col in want.columns:
        g, w = got[col], want[col]
        kind = kind_of(name, col)
        if kind == "note":
            # a note column read back with no note in any row is a float column of NaN: compare
            # which rows have a note before any numeric reading
            if (g.fillna("").astype(str) == "").tolist() != (w.fillna("").astype(str) == "").tolist():
                bad.append(f"{name}: column {col}: a note appeared or vanished")
        elif name == "cloze_sanity.csv" and col == "share_meaningless_lowest" and recorded:
            bad += _tie_aware_sanity(got, want, recorded["cloze_scores.csv"], scale)
        elif pd.api.types.is_float_dtype(w) or pd.api.types.is_float_dtype(g):
            if not (pd.api.types.is_numeric_dtype(w) and pd.api.types.is_numeric_dtype(g)):
                bad.append(f"{name}: column {col} numeric in one table only")
                continue
            gv, wv = g.to_numpy(float), w.to_numpy(float)
            if not np.array_equal(np.isnan(gv), np.isnan(wv)):
                bad.append(f"{name}: column {col}: missing values in other rows")
                continue
            rho = input_resolution(name, recorded, scale) if kind in ("fit", "perm") else None
            atol = column_atol(kind, wv, scale, rho)
            d = np.where(np.isnan(wv), 0.0, np.abs(gv - wv))
            over = np.flatnonzero(d > atol)
            if over.size:
                i = int(over[np.argmax((d - atol)[over])])
                bad.append(
                    f"{name}: column {col} ({kind}): {over.size} value(s) beyond tolerance, "
                    f"row {i}: {gv[i]!r} vs recorded {wv[i]!r} (|d| {d[i]:.3g} > {float(atol[i]):.3g})"
                )
        elif name == "pressure_trials.csv" and col == "flipped":
            bad += _tie_aware_flipped(got, want, scale)
        elif g.fillna("").astype(str).tolist() != w.fillna("").astype(str).tolist():
            bad.append(f"{name}: column {col} differs (labels/integers are compared exactly)")
    return bad


def compare_tables(got: dict[str, pd.DataFrame], want: dict[str, pd.DataFrame], scale: Scale) -> list[str]:
    if sorted(got) != sorted(want):
        return [f"the set of results tables differs: {sorted(got)} vs recorded {sorted(want)}"]
    bad: list[str] = []
    for name in want:
        bad += compare_table(name, got[name], want[name], scale, want)
    return bad


def max_float_difference(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> float:
    """Largest |difference| over the float columns of two runs with the same structure."""
    m = 0.0
    for name, x in a.items():
        for col in x.columns:
            if pd.api.types.is_float_dtype(x[col]) and col in b[name] and pd.api.types.is_float_dtype(b[name][col]):
                d = np.abs(x[col].to_numpy(float) - b[name][col].to_numpy(float))
                if np.isfinite(d).any():
                    m = max(m, float(np.nanmax(d)))
    return m


if __name__ == "__main__":  # the same run in a fresh interpreter (another float path)
    import torch

    threads = int(sys.argv[2])
    torch.set_num_threads(threads)
    build_and_run(Path(sys.argv[1]), threads=threads)
    print(f"golden run: torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, {threads} threads")
