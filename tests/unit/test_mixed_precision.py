"""`--dtype mixed-bf16`: bf16 matmul operands, float32 everywhere else, against float32.

Planted answers: on operands that bf16 represents exactly, a mixed Linear equals the float64
product to float32 accumulation error (plain bf16 rounds its output: the negative control);
the embedding's output (resid_pre of block 0) is bit-equal to float32; switching the copies
off gives float32 bit for bit. On a whole model the log-probs stay within a bound derived from
bf16's unit roundoff, which operands rounded to float8 (a broken copy) exceed."""

from __future__ import annotations

import re

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import interp
from _tolerance import assert_tenth_of_bf16_error
from interp.runner.mixed import ATTR, full_precision, make_mixed
from interp.runner.scoring import ScoringConfig, score_options

PROMPTS = [
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Are you sure? FINAL:",
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Okay, thanks. FINAL:",
    "The committee met on Tuesday and voted. FINAL:",
]
OPTIONS = ["wrong", "acceptable"]
# unguarded: these tests measure the reduced precisions' own error (the tie guard would re-score
# the tiny random model's near-ties in float32; tests/unit/test_tie_guard.py)
CFG = ScoringConfig(variants="exact", tie_guard=0.0)
U_BF16 = 2.0**-8  # bf16: 8 significant bits, unit roundoff 2^-8 (as in tests/unit/test_devices.py)
U_FP32 = 2.0**-24


def _bf16_exact(shape, gen) -> torch.Tensor:
    return torch.randn(shape, generator=gen).to(torch.bfloat16).float()  # representable in bf16


def test_mixed_linear_rounds_only_the_product(monkeypatch):
    """x and W representable in bf16: each product is exact in float32 (8 x 8 significant bits)
    and accumulates in float32; the CPU kernel returns the sum rounded to bf16 (<= u |xW|), and
    the bias is added in float32 after it. So |mixed - exact| <= u |xW| + k u32 sum|x||w| +
    u32 |y|. Plain bf16 adds the bias in bf16 too: with a bias of ~100 its output rounding is
    ~u 100, far beyond that bound (negative control)."""
    gen = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(64, 48)
    with torch.no_grad():
        lin.weight.copy_(_bf16_exact((48, 64), gen))
        lin.bias.copy_(100 + torch.randn(48, generator=gen))
    x = _bf16_exact((5, 64), gen)
    prod = x.double() @ lin.weight.double().T
    exact = prod + lin.bias.double()
    bound = U_BF16 * prod.abs() + 64 * U_FP32 * (x.double().abs() @ lin.weight.double().abs().T) + U_FP32 * exact.abs()
    plain = F.linear(x.bfloat16(), lin.weight.bfloat16(), lin.bias.bfloat16()).double()
    model = torch.nn.Sequential(lin)
    assert make_mixed(model) == 1 and make_mixed(model) == 0  # idempotent
    mixed = model(x)
    assert mixed.dtype == torch.float32 and getattr(lin, ATTR).dtype == torch.bfloat16
    assert ((mixed.double() - exact).abs() <= bound).all()
    assert ((plain - exact).abs() > bound).any()  # the negative control fails the bound
    with full_precision(model):
        torch.testing.assert_close(model(x), F.linear(x, lin.weight, lin.bias), rtol=0, atol=0)


def test_mixed_conv1d_matches_linear():
    from transformers.pytorch_utils import Conv1D

    gen = torch.Generator().manual_seed(1)
    conv = Conv1D(48, 64)
    with torch.no_grad():
        conv.weight.copy_(_bf16_exact((64, 48), gen))
        conv.bias.copy_(torch.randn(48, generator=gen))
    x = _bf16_exact((2, 3, 64), gen)
    prod = x.double() @ conv.weight.double()
    exact = prod + conv.bias.double()
    bound = U_BF16 * prod.abs() + 64 * U_FP32 * (x.double().abs() @ conv.weight.double().abs()) + U_FP32 * exact.abs()
    model = torch.nn.Sequential(conv)
    assert make_mixed(model) == 1
    out = model(x)
    assert out.shape == (2, 3, 48) and ((out.double() - exact).abs() <= bound).all()


@pytest.fixture(scope="module")
def runs(tiny_models):
    out = {}
    for dtype in ("float32", "mixed-bf16", "bfloat16"):
        lm = interp.load(tiny_models["llama"], dtype=dtype)
        out[dtype] = (lm, score_options(lm, PROMPTS, OPTIONS, layers=[0, 3], cfg=CFG))
    return out


def _max_abs_logit(lm) -> float:
    ids = torch.tensor([lm.tokenizer(p)["input_ids"] for p in PROMPTS[:1]])
    with torch.no_grad(), full_precision(lm.backend.model):
        return float(lm.backend.model(ids).logits.abs().max())


def _bound(lm) -> float:
    """A logit passes through K = 6 L rounded matmul operand pairs (q, v, o, gate, up, down per
    block; the key projection and the head are float32). Each rounds two operands by <= u (relative), so a product
    moves by <= 2u of its size; independent errors add in quadrature: |d logit| <~
    2 sqrt(K) u max|logit|, and a log-prob (logit - logsumexp) by at most twice that."""
    return 2 * 2 * math.sqrt(6 * lm.n_layers) * U_BF16 * _max_abs_logit(lm)


def test_mixed_within_derived_bound_and_float32_where_promised(runs):
    lm32, f = runs["float32"]
    lmm, m = runs["mixed-bf16"]
    assert next(lmm.backend.model.parameters()).dtype == torch.float32  # weights stay float32
    assert lmm.backend.model.get_output_embeddings().forward.__func__ is torch.nn.Linear.forward  # head float32
    named = dict(lmm.backend.model.named_modules())
    assert all(not hasattr(m, ATTR) for n, m in named.items() if n.endswith("k_proj"))  # keys float32
    assert all(hasattr(m, ATTR) for n, m in named.items() if n.endswith(("q_proj", "down_proj")))
    err = np.abs(m.logp - f.logp).max()
    assert 0 < err <= _bound(lm32), (err, _bound(lm32))  # > 0: the bf16 copies were really used
    # the embedding and the residual stream are float32: resid_pre of block 0 is bit-equal
    np.testing.assert_array_equal(m.resid[0], f.resid[0])
    _, b = runs["bfloat16"]
    assert np.abs(b.resid[0] - f.resid[0]).max() > 0  # plain bf16 rounds it (negative control)
    np.testing.assert_allclose(m.probs.sum(axis=1), 1.0, atol=1e-12)
    with full_precision(lmm.backend.model):
        again = score_options(lmm, PROMPTS, OPTIONS, layers=[0, 3], cfg=CFG)
    np.testing.assert_array_equal(again.logp, f.logp)


def _round_bits(w: torch.Tensor, bits: int) -> torch.Tensor:
    """w rounded to `bits` significant bits (unit roundoff 2^-bits)."""
    m, e = torch.frexp(w.float())
    return torch.ldexp(torch.round(m * 2**bits) / 2**bits, e)


def test_a_broken_copy_exceeds_the_bound(runs, tiny_models):
    """Copies that keep 2 significant bits (u = 2^-2, 64 x bf16's: a path that loses far more
    than it claims) must fail the same bound: it is tight enough to catch a wrong precision."""
    lm32, f = runs["float32"]
    lm = interp.load(tiny_models["llama"], dtype="mixed-bf16")
    for module in lm.backend.model.modules():
        if hasattr(module, ATTR):
            setattr(module, ATTR, _round_bits(getattr(module, ATTR), 2).to(torch.bfloat16))
    broken = score_options(lm, PROMPTS, OPTIONS, cfg=CFG)
    assert np.abs(broken.logp - f.logp).max() > _bound(lm32)


def test_mixed_is_a_dtype_name_with_its_own_unit_identity(tiny_models):
    from interp.model.devices import is_reduced, matmul_dtype, torch_dtype
    from interp.studies.base import RunConfig
    from sweeps.plan import plan_units

    assert torch_dtype("mixed-bf16") == torch.float32 and matmul_dtype("mixed-bf16") == torch.bfloat16
    assert is_reduced("mixed-bf16") and is_reduced("bfloat16") and not is_reduced("float32")

    def ident(**kw):
        (u,) = plan_units([tiny_models["llama"]], ["pressure"], banks=["moral"], cfg=RunConfig(max_items=2, **kw))
        return u.identity.hash

    hashes = {ident(dtype=d) for d in ("float32", "bfloat16", "mixed-bf16", "float32-medium", "mixed-bf16-medium")}
    assert len(hashes) == 5
    assert is_reduced("float32-medium") and matmul_dtype("float32-medium") == torch.float32


def test_float32_medium_sets_the_matmul_precision_around_block_linears_only(runs, tiny_models, monkeypatch):
    """`float32-medium`: float32 weights; each block Linear runs at torch's "medium" float32 matmul
    precision, set around that call only (the process-wide setting is restored; the head keeps
    it), or at the process's own where "medium" rounds operands to bf16; switched off it is float32
    bit for bit; and its error against float32 is a tenth of the bf16 operands' or less (zero on a
    CPU without a reduced-precision float32 path)."""
    import torch.nn.modules.linear as linear_mod

    from interp.runner.mixed import medium_rounds_operands

    lm32, f = runs["float32"]
    _, m = runs["mixed-bf16"]
    lm = interp.load(tiny_models["llama"], dtype="float32-medium")
    model = lm.backend.model
    # where "medium" rounds operands to bf16 (interp.runner.mixed.make_float32_medium) it stays float32
    level = torch.get_float32_matmul_precision() if medium_rounds_operands(model) else "medium"
    assert next(model.parameters()).dtype == torch.float32
    levels: dict[int, set] = {}
    real = linear_mod.F.linear

    def spy(x, w, b=None):
        levels.setdefault(id(w), set()).add(torch.get_float32_matmul_precision())
        return real(x, w, b)

    before = torch.get_float32_matmul_precision()
    monkeypatch.setattr(linear_mod.F, "linear", spy)
    med = score_options(lm, PROMPTS, OPTIONS, layers=[0, 3], cfg=CFG)
    monkeypatch.setattr(linear_mod.F, "linear", real)
    assert torch.get_float32_matmul_precision() == before
    named = dict(model.named_modules())
    blocks = [mod for n, mod in named.items() if n.endswith(("q_proj", "k_proj", "down_proj"))]
    assert blocks and all(levels[id(mod.weight)] == {level} for mod in blocks)
    assert levels[id(model.get_output_embeddings().weight)] == {before}  # the head: untouched
    assert_tenth_of_bf16_error(med, f, m)
    with full_precision(model):
        again = score_options(lm, PROMPTS, OPTIONS, layers=[0, 3], cfg=CFG)
    np.testing.assert_array_equal(again.logp, f.logp)


def _attention_inputs(gen: torch.Generator, B=2, H=4, Hkv=2, L=5, S=9, D=8):
    q = torch.randn(B, H, L, D, generator=gen)
    k, v = torch.randn(B, Hkv, S, D, generator=gen), torch.randn(B, Hkv, S, D, generator=gen)
    return q, k, v


class _AttentionStub(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True
        self._interp_mixed_state = type("S", (), {"on": True})()


@pytest.mark.parametrize("mask", ["causal", "bool", "float"])
def test_medium_attention_equals_sdpa(monkeypatch, mask):
    """`_medium_attention` (the float32-medium attention) with its matmuls at "highest" equals
    transformers' SDPA attention: grouped-query heads (4 query heads on 2 key heads), 5 queries
    after 4 cached keys, and each mask form SDPA is given (none: causal with the cache offset; a
    bool padding mask; an additive float mask). Tolerance: float32 sums in another order, each
    within n x u x sum|terms| (u = 2^-24): scores over D terms, then a softmax (its output moves by
    at most twice the largest score move) and a sum of S weighted values. Control: the same keys
    with their two heads swapped (a wrong grouping) differ by far more."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from interp.runner import mixed

    monkeypatch.setattr(mixed, "MEDIUM", "highest")
    gen = torch.Generator().manual_seed(0)
    q, k, v = _attention_inputs(gen)
    module = _AttentionStub(groups=2)
    attend = torch.ones(2, 1, 5, 9, dtype=torch.bool).tril(4)
    attend[1, :, :, :2] = False  # row 1: two padded cache slots
    masks = {"causal": None, "bool": attend, "float": torch.zeros(2, 1, 5, 9).masked_fill(~attend, -1e9)}
    m = masks[mask]
    ref, _ = sdpa_attention_forward(module, q, k, v, m, scaling=0.3)
    got, _ = mixed._medium_attention(module, q, k, v, m, scaling=0.3)
    assert got.shape == ref.shape == (2, 5, 4, 8)
    u, (D, S) = torch.finfo(torch.float32).eps / 2, (q.shape[-1], k.shape[2])
    qk = (q.abs().reshape(2, 2, 2 * 5, D) @ k.abs().transpose(2, 3)).max()  # largest sum |q_i k_i|
    d_score = 2 * D * u * float(qk) * 0.3  # two orders, scaled
    vmax = float(v.abs().max())
    tol = 2 * d_score * vmax + 2 * S * u * vmax
    torch.testing.assert_close(got, ref, rtol=0, atol=tol)
    wrong, _ = mixed._medium_attention(module, q, k.flip(1), v.flip(1), m, scaling=0.3)
    assert (wrong - ref).abs().max() > 10 * tol


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_float32_medium_runs_sdpa_models_attention_at_medium(tiny_models, monkeypatch, arch):
    """A float32-medium model on SDPA computes its attention products as matmuls at "medium"
    (two per layer and forward) and scores within a tenth of mixed-bf16's error of float32; switched to
    full precision it calls no such matmul (SDPA, as the float32 model). Control: the float32
    model makes no medium matmul at all."""
    from interp.runner.mixed import MEDIUM_ATTENTION, medium_rounds_operands

    levels: list[str] = []
    real = torch.matmul

    def spy(*a, **k):
        levels.append(torch.get_float32_matmul_precision())
        return real(*a, **k)

    lm32 = interp.load(tiny_models[arch], dtype="float32")
    lm = interp.load(tiny_models[arch], dtype="float32-medium")
    model = lm.backend.precision_model
    rounds = medium_rounds_operands(model)  # then float32-medium computes in float32: SDPA, no medium matmul
    assert model.config._attn_implementation == ("sdpa" if rounds else MEDIUM_ATTENTION)
    monkeypatch.setattr(torch, "matmul", spy)
    f = score_options(lm32, PROMPTS, OPTIONS, cfg=CFG)
    assert "medium" not in levels
    med = score_options(lm, PROMPTS, OPTIONS, cfg=CFG)
    assert levels.count("medium") == 0 if rounds else levels.count("medium") >= 2 * lm.n_layers
    levels.clear()
    with full_precision(model):
        again = score_options(lm, PROMPTS, OPTIONS, cfg=CFG)
    assert "medium" not in levels
    monkeypatch.setattr(torch, "matmul", real)
    np.testing.assert_array_equal(again.logp, f.logp)
    bf16 = score_options(interp.load(tiny_models[arch], dtype="mixed-bf16"), PROMPTS, OPTIONS, cfg=CFG)
    assert_tenth_of_bf16_error(med, f, bf16)  # as for the Linears (above)


# the MLP's widening projections by family: what `mixed-bf16-medium` gives bf16 operands
MLP_INPUTS = {"llama": ("gate_proj", "up_proj"), "qwen2": ("gate_proj", "up_proj"), "gpt2": ("c_fc",)}


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_mixed_bf16_medium_rounds_only_the_mlp_input_projections(runs, tiny_models, arch):
    """`mixed-bf16-medium`: bf16 copies on exactly the MLP's widening projections (llama: gate and
    up; GPT-2: the Conv1D c_fc), every other block matmul at "medium", the head untouched. Its
    log-probs move (> 0) but within the bound `_bound` derives for bf16 operands, counted for the
    2 rounded products per block it has instead of mixed-bf16's 6 (medium's own error is a tenth
    of bf16's or less, tests above); switched to full precision it is float32 bit for bit."""
    from interp.runner.mixed import medium_rounds_operands

    lm32 = runs["float32"][0] if arch == "llama" else interp.load(tiny_models[arch], dtype="float32")
    f = score_options(lm32, PROMPTS, OPTIONS, cfg=CFG)
    lm = interp.load(tiny_models[arch], dtype="mixed-bf16-medium")
    model = lm.backend.precision_model
    rounded = {n for n, m in model.named_modules() if isinstance(getattr(m, ATTR, None), torch.Tensor)}
    assert rounded == {n for n, _ in model.named_modules() if n.endswith(MLP_INPUTS[arch]) and ".mlp." in n}, sorted(
        rounded
    )
    assert len(rounded) == len(MLP_INPUTS[arch]) * lm.n_layers
    others = [m for n, m in model.named_modules() if n.endswith(("c_attn", "q_proj", "k_proj", "o_proj", "down_proj"))]
    # at "medium", or float32 (no mark) where "medium" rounds operands to bf16 (make_mixed_medium)
    rest = None if medium_rounds_operands(model) else "medium"
    assert others and all(getattr(m, ATTR, None) == rest for m in others)
    assert model.get_output_embeddings().forward.__func__ is torch.nn.Linear.forward
    got = score_options(lm, PROMPTS, OPTIONS, cfg=CFG)
    _max = _max_abs_logit(lm32)
    bound = 2 * 2 * math.sqrt(2 * lm.n_layers) * U_BF16 * _max
    err = np.abs(got.logp - f.logp).max()
    assert 0 < err <= bound, (err, bound)
    with full_precision(model):
        again = score_options(lm, PROMPTS, OPTIONS, cfg=CFG)
    np.testing.assert_array_equal(again.logp, f.logp)


def test_mlp_input_projection_picks_the_widening_mlp_layers_only():
    """Known answers for the selection: widening layers under an MLP (gate, up, fused gate_up,
    GPT-2's Conv1D c_fc, GPT-NeoX's dense_h_to_4h) are picked; the down projection, and a widening
    query projection outside the MLP (Gemma's heads x head_dim > hidden), are not."""
    from transformers.pytorch_utils import Conv1D

    from interp.runner.mixed import mlp_input_projection

    wide, narrow = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)
    assert mlp_input_projection("model.layers.0.mlp.gate_proj", wide)
    assert mlp_input_projection("gpt_neox.layers.1.mlp.dense_h_to_4h", wide)
    assert mlp_input_projection("transformer.h.0.mlp.c_fc", Conv1D(32, 8))  # Conv1D(nf=out, nx=in)
    assert not mlp_input_projection("transformer.h.0.mlp.c_proj", Conv1D(8, 32))
    assert not mlp_input_projection("model.layers.0.mlp.down_proj", narrow)
    assert not mlp_input_projection("model.layers.0.self_attn.q_proj", wide)


def test_run_config_dtype_choices_are_the_registered_dtypes():
    """RunConfig spells the dtype names out (interp.model.devices imports torch; the cache readers must
    not): they must stay the registered ones, so a new dtype cannot be loadable yet unselectable."""
    from dataclasses import fields

    from interp.model.devices import DTYPES
    from interp.studies.base import RunConfig

    (dtype,) = [f for f in fields(RunConfig) if f.name == "dtype"]
    assert tuple(dtype.metadata["choices"]) == tuple(DTYPES)


def test_medium_probe_tells_bf16_operands_from_float32(monkeypatch):
    """The probe behind `interp selftest`'s "medium" line and its tolerance: a kernel that rounds
    the operands to bf16 (as oneDNN's bf16 math mode allows, e.g. on other CPUs) misses the planted
    product by 1.001 -> 1.0, i.e. 1e-3 relative, and gets bf16's epsilon; a float32 kernel (the
    control) stays near float32 error. This machine's own answer is one of the two."""
    from interp.runner import mixed
    from interp.tools.selftest import medium_eps

    mixed.medium_operand_error.cache_clear()
    try:
        real = mixed.medium_operand_error("cpu")
        assert real < mixed.BF16_OPERANDS or 5e-4 < real < 2e-3
        mixed.medium_operand_error.cache_clear()
        monkeypatch.setattr(mixed, "_medium_matmul", lambda a, b: a.bfloat16().float() @ b.bfloat16().float())
        one = float(torch.tensor(1.001, dtype=torch.float32))
        np.testing.assert_allclose(mixed.medium_operand_error("cpu"), (one - 1) / one, rtol=1e-3)
        assert medium_eps("cpu") == torch.finfo(torch.bfloat16).eps
        mixed.medium_operand_error.cache_clear()
        monkeypatch.setattr(mixed, "_medium_matmul", lambda a, b: a @ b)  # float32 kernel
        assert mixed.medium_operand_error("cpu") < 1e-5 and medium_eps("cpu") < 1e-5
    finally:
        mixed.medium_operand_error.cache_clear()


def test_rounding_kernels_emulate_bf16_operands():
    """`bf16_operand_kernels`: at "medium", F.linear / torch.matmul / torch.addmm multiply the
    bf16-rounded operands in float32: equal to the float64 product of the rounded operands up to
    float32 summation error (k u32 sum|x||w|), and farther than that from the exact product of the
    unrounded ones (the control: the rounding really happens); at "highest" nothing changes, and
    outside the block everything is restored (the probe reads this machine's value again)."""
    from interp.runner import mixed
    from interp.runner.rounding_kernels import bf16_operand_kernels

    gen = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(7, 96, generator=gen), torch.randn(40, 96, generator=gen), torch.randn(40, generator=gen)
    w = torch.nn.Parameter(w, requires_grad=False)
    r = lambda t: t.bfloat16().double()  # noqa: E731
    slack = 96 * U_FP32 * (x.double().abs() @ w.double().abs().T) + U_FP32 * (x.double() @ w.double().T).abs()
    outside, functions = mixed.medium_operand_error("cpu"), (F.linear, torch.matmul, torch.addmm)
    with bf16_operand_kernels():
        assert mixed.medium_operand_error("cpu") > mixed.BF16_OPERANDS
        with mixed._matmul_precision(mixed.MEDIUM):
            got = {
                "linear": F.linear(x, w, b).double() - b.double(),
                "matmul": torch.matmul(x, w.T).double(),
                "addmm": torch.addmm(b, x, w.T).double() - b.double(),
            }
        plain = F.linear(x, w)  # "highest": untouched
    exact_rounded, exact = r(x) @ r(w).T, x.double() @ w.double().T
    for name, out in got.items():
        assert ((out - exact_rounded).abs() <= slack + 2 * U_FP32 * b.double().abs()).all(), name
        assert ((out - exact).abs() > slack).any(), name  # control: unrounded operands differ
    torch.testing.assert_close(plain, torch.nn.functional.linear(x, w), rtol=0, atol=0)
    assert (F.linear, torch.matmul, torch.addmm) == functions and mixed.medium_operand_error("cpu") == outside


def test_where_medium_rounds_operands_the_medium_names_keep_float32(tiny_models, monkeypatch):
    """On a machine whose "medium" rounds operands to bf16 (emulated): float32-medium computes in
    float32 (its log-probs bit-equal to float32's) and mixed-bf16-medium keeps every matmul but the
    MLP's gate / up float32 (bit-equal to a model given only those bf16 copies); each warns once per
    process. Control: the model put at "medium" by hand (`make_medium`, as before this fallback)
    moves under the same emulation, so it is live. On a float32-accurate kernel (the other
    control) mixed-bf16-medium runs its other matmuls at "medium" again, without a warning."""
    import warnings

    from interp.runner import mixed
    from interp.runner.rounding_kernels import bf16_operand_kernels

    monkeypatch.setattr(mixed, "_warned", set())
    path = tiny_models["llama"]
    f32 = score_options(interp.load(path, dtype="float32"), PROMPTS, OPTIONS, cfg=CFG)
    gate_up = interp.load(path, dtype="float32")
    mixed.make_mixed(gate_up.backend.precision_model, torch.bfloat16, keep=(), only=mixed.mlp_input_projection)
    by_hand = interp.load(path, dtype="float32")
    mixed.make_medium(by_hand.backend.precision_model)
    with bf16_operand_kernels():
        with pytest.warns(UserWarning, match="float32-medium on cpu: .* so all matmuls stay float32"):
            medium = interp.load(path, dtype="float32-medium")
        with warnings.catch_warnings(record=True) as again:  # once per device, dtype and process
            warnings.simplefilter("always")
            interp.load(path, dtype="float32-medium")
        assert not [w for w in again if "float32-medium on" in str(w.message)]
        with pytest.warns(UserWarning, match="all matmuls but the MLP's gate / up projections stay float32"):
            lm = interp.load(path, dtype="mixed-bf16-medium")
        for loaded in (medium, lm):
            model = loaded.backend.precision_model
            assert not [n for n, m in model.named_modules() if getattr(m, ATTR, None) == mixed.MEDIUM]
            assert model.config._attn_implementation == "sdpa"  # not the "medium" attention either
        np.testing.assert_array_equal(score_options(medium, PROMPTS, OPTIONS, cfg=CFG).logp, f32.logp)
        np.testing.assert_array_equal(
            score_options(lm, PROMPTS, OPTIONS, cfg=CFG).logp, score_options(gate_up, PROMPTS, OPTIONS, cfg=CFG).logp
        )
        assert np.abs(score_options(by_hand, PROMPTS, OPTIONS, cfg=CFG).logp - f32.logp).max() > 0
    monkeypatch.setattr(mixed, "_warned", set())
    mixed.medium_operand_error.cache_clear()
    try:
        monkeypatch.setattr(mixed, "_medium_matmul", lambda a, b: a @ b)  # control: float32 kernel
        with warnings.catch_warnings(record=True) as quiet:
            warnings.simplefilter("always")
            interp.load(path, dtype="float32-medium")
            lm = interp.load(path, dtype="mixed-bf16-medium")
        assert not [w for w in quiet if "bfloat16" in str(w.message)]
        assert any(getattr(m, ATTR, None) == mixed.MEDIUM for m in lm.backend.precision_model.modules())
    finally:
        mixed.medium_operand_error.cache_clear()


def test_help_offers_the_kept_kinds_and_one_line_per_hidden_one():
    """Issue 50: --dtype's help names the offered kinds and gives each hidden kind its reason once;
    every registered name stays a valid choice (units computed at a hidden kind stay valid)."""
    from dataclasses import fields

    from interp.model.devices import DTYPES, HIDDEN, OFFERED
    from interp.studies.base import RunConfig

    (dtype,) = [f for f in fields(RunConfig) if f.name == "dtype"]
    text = dtype.metadata["help"]
    assert set(OFFERED) | set(HIDDEN) == set(DTYPES) and not set(OFFERED) & set(HIDDEN)
    assert all(k in text for k in OFFERED) and set(dtype.metadata["choices"]) >= set(HIDDEN)
    hidden = text.split("Hidden, still accepted:")[1]
    for name, why in HIDDEN.items():
        assert hidden.count(f"{name} ({why})") == 1, name
    # an offered kind is not listed as hidden (as a whole name: mixed-bf16 is part of mixed-bf16-medium)
    assert not any(re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", hidden) for k in OFFERED if k != "float32")


def test_kinds_a_cpu_cannot_speed_up_are_hidden_with_a_reason(monkeypatch):
    """Issue 50: on a CPU without a native bf16 matmul every reduced kind is hidden with the reason;
    control: with one, the offered kinds stay offered and only the always-hidden ones are hidden."""
    from interp.model import devices

    monkeypatch.setattr(devices, "bf16_matmul_supported", lambda: False)
    offered, hidden = devices.kinds_here("cpu")
    assert offered == ["float32"]
    assert set(hidden) == set(devices.DTYPES) - {"float32"}
    assert all("no native bf16 matmul" in hidden[k] for k in devices.OFFERED if k != "float32")
    assert all(hidden[k] == why for k, why in devices.HIDDEN.items())  # their own reason comes first
    assert hidden["float16"] == devices.HIDDEN["float16"]
    assert devices.kinds_here("cuda")[0] == list(devices.OFFERED)  # the CPU's lack says nothing about a GPU

    monkeypatch.setattr(devices, "bf16_matmul_supported", lambda: True)
    offered, hidden = devices.kinds_here("cpu")
    assert offered == list(devices.OFFERED) and hidden == devices.HIDDEN
