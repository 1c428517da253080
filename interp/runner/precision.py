"""A reduced-precision run measures its own error: a seeded sample of what it scores, again in float32.

Inside `precision_audit(lm, seed=...)`, every `score_options` / `score_continuations` call on
`lm` re-scores a random sample of its prompts (items) in float32 on the same device: `fraction`
of them (at least one), drawn from `numpy.random.default_rng([seed, call])`. When the block ends
(`audit.finish()`; a sweep calls it at the end of each unit) and the calls' samples hold fewer
than `min_n` prompts, more are drawn from the block's unsampled prompts (`default_rng([seed,
calls, 1])`) and re-scored, so a unit has at least `min_n` (all when fewer) however its prompts are
split into calls: a per-call minimum re-scored every prompt of a classify unit (4 calls of 12).
The float32 reference is the same model with its bf16 copies switched off for `mixed-bf16`
(nothing loaded twice), and the checkpoint loaded again in float32 for plain bfloat16 / float16
(kept for the model's lifetime). The pairs go to `audit.table()` (analyses.precision
SAMPLE_COLUMNS), which a sweep stores in the unit and summarizes into OUT/results/precision.csv.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analyses.precision import SAMPLE_COLUMNS
from interp.model.loading import LoadedModel
from interp.runner.options import TIE_GUARD  # the guard's default, kept torch-free there

FRACTION = 0.02
MIN_N = 32
# The tie guard (`ScoringConfig.tie_guard`, default TIE_GUARD = 0.05): in a precision whose model
# can switch to float32 in place (mixed-bf16, float32-medium, mixed-bf16-medium), every prompt
# whose choices lie closer than this in probability (top choice minus runner-up, after the
# reduced-precision pass) is scored again in float32, and those numbers are kept. Why it removes
# the flips: if the reduced argmax i differs from float32's j, then
# P_i - P_j <= (P_i - P32_i) + (P32_j - P_j) <= 2 max|dP|, so a prompt whose reduced margin is at
# least 2 max|dP| cannot have flipped. 0.05 covers every prompt while max|dP| < 0.025, which the
# precision audit's bound (max |dP| <= 0.02, analyses.precision.BOUNDS) implies: a unit within
# the bounds has no flipped verdict, sampled or not, as far as the sample's max stands for all.
# The guard's cost is a float32 pass over its prompts without the tree's sharing of other
# prompts' prefixes (bank workload, mixed-bf16-medium, timed ad hoc inside score_options: 9 prompts
# of 1240, 1.6-1.8 s of a 26-33 s call; at 0.1, 18 prompts and 3 s). Unguarded on the bank workload (BENCHMARKS.md
# "Precisions"): max|dP| mixed-bf16-medium 0.019, mixed-bf16 0.037, each with flips on prompts
# 0.0004-0.0007 from a tie. Plain bfloat16 / float16 are not guarded (they would need a second,
# float32 copy of the checkpoint in memory).

_active: dict[int, "PrecisionAudit"] = {}  # id(lm.backend) -> audit
_busy: set[int] = set()  # id(lm.backend) of models re-scoring in float32 right now


@dataclass
class _Call:
    """What one audited call scored, kept until `finish` may draw more of its prompts."""

    number: int  # the call's index in the block (the sample table's `call`)
    kind: str  # "options" | "continuations"
    inputs: list  # prompts, or (context, continuations) items
    values: np.ndarray  # logp [N, K], or the flat sum_logp of every continuation
    options: list | None
    cfg: object
    hooks: object
    score: object  # scoring.score_options / score_continuations (passed in: no import circle)
    sampled: np.ndarray


@dataclass
class PrecisionAudit:
    lm: LoadedModel
    seed: int = 0
    fraction: float = FRACTION
    min_n: int = MIN_N
    calls: int = 0
    rows: list[tuple] = field(default_factory=list)
    guarded: int = 0  # prompts the tie guard re-scored in float32 (scoring.score_options)
    option_prompts: int = 0  # prompts scored by score_options in all
    _pending: list[_Call] = field(default_factory=list, repr=False)

    def sample(self, n: int) -> np.ndarray:
        k = min(n, math.ceil(self.fraction * n))
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        return np.sort(rng.choice(n, size=k, replace=False)) if k else np.zeros(0, dtype=int)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=list(SAMPLE_COLUMNS))

    def options(self, prompts, options, logp: np.ndarray, cfg, hooks, score, guarded: int = 0) -> None:
        self.guarded += int(guarded)
        self.option_prompts += len(prompts)
        self._record("options", list(prompts), logp, list(options), cfg, hooks, score)

    def continuations(self, items, sum_logp: np.ndarray, cfg, hooks, score) -> None:
        self._record("continuations", list(items), sum_logp, None, cfg, hooks, score)

    def _record(self, kind, inputs, values, options, cfg, hooks, score) -> None:
        idx = self.sample(len(inputs))
        call = _Call(self.calls - 1, kind, inputs, np.array(values, copy=True), options, cfg, hooks, score, idx)
        self._pending.append(call)
        self._measure(call, idx)

    def finish(self) -> None:
        """Top the block's sample up to `min_n` prompts (see the module doc); idempotent (the
        calls it drew from are dropped)."""
        have = sum(len(c.sampled) for c in self._pending)
        pool = [(j, i) for j, c in enumerate(self._pending) for i in np.setdiff1d(np.arange(len(c.inputs)), c.sampled)]
        k = min(self.min_n - have, len(pool))
        if k > 0:
            rng = np.random.default_rng([self.seed, self.calls, 1])
            extra = [pool[int(t)] for t in rng.choice(len(pool), size=k, replace=False)]
            for j, c in enumerate(self._pending):
                self._measure(c, np.array(sorted(i for jj, i in extra if jj == j), dtype=int))
        self._pending.clear()

    def _measure(self, c: _Call, idx: np.ndarray) -> None:
        """Re-score prompts `idx` of call `c` in float32 and add the pairs to `rows`."""
        if not len(idx):
            return
        with rescoring(self.lm), float32_reference(self.lm) as (ref, same):
            if c.hooks is not None and not same:
                return  # a steered run against an unsteered copy would measure the steering
            hooks = c.hooks if same else None
            if c.kind == "options":
                ref_logp = c.score(ref, [c.inputs[i] for i in idx], c.options, cfg=_plain(c.cfg), hooks=hooks).logp
                for r, i in enumerate(idx):
                    for k in range(len(c.options)):
                        self.rows.append((c.number, "options", int(i), k, float(c.values[i, k]), float(ref_logp[r, k])))
                return
            ref_sum = c.score(ref, [c.inputs[i] for i in idx], cfg=_plain(c.cfg), hooks=hooks).sum_logp
        starts = np.cumsum([0] + [len(cont) for _, cont in c.inputs])
        j = 0
        for i in idx:
            for k in range(len(c.inputs[i][1])):
                self.rows.append(
                    (c.number, "continuations", int(i), k, float(c.values[starts[i] + k]), float(ref_sum[j]))
                )
                j += 1


def _plain(cfg):
    """The same scoring, without residual capture or a progress bar (speed only, never numbers)."""
    return replace(cfg, capture_all_positions=False, progress=False)


@contextlib.contextmanager
def rescoring(lm: LoadedModel) -> Iterator[None]:
    """While `lm` re-scores in float32 (audit or tie guard), its calls are neither sampled nor guarded."""
    key = id(lm.backend)
    _busy.add(key)
    try:
        yield
    finally:
        _busy.discard(key)


@contextlib.contextmanager
def float32_reference(lm: LoadedModel) -> Iterator[tuple[LoadedModel, bool]]:
    """(float32 model, whether it is this very model: hooks such as steering apply too). A model
    with switchable copies (mixed-bf16*, float32-medium) is switched to float32 for the block; a
    plain bfloat16 / float16 model gets its checkpoint loaded again in float32 (kept)."""
    if _switchable(lm):
        from interp.runner.mixed import full_precision

        with full_precision(lm.backend.precision_model):
            yield lm, True
        return
    yield _float32_copy(lm), False


def _switchable(lm: LoadedModel) -> bool:
    """The model has reduced-precision copies that `full_precision` switches off (interp.runner.mixed)."""
    from interp.runner.mixed import is_mixed

    model = getattr(lm.backend, "precision_model", None)
    return model is not None and is_mixed(model)


def _float32_copy(lm: LoadedModel) -> LoadedModel:
    ref = getattr(lm.backend, "_interp_fp32_reference", None)
    if ref is None:
        from interp.model.loading import load

        if not lm.info.path.is_dir():
            from interp.core.errors import ConfigError

            raise ConfigError(
                f"{lm.info.path}: a {lm.dtype} model in memory has no float32 checkpoint to measure its "
                "precision against; load it from its directory or use --dtype mixed-bf16"
            )
        ref = load(
            lm.info.path, backend=lm.backend.name, dtype="float32", device=lm.device, allow_pickle=lm.info.pickled
        )
        lm.backend._interp_fp32_reference = ref
    return ref


@contextlib.contextmanager
def precision_audit(
    lm: LoadedModel, *, seed: int = 0, fraction: float = FRACTION, min_n: int = MIN_N
) -> Iterator[PrecisionAudit]:
    """Sample and re-score in float32 whatever `lm` scores inside the block (see the module doc)."""
    audit = PrecisionAudit(lm=lm, seed=seed, fraction=fraction, min_n=min_n)
    key = id(lm.backend)
    before = _active.get(key)
    _active[key] = audit
    try:
        yield audit
        audit.finish()
    finally:
        if before is None:
            _active.pop(key, None)
        else:
            _active[key] = before


def guard_ties(
    lm: LoadedModel, prompts, options, logp: np.ndarray, resid: dict, layers, cfg, hooks, score
) -> np.ndarray:
    """Re-score in float32 the prompts within `cfg.tie_guard` of a tie (see TIE_GUARD), writing
    their log-probs into `logp` and their residuals into `resid` in place; returns their indices
    (empty where the precision is float32, not switchable, or the guard is 0)."""
    if not cfg.tie_guard or not len(logp) or id(lm.backend) in _busy or not _switchable(lm):
        return np.zeros(0, dtype=int)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top2 = np.sort(p, axis=1)[:, -2:]
    idx = np.flatnonzero(top2[:, 1] - top2[:, 0] < cfg.tie_guard)
    if not len(idx):
        return idx
    with rescoring(lm), float32_reference(lm) as (ref, _):
        out = score(
            ref, [prompts[i] for i in idx], options, layers=layers, cfg=replace(cfg, progress=False), hooks=hooks
        )
    logp[idx] = out.logp
    for layer, values in resid.items():
        for r, i in enumerate(idx):
            values[i] = out.resid[layer][r]
    return idx


def active_audit(lm: LoadedModel) -> PrecisionAudit | None:
    audit = _active.get(id(lm.backend))
    return None if audit is None or id(lm.backend) in _busy else audit


def audited(lm: LoadedModel, dtype: str | None = None, **kw) -> contextlib.AbstractContextManager:
    """`precision_audit` when `lm` runs in a reduced precision, else nothing."""
    from interp.model.devices import is_reduced

    return precision_audit(lm, **kw) if is_reduced(dtype or lm.dtype) else contextlib.nullcontext()


__all__: Sequence[str] = (
    "PrecisionAudit",
    "precision_audit",
    "active_audit",
    "audited",
    "float32_reference",
    "guard_ties",
    "FRACTION",
    "MIN_N",
    "TIE_GUARD",
)
