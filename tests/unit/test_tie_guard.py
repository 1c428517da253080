"""The tie guard: a switchable reduced precision re-scores its near-ties in float32.

Planted answers on a tiny random model, whose verdicts are spread from near-ties to clear ones:
the guard re-scores exactly the prompts whose reduced-precision margin lies below it, their
log-probs and residuals become float32's bit for bit and the others stay the unguarded run's bit
for bit; with the guard at 2 max|dP| or more, no verdict differs from float32's, where the same
run unguarded (the negative control) flips some. float32 and plain bfloat16 are never guarded.
"""

from __future__ import annotations

import numpy as np
import pytest

import interp
from interp.core.errors import ConfigError
from interp.runner.options import TIE_GUARD, ScoringConfig
from interp.runner.precision import precision_audit
from interp.runner.scoring import score_options

WORDS = ["kept", "found", "took", "sold", "gave", "hid", "lost", "broke", "fixed", "shared"]
THINGS = ["wallet", "bike", "phone", "ring", "book", "coat", "key", "letter"]
PROMPTS = [f"User: I {w} the {t}. Is that wrong? FINAL:" for w in WORDS for t in THINGS]  # 80
OPTIONS = ["wrong", "acceptable"]
LAYERS = [0, 3]


def _margin(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    top2 = np.sort(p, 1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def _probs(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def scored(tiny_models):
    path = tiny_models["llama"]
    f32 = score_options(interp.load(path), PROMPTS, OPTIONS, layers=LAYERS, cfg=ScoringConfig(tie_guard=0.0))
    lm = interp.load(path, dtype="mixed-bf16")
    raw = score_options(lm, PROMPTS, OPTIONS, layers=LAYERS, cfg=ScoringConfig(tie_guard=0.0))
    return lm, f32, raw


def test_guard_rescores_exactly_the_near_ties_in_float32(scored):
    lm, f32, raw = scored
    margin = _margin(raw.logp)
    guard = float(np.median(margin))  # half the prompts below it: a selection that can go wrong both ways
    want = np.flatnonzero(margin < guard)
    assert 0 < len(want) < len(PROMPTS)
    got = score_options(lm, PROMPTS, OPTIONS, layers=LAYERS, cfg=ScoringConfig(tie_guard=guard))
    np.testing.assert_array_equal(got.tie_guarded, want)
    rest = np.setdiff1d(np.arange(len(PROMPTS)), want)
    # the re-scored prompts are float32's (the float32 run of 40 prompts against 80 together:
    # the same rows, batched otherwise; so float32 rounding apart, far below the bf16 change)
    bf16_change = np.abs(raw.logp[want] - f32.logp[want]).max()
    assert bf16_change > 0
    np.testing.assert_allclose(got.logp[want], f32.logp[want], rtol=0, atol=bf16_change / 100)
    for layer in LAYERS[1:]:  # block 3's input: moved by the bf16 blocks before it, restored
        moved = np.abs(raw.resid[layer][want] - f32.resid[layer][want]).max()
        assert moved > 0
        np.testing.assert_allclose(got.resid[layer][want], f32.resid[layer][want], rtol=0, atol=moved / 100)
        np.testing.assert_array_equal(got.resid[layer][rest], raw.resid[layer][rest])
    np.testing.assert_array_equal(got.logp[rest], raw.logp[rest])  # the others: the unguarded run's
    np.testing.assert_allclose(got.probs.sum(1), 1.0, atol=1e-12)


def _coarse(path):
    """mixed-bf16 whose copies keep 2 significant bits: errors large enough to flip verdicts of
    this model (its float32 margins: median ~0.4), where true bf16 moves them by < 0.01."""
    import torch

    from interp.runner.mixed import ATTR

    lm = interp.load(path, dtype="mixed-bf16")
    for module in lm.backend.model.modules():
        if hasattr(module, ATTR):
            m, e = torch.frexp(getattr(module, ATTR).float())
            setattr(module, ATTR, torch.ldexp(torch.round(m * 4) / 4, e).to(torch.bfloat16))
    return lm


def test_a_guard_above_twice_the_largest_change_leaves_no_flip(scored, tiny_models):
    _, f32, _ = scored
    lm = _coarse(tiny_models["llama"])
    raw = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(tie_guard=0.0))
    dp = np.abs(_probs(raw.logp) - _probs(f32.logp)).max()
    flips = raw.logp.argmax(1) != f32.logp.argmax(1)
    assert flips.sum() >= 5, "control: the unguarded coarse copies must flip verdicts"
    # a flipped prompt's reduced margin is at most 2 max|dP| (interp.runner.precision): the bound holds
    assert (_margin(raw.logp)[flips] <= 2 * dp).all()
    got = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(tie_guard=min(0.999, 2 * dp * 1.01)))
    assert (got.logp.argmax(1) == f32.logp.argmax(1)).all()
    # the smallest guard that covers every flipped prompt leaves none either, and re-scores fewer
    least = float(_margin(raw.logp)[flips].max()) * 1.01
    just = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(tie_guard=least))
    assert (just.logp.argmax(1) == f32.logp.argmax(1)).all() and len(just.tie_guarded) <= len(got.tie_guarded)
    # a guard below the flipped prompts' margins keeps them (negative control of the guard itself)
    low = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(tie_guard=float(_margin(raw.logp)[flips].min()) / 2))
    assert (low.logp.argmax(1) != f32.logp.argmax(1)).any()


def test_float32_and_plain_bf16_are_never_guarded(tiny_models):
    prompts = PROMPTS[:8]
    for dtype in ("float32", "bfloat16"):
        lm = interp.load(tiny_models["llama"], dtype=dtype)
        on = score_options(lm, prompts, OPTIONS, cfg=ScoringConfig(tie_guard=0.9))
        off = score_options(lm, prompts, OPTIONS, cfg=ScoringConfig(tie_guard=0.0))
        assert len(on.tie_guarded) == 0
        np.testing.assert_array_equal(on.logp, off.logp)


def test_audit_counts_the_guarded_and_samples_the_published_numbers(scored):
    lm, f32, raw = scored
    with precision_audit(lm, seed=1) as audit:
        got = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(tie_guard=0.3))  # a dozen guarded
    assert audit.guarded == len(got.tie_guarded) > 0 and audit.option_prompts == len(PROMPTS)
    table = audit.table()
    assert table["call"].nunique() == 1  # the guard's own float32 call was not sampled
    rows = table[table["index"].isin(got.tie_guarded)]
    assert len(rows)
    # guarded prompts are float32 on both sides (batched otherwise: float32 rounding apart)
    atol = np.abs(raw.logp - f32.logp).max() / 100
    np.testing.assert_allclose(rows["logp"], rows["logp_fp32"], rtol=0, atol=atol)


def test_tie_guard_is_validated_and_in_the_identity_of_switchable_precisions_only(tiny_models):
    from interp.studies.base import RunConfig
    from sweeps.plan import plan_units

    from analyses.precision import BOUNDS

    # a unit within the audit's bound (max |dP| <= 0.02) cannot have a flip outside the guard
    assert TIE_GUARD == ScoringConfig().tie_guard > 2 * BOUNDS["max_abs_dp"]
    for bad in (-0.1, 1.0):
        with pytest.raises(ConfigError, match="tie-guard"):
            ScoringConfig(tie_guard=bad)

    def ident(dtype, guard):
        cfg = RunConfig(max_items=2, dtype=dtype, scoring=ScoringConfig(tie_guard=guard))
        (u,) = plan_units([tiny_models["llama"]], ["pressure"], banks=["moral"], cfg=cfg)
        return u.identity.hash

    assert ident("float32", 0.1) == ident("float32", 0.0)  # float32 units keep their identity
    assert ident("bfloat16", 0.1) == ident("bfloat16", 0.0)  # never guarded
    for dtype in ("mixed-bf16", "float32-medium", "mixed-bf16-medium"):
        assert ident(dtype, 0.1) != ident(dtype, 0.0)
