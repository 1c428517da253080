"""interp.wrap: models already in memory give the same numbers as interp.load on the same weights,
within tolerances derived from float error (tests/_tolerance.py) with the models' own depth, widths
and logit range; a one-weight edit moves them far past those tolerances (the check can fail)."""

import numpy as np
import pandas as pd
import pytest
import torch

import interp
from cache import Store, read_unit
from interp.core.errors import ConfigError
from interp.runner.scoring import ScoringConfig, score_continuations, score_options
from interp.studies.base import RunConfig

from _tolerance import bounds_for, continuation_tokens

PROMPTS = ["User: Is this wrong? Assistant: FINAL:", "The account says I returned the wallet. FINAL:"]
OPTIONS = ["wrong", "acceptable"]
CFG = ScoringConfig(prefix_reuse=False)


def _hf(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True), AutoTokenizer.from_pretrained(path)


CONTINUATION = (PROMPTS[0], " wrong thing")


@pytest.fixture(scope="module")
def reference(tiny_models):
    lm = interp.load(tiny_models["llama"])
    return lm, score_options(lm, PROMPTS, OPTIONS, layers=[2], cfg=CFG)


@pytest.fixture(scope="module")
def bound(tiny_models, reference):
    """(options' log-prob, residual, continuation sum) tolerances: the options pool their surface
    forms (with and without a leading space), each up to `tokens` tokens long."""
    tok = reference[0].tokenizer
    pairs = [(p, v + o) for p in PROMPTS for o in OPTIONS for v in ("", " ")] + [CONTINUATION]
    b = bounds_for(tiny_models["llama"], [c + o for c, o in pairs], tokens=continuation_tokens(tok, pairs[:-1]))
    return b.sum_logp, b.resid, continuation_tokens(tok, [CONTINUATION]) * b.logp


def test_wrap_hf_model_equals_load(tiny_models, reference, bound):
    lm, ref = reference
    logp_tol, resid_tol, cont_tol = bound
    model, tok = _hf(tiny_models["llama"])
    wrapped = interp.wrap(model, tok)
    got = score_options(wrapped, PROMPTS, OPTIONS, layers=[2], cfg=CFG)
    np.testing.assert_allclose(got.logp, ref.logp, rtol=0, atol=logp_tol)
    np.testing.assert_allclose(got.resid[2], ref.resid[2], rtol=0, atol=resid_tol)
    c_ref = score_continuations(lm, [(CONTINUATION[0], [CONTINUATION[1]])], cfg=CFG)
    c_got = score_continuations(wrapped, [(CONTINUATION[0], [CONTINUATION[1]])], cfg=CFG)
    np.testing.assert_allclose(c_got.sum_logp, c_ref.sum_logp, rtol=0, atol=cont_tol)
    assert wrapped.fingerprint.startswith("wrapped:") and wrapped.n_layers == lm.n_layers
    assert interp.wrap(_hf(tiny_models["llama"])[0], tok).fingerprint == wrapped.fingerprint  # same weights
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[0, 0] += 1.0
    edited = interp.wrap(model, tok)
    assert edited.fingerprint != wrapped.fingerprint  # changed weights, new identity
    moved = score_options(edited, PROMPTS, OPTIONS, layers=[2], cfg=CFG)  # control: far outside the tolerances
    assert np.abs(moved.logp - ref.logp).max() > 10 * logp_tol
    assert np.abs(moved.resid[2] - ref.resid[2]).max() > 10 * resid_tol


def test_wrap_transformer_lens_bridge(tiny_models, reference, bound):
    from transformer_lens.model_bridge import TransformerBridge

    _, ref = reference
    logp_tol, resid_tol, _ = bound
    bridge = TransformerBridge.boot_transformers(str(tiny_models["llama"]), device="cpu")
    _, tok = _hf(tiny_models["llama"])
    wrapped = interp.wrap(bridge, tok)
    assert wrapped.backend.name == "transformer_lens"
    got = score_options(wrapped, PROMPTS, OPTIONS, layers=[2], cfg=CFG)
    np.testing.assert_allclose(got.logp, ref.logp, rtol=0, atol=logp_tol)
    np.testing.assert_allclose(got.resid[2], ref.resid[2], rtol=0, atol=resid_tol)


def test_wrap_nnsight_model(tiny_models, reference, bound):
    from nnsight.modeling.transformers import TransformersModel

    _, ref = reference
    logp_tol, resid_tol, _ = bound
    model = TransformersModel(str(tiny_models["llama"]), task="text-generation", dispatch=True)
    wrapped = interp.wrap(model)  # the tokenizer the nnsight model carries
    assert wrapped.backend.name == "nnsight"
    got = score_options(wrapped, PROMPTS, OPTIONS, layers=[2], cfg=CFG)
    np.testing.assert_allclose(got.logp, ref.logp, rtol=0, atol=logp_tol)
    np.testing.assert_allclose(got.resid[2], ref.resid[2], rtol=0, atol=resid_tol)


def test_wrap_rejects_other_objects():
    with pytest.raises(ConfigError, match="cannot use a builtins.dict"):
        interp.wrap({}, None)


def test_sweep_on_wrapped_model(tiny_models, tmp_path):
    from sweeps.api import run_sweep

    path = tiny_models["gpt2"]
    cfg = RunConfig(max_items=2, n_boot=10)
    kw = dict(studies=["pressure"], banks=["factual"], cfg=cfg, progress=False, report=False)
    run_sweep([path], out=tmp_path / "dir", **kw)
    model, tok = _hf(path)
    run_sweep([interp.wrap(model, tok, name="gpt2")], out=tmp_path / "mem", **kw)
    a = pd.read_csv(tmp_path / "dir" / "results" / "pressure_trials.csv")
    b = pd.read_csv(tmp_path / "mem" / "results" / "pressure_trials.csv")
    # P(planted) = sigmoid of a difference of two pooled log-probs (log-sum-exp over the surface
    # forms: 1-Lipschitz), so |dP| <= 1/4 x 2 x T x the one-token bound; the logit range sampled on
    # the tokenizer's corpus, the reduction length the longest prompt the sweep scored
    from interp.testing import _CORPUS

    verdicts = [(" FINAL:", v + w) for w in ("true", "false") for v in ("", " ")]
    t = continuation_tokens(tok, verdicts)
    one = bounds_for(path, [" ".join(_CORPUS)], min_length=int(a["n_prompt_tokens"].max()) + t).logp
    np.testing.assert_allclose(b["p_planted"], a["p_planted"], rtol=0, atol=0.5 * t * one)
    unit = read_unit(Store(tmp_path / "mem" / "cache").units("pressure")[0])
    assert unit.attrs["checkpoint_fingerprint"].startswith("wrapped:") and unit.attrs["checkpoint_path"] == "in-memory"
    with pytest.raises(ConfigError, match="no directory fingerprint"):
        run_sweep([path, interp.wrap(model, tok, name="mem")], out=tmp_path / "mixed", **kw)
    run_sweep([path, interp.wrap(model, tok, name="mem")], out=tmp_path / "mixed", allow_unfingerprinted=True, **kw)
    assert set(pd.read_csv(tmp_path / "mixed" / "results" / "pressure_trials.csv")["checkpoint"]) == {"gpt2", "mem"}
