"""Tolerances derived from floating-point error, not picked: how far two correct runs of the
same computation on different kernel paths (thread count, CPU ISA, BLAS, GPU) may disagree.

Used by the golden-table and backend-equivalence tests and by `interp selftest`. Pure (no
torch): callers pass the machine epsilon of the dtype (`torch.finfo(dtype).eps`).

The derivation, for one token's log-probability log p = z_t - logsumexp(z) of a decoder with
`n_layers` blocks:

1. A reduction (dot product, sum) of length K computed in any order has a rounding error of
   at most gamma_K * sum|x_i y_i| in the worst case (Higham, *Accuracy and Stability of
   Numerical Algorithms*, 2nd ed., Thm 3.5); for rounding errors that behave as independent
   zero-mean variables the bound is lambda * sqrt(K) * u * sum|x_i y_i| with high probability
   (Higham & Mary, SIAM J. Sci. Comput. 41(5), 2019); u = eps / 2 is the unit roundoff. The
   kernels we meet (blocked GEMM, tree/SIMD reductions, split-K on GPUs) are in this regime.
   K is the longest reduction: the model width, the MLP width, or the sequence length
   (attention's weighted sum over positions).
2. Each block adds such an error twice (attention and MLP) to the residual stream, and the
   unembedding once more: S = 2 * n_layers + 1 error stages, each relative to the magnitude
   of what flows through it. Layer norms re-scale the stream, so the relative errors add
   (first order) rather than compound. Per stage: sqrt(K) * u_acc for the accumulation (u_acc
   of the accumulator: float32 in CPU bfloat16/float16 GEMMs, the storage dtype where a GPU
   allows reduced-precision reductions), + u for rounding the stage's output to the storage
   dtype, + 2 u when the compared run rounds both matmul operands to a narrower dtype than the
   reference keeps (mixed precision against float32).
3. The logits' absolute error is then S * stage times their scale; log-softmax is
   2-Lipschitz in the max-norm (|d log_softmax_t| <= |dz_t| + max_j |dz_j|), and the scale of
   the log-probabilities involved, M, bounds the logits' spread (|log p| <= logit range +
   log V, `logprob_scale_bound`).
4. Two runs each within that bound of the exact value differ by at most twice it.

So |d log p| <= 2 (two runs) * 2 (log-softmax) * S * (sqrt(K) u_acc + u [+ 2 u]) * M
(`logprob_atol`); for float32 against float32, 4 S (sqrt(K) + 1) u M.

Downstream quantities: a linear combination sum c_i log p_i is within sum |c_i| times that
(log-odds of two options: 2; a difference of two log-odds: 4; a sum over T tokens: T); a
probability normalized over options moves by at most p (1 - p) |d logodds| <= 1/4 * 2 = 1/2
of it; means, quantiles and bootstrap percentiles (fixed resampling) are 1-Lipschitz in the
max-norm, so they keep the bound of their inputs. Statistics fitted on such inputs
(least squares, mixed models, rank tests) are treated in `fit_rtol` and `permutation_step`.
"""

from __future__ import annotations

import math

# Machine epsilon (spacing of floats at 1.0) by dtype name; torch.finfo(dtype).eps gives the same.
EPS: dict[str, float] = {"float64": 2.0**-52, "float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}

# Results tables are written with float_format "%.10g" (analyses.io.write_table): reading one
# back is exact to half a unit in the 10th significant digit, 5e-10 relative.
CSV_RTOL = 5e-10


def error_stages(n_layers: int) -> int:
    """Rounding-error stages of a forward: attention and MLP per block, plus the unembedding."""
    return 2 * int(n_layers) + 1


def logprob_scale_bound(logit_range: float, vocab_size: int) -> float:
    """A bound on |log p| of any token: log p_t = z_t - logsumexp(z) >= -(max z - min z) - log V."""
    return float(logit_range) + math.log(max(int(vocab_size), 1))


def stage_error(
    eps: float, reduction_length: int, *, accumulate_eps: float | None = None, operands: bool = False
) -> float:
    """Relative rounding error of one stage (see the module docstring, step 2)."""
    if eps <= 0 or reduction_length < 1:
        raise ValueError("eps > 0 and reduction_length >= 1 required")
    u, u_acc = eps / 2.0, (accumulate_eps if accumulate_eps is not None else eps) / 2.0
    return math.sqrt(reduction_length) * u_acc + u + (2.0 * u if operands else 0.0)


def logprob_atol(
    eps: float,
    *,
    logprob_scale: float,
    n_layers: int,
    reduction_length: int,
    accumulate_eps: float | None = None,
    operands: bool = False,
) -> float:
    """Largest |difference| of one token's log-probability between two correct float paths.

    eps: machine epsilon of the storage/compute dtype; logprob_scale: magnitude M of the
    log-probs involved (`logprob_scale_bound`); reduction_length: longest reduction K (max of
    model width, MLP width and sequence length); accumulate_eps: the accumulator's epsilon if
    wider than eps; operands: the run rounds matmul operands narrower than the reference does.
    Derivation in the module docstring: 2 * 2 * (2 n_layers + 1) * stage_error * M.
    """
    if logprob_scale < 0 or n_layers < 0:
        raise ValueError("logprob_scale >= 0 and n_layers >= 0 required")
    stage = stage_error(eps, reduction_length, accumulate_eps=accumulate_eps, operands=operands)
    return 2.0 * 2.0 * error_stages(n_layers) * stage * float(logprob_scale)


def residual_atol(
    eps: float,
    *,
    residual_scale: float,
    n_layers: int,
    reduction_length: int,
    accumulate_eps: float | None = None,
    operands: bool = False,
) -> float:
    """Largest |difference| of a residual-stream entry between two correct float paths: the same
    error stages as `logprob_atol` (counted over all blocks: an upper bound for any layer),
    relative to the largest |entry| of the stream, twice for two runs."""
    stage = stage_error(eps, reduction_length, accumulate_eps=accumulate_eps, operands=operands)
    return 2.0 * error_stages(n_layers) * stage * float(residual_scale)


def fit_rtol(logprob_tol: float, logprob_scale: float) -> float:
    """Relative tolerance (to the scale of the compared column) of a statistic fitted on inputs
    known to within `logprob_tol` at size `logprob_scale` (least squares, ridge, mixed models,
    regression-based mediation, rank tests on those inputs). The size is M for log-probs
    themselves, or the spread of a derived input (e.g. the standard deviation of an outcome).

    The inputs' relative precision is rho = tol / size. A fit with condition number kappa returns
    estimates with relative error <= kappa * rho (first order); we admit fits with
    kappa <= 1 / sqrt(rho) -- beyond that, fewer than half of the inputs' significant digits
    survive and the statistic is not a reproducible number on any machine -- so the error is
    <= sqrt(rho) of the column's scale.
    """
    rho = float(logprob_tol) / max(float(logprob_scale), float(logprob_tol))
    return math.sqrt(rho)


def permutation_step(n_permutations: int) -> float:
    """A permutation p-value (1 + #{null >= observed}) / (n + 1) moves in steps of 1 / (n + 1):
    one step each time a null statistic within its float tolerance of the observed one lands on
    the other side. One such near-tie is admitted; two would mean the test is on a plateau of ties."""
    return 1.0 / (int(n_permutations) + 1)
