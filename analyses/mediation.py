"""Does tokenizer fertility mediate the language effect on bias?

Single-mediator product-of-coefficients analysis with OLS (Baron & Kenny paths,
Preacher & Hayes percentile bootstrap):

    a  : mediator ~ 1 + treatment + covariates
    b, c' : outcome ~ 1 + treatment + mediator + covariates
    c  : outcome ~ 1 + treatment + covariates

indirect = a * b, direct = c', total = c. For OLS on the same rows with the same
covariates c = c' + a * b holds exactly, so prop_mediated = a * b / c.

The bootstrap is vectorised: a resample is a vector of integer row weights (how often
each row - or each cluster's rows - was drawn), and weighted least squares with those
weights is exactly OLS on the resampled rows. All resamples are solved at once with
batched normal equations on standardised columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from analyses.bootstrap import resample_counts

__all__ = ["BY_LANGUAGE_COLUMNS", "MediationResult", "mediation", "mediation_by_language"]

# columns of mediation_by_language, in order; extra diagnostics follow these
BY_LANGUAGE_COLUMNS = [
    "checkpoint",
    "language",
    "total",
    "direct",
    "indirect",
    "total_lo",
    "total_hi",
    "direct_lo",
    "direct_hi",
    "indirect_lo",
    "indirect_hi",
    "n",
]


@dataclass(frozen=True)
class MediationResult:
    """Point estimates (full sample) and percentile-bootstrap CIs.

    ``a`` is treatment -> mediator, ``b`` mediator -> outcome given treatment.
    ``n`` rows used (after dropping rows with missing values), ``n_clusters`` the
    number of resampling units (= n without clustering), ``n_boot`` resamples drawn,
    ``n_boot_valid`` those with a full-rank design (CIs use only these).
    """

    total: float
    direct: float
    indirect: float
    prop_mediated: float
    total_lo: float
    total_hi: float
    direct_lo: float
    direct_hi: float
    indirect_lo: float
    indirect_hi: float
    prop_mediated_lo: float
    prop_mediated_hi: float
    a: float
    b: float
    n: int
    n_clusters: int
    n_boot: int
    n_boot_valid: int
    ci: float


def _covariate_matrix(df: pd.DataFrame, covariates: Sequence[str]) -> np.ndarray:
    """Numeric covariates as-is; anything else one-hot with the first level dropped.

    Constant columns are dropped (a covariate with one level in this subset carries
    no information and would be collinear with the intercept).
    """
    parts = []
    for name in covariates:
        col = df[name]
        if ptypes.is_numeric_dtype(col) and not ptypes.is_bool_dtype(col):
            parts.append(col.to_numpy(dtype=float)[:, None])
        else:
            dummies = pd.get_dummies(col.astype(str), drop_first=True, dtype=float)
            parts.append(dummies.to_numpy())
    if not parts:
        return np.empty((len(df), 0))
    mat = np.hstack(parts)
    return mat[:, np.ptp(mat, axis=0) > 0] if len(mat) else mat


def _standardise(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale columns; slopes on the scaled columns divide back by ``sd``."""
    sd = cols.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (cols - cols.mean(axis=0)) / sd, sd


def _wls_slopes(x: np.ndarray, y: np.ndarray, w: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Weighted LS slopes for a batch of weight vectors, with an intercept.

    ``x`` (n, p) standardised regressors, ``y`` (n,), ``w`` (B, n) non-negative weights.
    Returns (B, p) slopes; rows whose weighted design is (numerically) singular are NaN.
    The intercept is profiled out by weighted centring, which keeps the system p x p.
    """
    n, p = x.shape
    y = y - y.mean()  # slopes are shift-invariant; avoids cancellation for large means
    wsum = w.sum(axis=1, keepdims=True)
    xbar = (w @ x) / wsum  # (B, p)
    ybar = (w @ y) / wsum[:, 0]  # (B,)
    # per-row outer products flattened, so every weighted cross-product is one GEMM
    xx = (x[:, :, None] * x[:, None, :]).reshape(n, p * p)
    xtx = (w @ xx).reshape(-1, p, p) - wsum[:, :, None] * xbar[:, :, None] * xbar[:, None]
    xty = w @ (x * y[:, None]) - wsum * xbar * ybar[:, None]
    eig = np.linalg.eigvalsh(xtx)
    ok = eig[:, 0] > rtol * np.maximum(eig[:, -1], np.finfo(float).tiny)
    out = np.full(xty.shape, np.nan)
    if ok.any():
        out[ok] = np.linalg.solve(xtx[ok], xty[ok][..., None])[..., 0]
    return out


def _path_estimates(
    t: np.ndarray, m: np.ndarray, y: np.ndarray, cov: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, c') for each weight vector in ``w`` (B, n)."""
    xa, sda = _standardise(np.column_stack([t, cov]))
    xb, sdb = _standardise(np.column_stack([t, m, cov]))
    a = _wls_slopes(xa, m, w)[:, 0] / sda[0]
    bc = _wls_slopes(xb, y, w)
    return a, bc[:, 1] / sdb[1], bc[:, 0] / sdb[0]


def _resample_counts(rng: np.random.Generator, n_units: int, n_boot: int) -> np.ndarray:
    """(n_boot, n_units) draw counts: each resample draws n_units units with replacement."""
    return resample_counts(n_units, n_boot=n_boot, rng=rng).astype(np.int64)


def _ols(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones(len(y)), x])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        raise ValueError(
            "mediation design is rank-deficient: the mediator (or a covariate) is "
            "collinear with the treatment in these rows"
        )
    return np.linalg.lstsq(design, y, rcond=None)[0][1:]


def mediation(
    df: pd.DataFrame,
    *,
    treatment: str = "is_target_language",
    mediator: str = "fertility",
    outcome: str = "delta",
    covariates: Sequence[str] = (),
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    cluster: str | None = None,
) -> MediationResult:
    """Single-mediator analysis: does ``mediator`` carry the effect of ``treatment``?

    ``treatment`` is a 0/1 column (1 = target language, 0 = English). Covariates that
    are not numeric (e.g. checkpoint) enter as fixed-effect dummies. Rows with a
    missing value in any used column are dropped.

    CIs are percentile bootstrap intervals at level ``ci`` from a seeded
    ``numpy.random.Generator``. With ``cluster`` set, whole clusters are resampled -
    use the prompt id, since a prompt's translations (and its scores under several
    checkpoints) are not independent rows. Resamples whose design is singular (e.g.
    no treated rows drawn) are dropped and counted in ``n_boot_valid``.

    Raises ValueError if the full-sample design is rank-deficient, e.g. when the
    mediator is a function of the treatment within the data (one fertility value per
    language under one tokenizer): then direct and indirect effects are not identified.
    """
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    used = [treatment, mediator, outcome, *covariates, *([cluster] if cluster else [])]
    data = df.dropna(subset=used)
    t = data[treatment].to_numpy(dtype=float)
    if not np.isin(t, (0.0, 1.0)).all():
        raise ValueError(f"treatment column {treatment!r} must be 0/1")
    m = data[mediator].to_numpy(dtype=float)
    y = data[outcome].to_numpy(dtype=float)
    cov = _covariate_matrix(data, covariates)

    a = _ols(np.column_stack([t, cov]), m)[0]
    c_prime, b = _ols(np.column_stack([t, m, cov]), y)[:2]
    c = _ols(np.column_stack([t, cov]), y)[0]
    indirect = a * b

    if cluster is None:
        codes, n_units = np.arange(len(data)), len(data)
    else:
        codes, uniques = pd.factorize(data[cluster])
        n_units = len(uniques)
    rng = np.random.default_rng(seed)
    counts = _resample_counts(rng, n_units, n_boot)
    # chunk so the (B, n) weight matrix stays around 32 MB whatever the table size
    chunk = max(1, int(4e6 // len(data)))
    boots = []
    for start in range(0, n_boot, chunk):
        w = counts[start : start + chunk][:, codes].astype(float)
        boots.append(np.column_stack(_path_estimates(t, m, y, cov, w)))
    ab = np.vstack(boots) if boots else np.empty((0, 3))
    ab = ab[np.isfinite(ab).all(axis=1)]
    ba, bb, bcp = ab.T
    b_ind = ba * bb
    b_tot = bcp + b_ind  # exact OLS identity, saves a third regression per resample
    with np.errstate(divide="ignore", invalid="ignore"):
        b_prop = b_ind / b_tot
    q = [(1 - ci) / 2, 1 - (1 - ci) / 2]

    def bounds(x: np.ndarray) -> tuple[float, float]:
        x = x[np.isfinite(x)]
        if x.size == 0:
            return float("nan"), float("nan")
        lo, hi = np.quantile(x, q)
        return float(lo), float(hi)

    (tl, th), (dl, dh), (il, ih), (pl, ph) = map(bounds, (b_tot, bcp, b_ind, b_prop))
    return MediationResult(
        total=float(c),
        direct=float(c_prime),
        indirect=float(indirect),
        prop_mediated=float(indirect / c) if c != 0 else float("nan"),
        total_lo=tl,
        total_hi=th,
        direct_lo=dl,
        direct_hi=dh,
        indirect_lo=il,
        indirect_hi=ih,
        prop_mediated_lo=pl,
        prop_mediated_hi=ph,
        a=float(a),
        b=float(b),
        n=int(len(data)),
        n_clusters=int(n_units),
        n_boot=int(n_boot),
        n_boot_valid=int(len(ab)),
        ci=float(ci),
    )


def _attach_fertility(
    scores: pd.DataFrame, fertility: pd.DataFrame, checkpoint: str, language: str, mediator: str
) -> pd.DataFrame:
    if mediator in scores.columns:
        raise ValueError(f"scores_df already has a {mediator!r} column; pass fertility_df=None to use it")
    key = checkpoint if checkpoint in fertility.columns else "tokenizer"
    if key not in fertility.columns or mediator not in fertility.columns:
        raise KeyError(f"fertility_df needs columns ({checkpoint!r} or 'tokenizer'), {language!r}, {mediator!r}")
    table = fertility[[key, language, mediator]].rename(columns={key: checkpoint})
    return scores.merge(table, on=[checkpoint, language], how="left", validate="many_to_one")


def mediation_by_language(
    scores_df: pd.DataFrame,
    fertility_df: pd.DataFrame | None = None,
    *,
    reference: str = "en",
    checkpoint: str = "checkpoint",
    language: str = "language",
    outcome: str = "delta",
    mediator: str = "fertility",
    cluster: str | None = "prompt_id",
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    pooled: bool = True,
) -> pd.DataFrame:
    """Fertility mediation of each language's contrast with ``reference``, per checkpoint.

    ``scores_df`` has one row per (checkpoint, prompt, language) with the bias score
    ``outcome`` and, preferably, the per-item ``mediator``: tokens per word of that
    item's own text under that checkpoint's tokenizer (see
    ``analyses.fertility.item_fertility``). Per-item values vary within a language, which
    is what identifies b inside one checkpoint.

    ``fertility_df`` is the fallback when per-item values are missing: a table keyed by
    (``checkpoint`` or ``tokenizer``, ``language``) such as ``fertility_table`` output,
    merged in as a language-level mediator. Within one checkpoint that mediator is a
    function of the language, so per-checkpoint rows come out NaN (not identified);
    only the pooled row, where tokenizers differ, is estimable.

    For each checkpoint and each non-reference language L the rows of L and
    ``reference`` are taken, treatment = (language == L), and :func:`mediation` is run
    with clusters ``cluster`` (prompt id: translations of one prompt are matched).
    With ``pooled`` and at least two checkpoints, a row ``checkpoint="pooled"`` per
    language fits all checkpoints together with checkpoint fixed effects as covariates.
    Each fit uses the same ``seed``, so a row does not depend on which others are run.

    Columns: checkpoint, language, total, direct, indirect, total_lo, total_hi,
    direct_lo, direct_hi, indirect_lo, indirect_hi, n, then a, b, prop_mediated,
    n_clusters, n_boot_valid.
    """
    data = scores_df
    if fertility_df is not None:
        data = _attach_fertility(scores_df, fertility_df, checkpoint, language, mediator)
    langs = [lang for lang in pd.unique(data[language]) if lang != reference]
    ckpts = list(pd.unique(data[checkpoint]))
    groups: list[tuple[str, pd.DataFrame, tuple[str, ...]]] = [
        (str(ck), data[data[checkpoint] == ck], ()) for ck in ckpts
    ]
    if pooled and len(ckpts) > 1:
        groups.append(("pooled", data, (checkpoint,)))

    rows = []
    for ck_name, sub, covs in groups:
        for lang in langs:
            pair = sub[sub[language].isin([lang, reference])]
            if not (pair[language] == lang).any() or not (pair[language] == reference).any():
                continue
            pair = pair.assign(_treated=(pair[language] == lang).astype(float))
            row: dict[str, object] = {"checkpoint": ck_name, "language": lang}
            try:
                res = mediation(
                    pair,
                    treatment="_treated",
                    mediator=mediator,
                    outcome=outcome,
                    covariates=covs,
                    n_boot=n_boot,
                    seed=seed,
                    ci=ci,
                    cluster=cluster,
                )
            except ValueError:  # mediator collinear with language here: not identified
                row["n"] = int(len(pair.dropna(subset=[mediator, outcome])))
            else:
                row.update({k: getattr(res, k) for k in BY_LANGUAGE_COLUMNS[2:]})
                row.update(
                    a=res.a,
                    b=res.b,
                    prop_mediated=res.prop_mediated,
                    n_clusters=res.n_clusters,
                    n_boot_valid=res.n_boot_valid,
                )
            rows.append(row)
    extra = ["a", "b", "prop_mediated", "n_clusters", "n_boot_valid"]
    return pd.DataFrame(rows, columns=BY_LANGUAGE_COLUMNS + extra)
