"""interp.core.tolerance: the derived bounds hold against an exact reference (a float64
forward of the same model) at float32 and bfloat16, and are not vacuous (a real change of the
computation exceeds them)."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from interp.core.tolerance import (
    EPS,
    error_stages,
    fit_rtol,
    logprob_atol,
    logprob_scale_bound,
    permutation_step,
    residual_atol,
)
from interp.testing import _CORPUS


def _logprobs(model, ids, dtype):
    m = model.to(dtype)
    with torch.no_grad():
        out = m(ids, output_hidden_states=True)
    return out.logits[0].double().log_softmax(-1), [h.double() for h in out.hidden_states]


@pytest.fixture(scope="module")
def reference(tiny_models, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_models["llama"]).eval()
    ids = tokenizer(" ".join(_CORPUS[:6]), return_tensors="pt").input_ids
    exact, hs = _logprobs(model, ids, torch.float64)
    cfg = model.config
    z = model.to(torch.float64)(ids).logits[0].detach()
    m = logprob_scale_bound(float((z.max(-1).values - z.min(-1).values).max()), cfg.vocab_size)
    k = max(cfg.hidden_size, cfg.intermediate_size, ids.shape[1])
    return model, ids, exact, hs, m, k, cfg.num_hidden_layers


@pytest.mark.parametrize("dtype,name", [(torch.float32, "float32"), (torch.bfloat16, "bfloat16")])
def test_bound_covers_one_run_against_exact(reference, dtype, name):
    """A single run is within half the two-run bound of the exact (float64) value."""
    model, ids, exact, hs, m, k, n_layers = reference
    got, got_hs = _logprobs(model, ids, dtype)
    acc = EPS["float32"] if dtype != torch.float32 else None  # CPU half-precision GEMMs accumulate in float32
    bound = logprob_atol(EPS[name], logprob_scale=m, n_layers=n_layers, reduction_length=k, accumulate_eps=acc)
    assert float((got - exact).abs().max()) <= bound / 2
    scale = max(float(h.abs().max()) for h in hs)
    rbound = residual_atol(EPS[name], residual_scale=scale, n_layers=n_layers, reduction_length=k, accumulate_eps=acc)
    assert max(float((a - b).abs().max()) for a, b in zip(got_hs, hs)) <= rbound / 2


def test_bound_is_below_a_real_change(reference):
    """Negative control: weights rounded to bfloat16 (computed in float32) move log-probs by more
    than the float32 bound; a bound loosened to that size fails here."""
    model, ids, exact, _, m, k, n_layers = reference
    bound = logprob_atol(EPS["float32"], logprob_scale=m, n_layers=n_layers, reduction_length=k)
    slipped = AutoModelForCausalLM.from_config(model.config)
    slipped.load_state_dict({n: p.to(torch.bfloat16).float() for n, p in model.float().state_dict().items()})
    got, _ = _logprobs(slipped.eval(), ids, torch.float32)
    assert float((got - exact).abs().max()) > bound


def test_formula_and_inputs():
    # 2 runs * 2 (log-softmax) * (2L + 1) stages * (sqrt(K) + 1) u * M, u = eps / 2
    assert error_stages(2) == 5
    u = EPS["float32"] / 2
    assert logprob_atol(EPS["float32"], logprob_scale=10.0, n_layers=2, reduction_length=64) == pytest.approx(
        4 * 5 * (8 + 1) * u * 10.0
    )
    assert logprob_scale_bound(3.0, 512) == pytest.approx(3.0 + math.log(512))
    assert fit_rtol(1e-4, 1.0) == pytest.approx(1e-2)
    assert permutation_step(5) == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        logprob_atol(0.0, logprob_scale=1.0, n_layers=1, reduction_length=1)
