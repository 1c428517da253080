"""Mixed precision (`--dtype mixed-bf16`): the dense matmuls in bf16, everything else in float32.

The weights stay float32 (what was loaded); each Linear (and GPT-2 `Conv1D`) of the blocks gets
a bf16 copy of its weight, and its forward casts the input to bf16, multiplies (float32
accumulation; the CPU kernel rounds the sum to bf16, as autocast does) and returns the product
as float32 with the bias added in float32. So the residual stream, the norms, the rotary
embedding, the attention scores and their softmax (SDPA on float32 q/k/v), the unembedding at
read positions (the output embedding is left alone) and the log-softmax are all float32.

The key projections (`KEEP_FLOAT32`) stay float32 too: a key is read by every later query (the
attention sink at the first token most of all), so its rounding moves every later position,
where a query's moves only its own. Measured on SmolLM2-135M-Instruct (62 pressure prompts):
keeping k_proj halved the largest verdict-probability change against float32 (0.026 -> 0.011)
for 3% of the dense FLOPs; keeping q, v or o instead helped less or not at all. Fused q/k/v
projections (GPT-2's c_attn) have no separate key and run in bf16.

Why not `torch.autocast`: it re-casts every weight at every forward (its cast cache lives only
inside one autocast region) and runs SDPA in bf16; the copies here are cast once at load.
`full_precision(model)` switches the copies off (the float32 weights are still there), which is
how a sweep re-scores its sample in float32 without loading the checkpoint twice.
"""

from __future__ import annotations

import contextlib
import functools
import types
import warnings
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

ATTR = "_interp_mixed"  # per module: the low-precision weight copy
KEEP_FLOAT32 = ("k_proj",)  # module-name suffixes left in float32 (see the module docstring)


class _State:
    """Shared switch of one model's mixed layers (False: compute in float32)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.on = True
        self._last: tuple | None = None  # (input, its version, its low-precision copy)

    def low(self, x: torch.Tensor) -> torch.Tensor:
        """x in the low dtype; sibling projections of one input (q/v, gate/up) share one cast."""
        last, version = self._last, _version(x)
        if last is not None and last[0] is x and last[1] == version:
            return last[2]
        low = x.to(self.dtype)
        self._last = (x, version, low)
        return low

    def clear(self) -> None:
        self._last = None


def _version(x: torch.Tensor) -> int | None:
    """The in-place version counter (inference tensors have none: modules do not write their
    inputs in place between two sibling projections, so identity alone holds there)."""
    try:
        return x._version
    except RuntimeError:
        return None


def _linear_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    state: _State = self._interp_mixed_state
    if not state.on:
        return F.linear(x, self.weight, self.bias)
    out = F.linear(state.low(x), getattr(self, ATTR)).float()
    return out + self.bias if self.bias is not None else out


def _conv1d_forward(self, x: torch.Tensor) -> torch.Tensor:  # transformers' Conv1D: x @ W + b, W [in, out]
    state: _State = self._interp_mixed_state
    shape = x.shape[:-1] + (self.weight.shape[1],)
    if not state.on:
        out = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return out.view(shape)
    out = (state.low(x).reshape(-1, x.shape[-1]) @ getattr(self, ATTR)).float() + self.bias
    return out.view(shape)


def _head_and_state(model: torch.nn.Module, dtype: torch.dtype) -> tuple[torch.nn.Module | None, _State]:
    """The output embedding (left alone) and the model's one switch, created on first use."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    state = getattr(model, "_interp_mixed_state", None)
    if state is None:
        state = _State(dtype)
        model._interp_mixed_state = state
    return head, state


def make_mixed(
    model: torch.nn.Module,
    dtype: torch.dtype = torch.bfloat16,
    keep: tuple[str, ...] = KEEP_FLOAT32,
    only: Callable[[str, torch.nn.Module], bool] | None = None,
) -> int:
    """Give every Linear / Conv1D of `model` except the output embedding, the modules named
    `*keep` and, with `only`, those it rejects a `dtype` weight copy and the mixed forward.
    Returns the number of layers converted (idempotent: 0 the second time)."""
    head, state = _head_and_state(model, dtype)
    n = 0
    for name, module in model.named_modules():
        if module is head or hasattr(module, ATTR) or not isinstance(getattr(module, "weight", None), torch.Tensor):
            continue
        if (keep and name.endswith(keep)) or (only is not None and not only(name, module)):
            continue
        if isinstance(module, torch.nn.Linear):
            forward = _linear_forward
        elif type(module).__name__ == "Conv1D" and module.weight.dim() == 2:
            forward = _conv1d_forward
        else:
            continue
        # a plain attribute, not a buffer: state_dict, fingerprints and saving see only float32
        setattr(module, ATTR, module.weight.detach().to(dtype))
        module._interp_mixed_state = state
        module.forward = types.MethodType(forward, module)
        n += 1
    return n


# `--dtype float32-medium`: float32 weights and activations everywhere; the blocks' Linears run
# at torch's "medium" float32 matmul precision: on CPUs oneDNN's bf16 math mode, which *allows*
# rounding the operands to bf16 and leaves the kernel to decide. Measured on this project's AMD
# EPYC (AVX512-BF16, no AMX): products keep nearly float32 accuracy (576 x 1.001 summed to
# 576.5786, exact 576.576, where bf16 operands give 576.0) at about 2.3x the float32 matmul rate.
# Other CPUs (AMX ones included) and GPUs may round the operands to bf16: `medium_operand_error`
# probes what this machine does (`interp selftest` prints it); where it rounds, float32-medium
# computes in float32 (`make_float32_medium`, below), and the precision audit of every sweep says
# what its precision cost.
# Attention too: torch's CPU SDPA kernel ignores the matmul precision (8x9x256x64, causal: 18.7 vs
# 19.6 ms), so a model on SDPA gets `_medium_attention`, whose two products are plain matmuls at
# "medium" (bank workload: float32-medium 1.85x float32, 1.73x with SDPA; BENCHMARKS.md, Precisions).
# Measured again on 2026-12-05 (three workloads interleaved with float32, BENCHMARKS.md "Precision kinds")
# it was no faster than float32 anywhere, so --help hides it (interp.model.devices.HIDDEN); it stays
# accepted and exact.
MEDIUM = "medium"
MEDIUM_ATTENTION = "interp_medium"  # the name registered with transformers' attention interfaces
# the probe's product: rows of 1.001 times ones over K = 576 (a block's width in the bank model);
# bf16 rounds 1.001 to 1.0, so bf16 operands miss the exact 576.576 by 1e-3 relative, float32 by ~1e-6
_PROBE_SHAPE = (64, 576, 576)
BF16_OPERANDS = 1e-4  # a probe error above this: the operands were rounded to bf16 (or coarser)


@functools.cache
def medium_operand_error(device: str = "cpu") -> float:
    """Relative error of a planted float32 product (1.001 x 1 summed over 576 terms) computed at
    torch's "medium" matmul precision on `device`: ~1e-6 where the kernel keeps float32 accuracy,
    1e-3 where it rounds operands to bf16 (above `BF16_OPERANDS`). Cached per device. One shape
    (a block's): a library may pick other kernels for other shapes (here the smallest ones stay
    float32), which the precision audit of a sweep covers and this does not."""
    m, k, n = _PROBE_SHAPE
    a = torch.full((m, k), 1.001, device=device)
    b = torch.ones(k, n, device=device)
    exact = k * float(torch.tensor(1.001, dtype=torch.float32))  # the operand as float32 holds it
    got = _medium_matmul(a, b).double()
    return float((got - exact).abs().max()) / exact


def _medium_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with _matmul_precision(MEDIUM):
        return torch.matmul(a, b)


def medium_rounds_operands(model: torch.nn.Module) -> bool:
    """Whether "medium" rounds matmul operands to bf16 on `model`'s device (the probe above; False
    where it cannot run: meta / offloaded weights)."""
    device = next(model.parameters()).device.type
    return device in ("cpu", "cuda") and medium_operand_error(device) > BF16_OPERANDS


def _warn_kept_float32(model: torch.nn.Module, dtype: str, kept: str) -> None:
    """Once per (device, dtype) and process: where "medium" rounds operands, `dtype` keeps `kept` float32."""
    device = next(model.parameters()).device.type
    if (device, dtype) in _warned:
        return
    _warned.add((device, dtype))
    warnings.warn(
        f'{dtype} on {device}: "medium" float32 matmuls round their operands to bfloat16 here (a planted product '
        f"off by {medium_operand_error(device):.1e} relative), so {kept} stay float32: the accuracy measured in "
        "BENCHMARKS.md holds, its speed-up does not",
        stacklevel=4,
    )


_warned: set[tuple[str, str]] = set()  # (device, dtype) pairs warned about


def _medium_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Softmax attention with QK^T and PV as matmuls at "medium" precision (scores, mask and
    softmax in float32); SDPA itself when the model is switched to full precision, trains, or
    asks for what this does not do (a position bias, sinks, soft-capping). Grouped-query heads
    multiply their key / value head in place (the query heads of one group stacked along the
    sequence), as SDPA's GQA does, without repeating keys."""
    state = getattr(module, "_interp_mixed_state", None)
    plain = state is None or not state.on or dropout or module.training
    if plain or any(kwargs.get(k) is not None for k in ("position_bias", "s_aux", "sinks", "softcap")):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    B, H, L, D = query.shape
    Hkv, S, Dv = key.shape[1], key.shape[2], value.shape[-1]
    g = H // Hkv
    with _matmul_precision(MEDIUM):
        scores = torch.matmul(query.reshape(B, Hkv, g * L, D), key.transpose(2, 3)).view(B, Hkv, g, L, S)
    scores = scores * (scaling if scaling is not None else D**-0.5)
    if attention_mask is not None:  # [B or 1, 1, L, S]: bool (True attends) or additive float
        m = attention_mask[:, :, None]
        scores = scores.masked_fill(~m, torch.finfo(scores.dtype).min) if m.dtype == torch.bool else scores + m
    elif (is_causal if is_causal is not None else getattr(module, "is_causal", True)) and L > 1:
        keep = torch.ones(L, S, dtype=torch.bool, device=scores.device).tril(S - L)
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype).view(B, Hkv, g * L, S)
    with _matmul_precision(MEDIUM):
        out = torch.matmul(probs, value)
    return out.view(B, H, L, Dv).transpose(1, 2).contiguous(), None


def _use_medium_attention(model: torch.nn.Module, state: "_State") -> bool:
    """Route a model on SDPA on the CPU through `_medium_attention` (others keep theirs; on a GPU
    the fused SDPA kernels stay, which do not materialize the scores, and each sweep's precision
    audit measures what they cost; not measured here, no GPU). The masks are
    SDPA's, so the full-precision path is the float32 model's computation bit for bit."""
    config = getattr(model, "config", None)
    on_cpu = all(p.device.type == "cpu" for p in model.parameters())
    if getattr(config, "_attn_implementation", None) != "sdpa" or not on_cpu:
        return False
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(MEDIUM_ATTENTION, _medium_attention)
    AttentionMaskInterface.register(MEDIUM_ATTENTION, sdpa_mask)
    model.set_attn_implementation(MEDIUM_ATTENTION)
    for module in model.modules():
        if hasattr(module, "num_key_value_groups") or type(module).__name__.endswith("Attention"):
            module._interp_mixed_state = state
    return True


@contextlib.contextmanager
def _matmul_precision(level: str) -> Iterator[None]:
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(level)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(prev)


def make_medium(model: torch.nn.Module) -> int:
    """Run every Linear / Conv1D of `model` except the output embedding, and the attention products
    of a model on SDPA, at "medium" float32 matmul precision, set around each call and restored
    after it (the process-wide setting is left as it was); `full_precision(model)` switches it
    off. Returns the number of layers (idempotent). Whatever the machine's "medium" does: the
    dtype names go through `make_float32_medium` / `make_mixed_medium`."""
    head, state = _head_and_state(model, torch.float32)
    _use_medium_attention(model, state)
    n = 0
    for module in model.modules():
        if module is head or hasattr(module, ATTR):
            continue
        if not (isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"):
            continue
        plain = module.forward

        def forward(x: torch.Tensor, _plain=plain, _state=state) -> torch.Tensor:
            if not _state.on:
                return _plain(x)
            with _matmul_precision(MEDIUM):
                return _plain(x)

        setattr(module, ATTR, MEDIUM)
        module._interp_mixed_state = state
        module.forward = forward
        n += 1
    return n


# `--dtype mixed-bf16-medium`: float32-medium, except that the MLP's input projections (gate and
# up, or their fused / single form: gate_up_proj, c_fc, dense_h_to_4h) take bf16 operands. They
# are half of a block's FLOPs; their outputs pass through the activation and the gate's product
# before the down projection, and rounding them moved verdicts least of the splits tried (ad-hoc,
# one run each: the whole MLP in bf16 max |dP| 0.022, 4 flips; every matmul but the keys max 0.037).
# Measured at bank size: BENCHMARKS.md, "Precisions" (`python -m bench precision_speed_and_error`).
MLP_PARENTS = ("mlp", "feed_forward", "ffn")


def mlp_input_projection(name: str, module: torch.nn.Module) -> bool:
    """A Linear / Conv1D inside an MLP that widens its input (d -> ff): gate, up, or both fused."""
    parent = name.split(".")[-2] if "." in name else ""
    weight = module.weight
    if weight.dim() != 2:  # norms and embeddings pass through here too
        return False
    n_in, n_out = (weight.shape[0], weight.shape[1]) if type(module).__name__ == "Conv1D" else weight.shape[::-1]
    return parent in MLP_PARENTS and n_out > n_in


# Where "medium" rounds operands to bf16 (the probe above; AMX CPUs and GPUs may), every matmul
# at "medium" would take bf16 operands, keys and attention products included: emulated on the bank
# workload (BENCHMARKS.md, "Precisions where medium rounds operands to bf16"), float32-medium then
# moved verdicts by up to 0.048 and mixed-bf16-medium by 0.040, over the audit's 0.02. There the
# "-medium" names keep what they would run at "medium" in float32 ("highest"), so each keeps the
# accuracy measured on this project's CPU and gives up that part of its speed-up (warned once).


def make_float32_medium(model: torch.nn.Module) -> int:
    """`float32-medium`: `make_medium`, or nothing but the switch (the model computes float32)
    where "medium" rounds operands to bf16. Returns the layers at "medium"."""
    if medium_rounds_operands(model):
        _head_and_state(model, torch.float32)  # switchable all the same: the audit re-scores in place
        _warn_kept_float32(model, "float32-medium", "all matmuls")
        return 0
    return make_medium(model)


def make_mixed_medium(model: torch.nn.Module) -> int:
    """`mixed-bf16-medium` (see above): bf16 copies for the MLP's input projections, every other
    block matmul (and a model on SDPA's attention products) at "medium", or float32 where "medium"
    rounds operands to bf16. Returns the layers."""
    n = make_mixed(model, torch.bfloat16, keep=(), only=mlp_input_projection)
    if medium_rounds_operands(model):
        _warn_kept_float32(model, "mixed-bf16-medium", "all matmuls but the MLP's gate / up projections")
        return n
    return n + make_medium(model)


# `--dtype` name -> what makes a float32 model that precision (the other names load as they are)
PRECISIONS: dict[str, Callable[[torch.nn.Module], int]] = {
    "mixed-bf16": make_mixed,
    "float32-medium": make_float32_medium,
    "mixed-bf16-medium": make_mixed_medium,
}


def is_mixed(model: torch.nn.Module) -> bool:
    return getattr(model, "_interp_mixed_state", None) is not None


@contextlib.contextmanager
def full_precision(model: torch.nn.Module) -> Iterator[None]:
    """Compute in float32 inside the block (the mixed copies unused); a no-op on other models."""
    state = getattr(model, "_interp_mixed_state", None)
    if state is None:
        yield
        return
    before = state.on
    state.on = False
    try:
        yield
    finally:
        state.on = before
