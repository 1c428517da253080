"""Devices and precision: bfloat16 against float32 within a derived bound, no tensor made on a
fixed device, device/dtype names checked early, precision in the unit identity."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import interp
from interp.core.errors import ConfigError
from interp.runner.scoring import ScoringConfig, score_continuations, score_options

from _tolerance import option_bounds

PROMPTS = [
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Are you sure? FINAL:",
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Okay, thanks. FINAL:",
    "मैं हिंदी बोलता हूँ। उत्तर:",
]
# "triangularity" is several tokens in the test tokenizer: the multi-token extension path runs too
OPTIONS = ["wrong", "acceptable triangularity"]
CFG = ScoringConfig(min_shared_prefix=4, min_saved_tokens=1)  # prefix-tree nodes run as well


@pytest.fixture(scope="module")
def runs(tiny_models):
    out = {}
    for dtype in ("float32", "bfloat16", "float16"):
        lm = interp.load(tiny_models["llama"], dtype=dtype)
        assert next(lm.backend.model.parameters()).dtype == getattr(torch, dtype)
        out[dtype] = (lm, score_options(lm, PROMPTS, OPTIONS, layers=[1, 3], cfg=CFG))
    return out


def _max_abs_logit(lm) -> float:
    ids = torch.tensor([lm.tokenizer(p)["input_ids"] for p in PROMPTS[:1]])
    with torch.no_grad():
        return float(lm.backend.model(ids).logits.abs().max())


def test_bfloat16_equals_float32_within_derived_tolerance(runs):
    """Bound: bf16 keeps 8 significant bits, unit roundoff u = 2^-8. A logit passes through
    K = 2 L + 3 rounded stages (embedding, two residual branches per block, final norm, head);
    independent rounding errors add in quadrature, so |d logit| <~ sqrt(K) u max|logit|, and
    a log-prob (logit - logsumexp) moves by at most twice that. resid_pre of block l has passed
    2 l + 1 stages; its relative error is held to the worst case (2 l + 1) u (norms can amplify)."""
    lm32, f = runs["float32"]
    _, b = runs["bfloat16"]
    u = 2.0**-8
    K = 2 * lm32.n_layers + 3
    tol = 2 * math.sqrt(K) * u * _max_abs_logit(lm32)
    err = np.abs(b.logp - f.logp).max()
    assert 0 < err <= tol, (err, tol)  # > 0: the bf16 weights were really used
    for layer in (1, 3):
        rel = np.linalg.norm(b.resid[layer] - f.resid[layer], axis=-1) / np.linalg.norm(f.resid[layer], axis=-1)
        assert rel.max() <= (2 * layer + 1) * u, (layer, rel.max())
    np.testing.assert_allclose(b.probs.sum(axis=1), 1.0, atol=1e-9)  # log-softmax stays float32


def test_error_scales_with_mantissa(runs):
    """float16 keeps 11 significant bits to bfloat16's 8: its error should be about 2^3 = 8
    times smaller. A factor between 2 and 32 allows for the error's randomness; a dtype that
    was silently ignored (both 0) or misapplied (equal errors) fails."""
    _, f = runs["float32"]
    e_bf16 = np.abs(runs["bfloat16"][1].logp - f.logp).max()
    e_fp16 = np.abs(runs["float16"][1].logp - f.logp).max()
    assert e_fp16 > 0 and 2 < e_bf16 / e_fp16 < 32, (e_bf16, e_fp16)


# nnsight is not in this list: its own tracer makes device-less tensors while it runs (library
# code, not ours), so the trap fires inside nnsight whatever we do; bench/gpu_check.sh covers it
@pytest.mark.parametrize("backend", ["hf", "transformer_lens"])
def test_no_tensor_made_on_a_fixed_device(backend, tiny_models):
    """With the default device set to `meta`, any tensor the engine or a backend makes without
    naming the model's device is a meta tensor: it either meets the CPU weights (an error) or
    reaches the read-out (meta has no data: an error). Tensors made on the model's device are
    unaffected, so the numbers must equal a normal run. (Fails on the code before this change:
    `torch.tensor(row)` in the batcher.)"""
    lm = interp.load(tiny_models["llama"], backend=backend)
    ref = score_options(lm, PROMPTS, OPTIONS, layers=[2], cfg=CFG)
    items = [("The people of this town are", [" hardworking", " lazy triangularity"])]
    ref_c = score_continuations(lm, items, layers=[2])
    torch.set_default_device("meta")
    try:
        got = score_options(lm, PROMPTS, OPTIONS, layers=[2], cfg=CFG)
        got_c = score_continuations(lm, items, layers=[2])
    finally:
        torch.set_default_device("cpu")
    np.testing.assert_array_equal(got.logp, ref.logp)
    np.testing.assert_array_equal(got.resid[2], ref.resid[2])
    np.testing.assert_array_equal(got_c.sum_logp, ref_c.sum_logp)


def test_meta_default_device_is_a_real_trap():
    """The trap above catches what it claims to: a tensor made without a device cannot be read."""
    torch.set_default_device("meta")
    try:
        t = torch.tensor([1, 2])
    finally:
        torch.set_default_device("cpu")
    assert t.device.type == "meta"
    with pytest.raises(NotImplementedError):
        t.cpu()


def test_device_names():
    from interp.model.devices import device_class, resolve_device

    assert resolve_device("cpu") == "cpu" and resolve_device("auto") in ("cpu", "cuda")
    assert device_class("cuda:3") == "cuda" and device_class("CPU") == "cpu"
    with pytest.raises(ConfigError, match="unknown"):
        resolve_device("tpu7")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            resolve_device("cuda:0")


def test_bad_dtype_and_device_are_one_line_errors(tiny_models):
    with pytest.raises(ConfigError, match="dtype 'float8'"):
        interp.load(tiny_models["llama"], dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            interp.load(tiny_models["llama"], device="cuda")


def test_precision_is_part_of_the_unit_identity(tiny_models):
    from interp.studies.base import RunConfig
    from sweeps.plan import plan_units

    def ident(**kw):
        (u,) = plan_units([tiny_models["llama"]], ["pressure"], banks=["moral"], cfg=RunConfig(max_items=2, **kw))
        return u.identity

    base = ident()
    assert ident(dtype="bfloat16").hash != base.hash
    assert ident(device="cuda").hash != base.hash  # planned, not run: the driver needs no GPU
    assert ident(device="cuda:1").hash == ident(device="cuda").hash  # the index changes no number
    assert ident(threads=1).hash == base.hash


def test_cli_rejects_a_bad_dtype_before_planning():
    from _cli_process import run_cli_process

    res = run_cli_process(
        [
            "sweep",
            "x",
            "--study",
            "pressure",
            "--out",
            "/nonexistent",
            "--dtype",
            "int3",
        ],
        timeout=300,
    )
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "dtype" in res.stderr and "int3" in res.stderr and "float32" in res.stderr  # names the field and choices


@pytest.mark.parametrize("backend", ["hf", "transformer_lens", "nnsight"])
def test_device_map_passes_through(backend, tiny_models):
    """A device map goes to accelerate (`auto` here places everything on the only device, the CPU);
    the hooks still read every block and the numbers do not change."""
    ref = score_options(interp.load(tiny_models["llama"]), PROMPTS, OPTIONS, layers=[1], cfg=CFG)
    lm = interp.load(tiny_models["llama"], backend=backend, device_map="auto")
    assert lm.device_map == "auto" and lm.device_class == "cpu"
    got = score_options(lm, PROMPTS, OPTIONS, layers=[1], cfg=CFG)
    bound = option_bounds(tiny_models["llama"], lm.tokenizer, PROMPTS, OPTIONS)  # derived from float error
    np.testing.assert_allclose(got.logp, ref.logp, rtol=0, atol=bound.sum_logp)
    np.testing.assert_allclose(got.resid[1], ref.resid[1], rtol=0, atol=bound.resid)
