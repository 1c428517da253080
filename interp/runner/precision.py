"""A reduced-precision run measures its own error: a seeded sample of what it scores, again in float32.

Inside `precision_audit(lm, seed=...)`, every `score_options` / `score_continuations` call on
`lm` re-scores a random sample of its prompts (items) in float32 on the same device: `fraction`
of them, at least `min_n` (all when fewer), drawn from `numpy.random.default_rng([seed, call])`.
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
from interp.loading import LoadedModel

FRACTION = 0.02
MIN_N = 32

_active: dict[int, "PrecisionAudit"] = {}  # id(lm.backend) -> audit


@dataclass
class PrecisionAudit:
    lm: LoadedModel
    seed: int = 0
    fraction: float = FRACTION
    min_n: int = MIN_N
    calls: int = 0
    rows: list[tuple] = field(default_factory=list)
    busy: bool = False  # re-scoring: the reference's own calls are not sampled

    def sample(self, n: int) -> np.ndarray:
        k = min(n, max(self.min_n, math.ceil(self.fraction * n)))
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        return np.sort(rng.choice(n, size=k, replace=False)) if k else np.zeros(0, dtype=int)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=list(SAMPLE_COLUMNS))

    @contextlib.contextmanager
    def reference(self) -> Iterator[tuple[LoadedModel, bool]]:
        """(float32 model, whether it is this very model: hooks such as steering apply too)."""
        model = getattr(self.lm.backend, "precision_model", None)
        if model is not None and getattr(model, "_interp_mixed_state", None) is not None:
            from interp.runner.mixed import full_precision

            with full_precision(model):
                yield self.lm, True
            return
        yield _float32_copy(self.lm), False

    # `score` is the scoring function that called (scoring.score_options / score_continuations):
    # passed in so that this module never imports scoring, which imports it (no import circle)
    def options(self, prompts, options, logp: np.ndarray, cfg, hooks, score) -> None:
        idx = self.sample(len(prompts))
        call = self.calls - 1
        if not len(idx):
            return
        with self._rescoring(), self.reference() as (ref, same):
            if hooks is not None and not same:
                return  # a steered run against an unsteered copy would measure the steering
            ref_logp = score(
                ref, [prompts[i] for i in idx], options, cfg=_plain(cfg), hooks=hooks if same else None
            ).logp
        for r, i in enumerate(idx):
            for k in range(len(options)):
                self.rows.append((call, "options", int(i), k, float(logp[i, k]), float(ref_logp[r, k])))

    def continuations(self, items, sum_logp: np.ndarray, cfg, hooks, score) -> None:
        idx = self.sample(len(items))
        call = self.calls - 1
        if not len(idx):
            return
        starts = np.cumsum([0] + [len(c) for _, c in items])
        with self._rescoring(), self.reference() as (ref, same):
            if hooks is not None and not same:
                return
            ref_sum = score(ref, [items[i] for i in idx], cfg=_plain(cfg), hooks=hooks if same else None).sum_logp
        j = 0
        for i in idx:
            for k in range(len(items[i][1])):
                self.rows.append((call, "continuations", int(i), k, float(sum_logp[starts[i] + k]), float(ref_sum[j])))
                j += 1

    @contextlib.contextmanager
    def _rescoring(self):
        self.busy = True
        try:
            yield
        finally:
            self.busy = False


def _plain(cfg):
    """The same scoring, without residual capture or a progress bar (speed only, never numbers)."""
    return replace(cfg, capture_all_positions=False, progress=False)


def _float32_copy(lm: LoadedModel) -> LoadedModel:
    ref = getattr(lm.backend, "_interp_fp32_reference", None)
    if ref is None:
        from interp.loading import load

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
    finally:
        if before is None:
            _active.pop(key, None)
        else:
            _active[key] = before


def active_audit(lm: LoadedModel) -> PrecisionAudit | None:
    audit = _active.get(id(lm.backend))
    return None if audit is None or audit.busy else audit


def audited(lm: LoadedModel, dtype: str | None = None, **kw) -> contextlib.AbstractContextManager:
    """`precision_audit` when `lm` runs in a reduced precision, else nothing."""
    from interp.devices import is_reduced

    return precision_audit(lm, **kw) if is_reduced(dtype or lm.dtype) else contextlib.nullcontext()


__all__: Sequence[str] = ("PrecisionAudit", "precision_audit", "active_audit", "audited", "FRACTION", "MIN_N")
