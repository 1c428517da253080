"""Packed ("varlen") forwards: the rows of a batch as one sequence of their real tokens.

A padded forward [B, W] runs every Linear of every block on B x W positions, of which only the
rows' real tokens matter; the engine's level batches are padded by 0-15% (the workloads of
BENCHMARKS.md). Packed, the model sees [1, N] (N = the real tokens, position ids per token), so
every position-wise part (projections, MLP, norms, rotary) computes exactly N positions. Only
the attention product needs the rows apart: `_packed_attention` scatters the packed queries
into [B, H, W, hd], runs the model's own attention function (SDPA, or `interp_medium`) against
the padded batch cache with an explicit [B, 1, W, P + W] mask, and gathers the N outputs back;
the cache layer (`engine._BufferLayer`) scatters the packed keys and values into the rows'
slots. Numbers: the same computation per real token; float rounding may differ where a matmul
splits its rows differently (tests hold the packed runner to a plain HF forward with the
float32 bounds of tests/_tolerance.py).

Routed through `_packed_attention`, a model on SDPA also gets `_sdpa_grouped` outside packed
forwards: grouped-query keys are no longer copied per query head on the CPU.

Packing is used only where it is known to hold: an HF model whose attention goes through transformers'
attention interface (SDPA or `interp_medium`), no sliding-window layers, no hooks around the
forward (steering hooks index rows), and a self-check at first use (`enable`): one packed and
one padded forward of two short rows must agree, or the model keeps padded forwards.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from interp.core.partition import cheapest_runs

PACKED_ATTENTION = "interp_packed"  # the name registered with transformers' attention interfaces
INNER_ATTR = "_interp_inner_attention"  # on each attention module: the function packing wraps
# the attention functions packing can wrap: they take any [B, 1, L, S] boolean mask
WRAPPABLE = ("sdpa", "interp_medium")


@dataclass(frozen=True)
class Packing:
    """Where the N real tokens of a [B, W] batch sit: `index` into the B x W positions (row-major),
    `rows` / `cols` the same as (row, column) pairs, `pads` the other positions; `mask`
    [B, 1, W, P + W] (True attends); `groups` (first row, end row, width): runs of rows whose
    attention runs as one call, cut to their own widest row."""

    B: int
    W: int
    index: torch.Tensor
    pads: torch.Tensor
    rows: torch.Tensor
    cols: torch.Tensor
    mask: torch.Tensor
    groups: tuple[tuple[int, int, int], ...] = ()

    @property
    def n(self) -> int:
        return int(self.index.shape[0])

    def locate(self, flat: torch.Tensor) -> torch.Tensor:
        """Positions in the packed sequence of these B x W positions (row-major; real tokens)."""
        where = torch.full((self.B * self.W,), -1, dtype=torch.long, device=self.index.device)
        where[self.index] = torch.arange(self.n, device=self.index.device)
        return where[flat.to(where.device)]

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """[1, N, ...] -> [B, W, ...], zeros at the padding."""
        out = x.new_zeros(self.B * self.W, *x.shape[2:])
        out[self.index] = x[0]
        return out.view(self.B, self.W, *x.shape[2:])


_ACTIVE: contextvars.ContextVar[Packing | None] = contextvars.ContextVar("interp_packing", default=None)


def active() -> Packing | None:
    return _ACTIVE.get()


@contextlib.contextmanager
def packing(p: Packing) -> Iterator[None]:
    token = _ACTIVE.set(p)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def plan(attention_mask: torch.Tensor, past_mask: torch.Tensor | None) -> Packing:
    """The packing of a right-padded batch (`attention_mask` [B, W], 1 = real token) whose rows
    continue cached parents (`past_mask` [B, P], 1 = a cached token of that row; None: no cache)."""
    B, W = attention_mask.shape
    dev = attention_mask.device
    real = attention_mask.bool()
    index = real.reshape(-1).nonzero().squeeze(1)
    pads = (~real).reshape(-1).nonzero().squeeze(1)
    rows, cols = index // W, index % W
    q = torch.arange(W, device=dev)
    causal = (q[None, :] <= q[:, None]).unsqueeze(0) & real[:, None, :]  # [B, W queries, W keys]
    P = 0
    if past_mask is not None and past_mask.shape[1]:
        P = past_mask.shape[1]
        causal = torch.cat([past_mask.bool()[:, None, :].expand(B, W, -1), causal], dim=2)
    groups = attention_groups(real.sum(1).tolist(), P)
    return Packing(B=B, W=W, index=index, pads=pads, rows=rows, cols=cols, mask=causal.unsqueeze(1), groups=groups)


# what one more attention call costs, in query x key pairs (SmolLM2-135M on this CPU: ~0.1 ms
# per call, ~45 ns per pair of 9 heads of 64). Speed only: any grouping gives the same numbers.
ATTENTION_CALL_PAIRS = 2048


def attention_groups(lens: list[int], past: int) -> tuple[tuple[int, int, int], ...]:
    """Cut the rows (in their order) into runs whose attention runs as one call over the run's
    widest row, at least cost: a call costs ATTENTION_CALL_PAIRS plus rows x width x (past +
    width) query-key pairs (the engine's rows come sorted by length, so runs are tight)."""

    def runs(end: int):
        w = 0
        for start in range(end - 1, -1, -1):
            w = max(w, lens[start])
            yield start, ATTENTION_CALL_PAIRS + (end - start) * w * (past + w)

    return tuple((a, b, max(lens[a:b])) for a, b in cheapest_runs(len(lens), runs))


def scatter_heads(x: torch.Tensor, p: Packing) -> torch.Tensor:
    """[1, H, N, d] (packed) -> [B, H, W, d], zeros at the padding (the layout of HF's own
    `.view(B, W, H, d).transpose(1, 2)`). Padding keys enter the other rows' products (masked,
    but a NaN there would still poison them): only those positions are zeroed."""
    H, d = x.shape[1], x.shape[3]
    out = x.new_empty(p.B * p.W, H, d)
    out[p.index] = x[0].transpose(0, 1)
    out[p.pads] = 0
    return out.view(p.B, p.W, H, d).transpose(1, 2)


def _sdpa_grouped(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' SDPA attention, except that with a mask on the CPU grouped-query keys stay
    grouped (`enable_gqa`) instead of being copied once per query head (transformers repeats them
    there, keeping `enable_gqa` for the cases its CUDA kernels support). The same kernel on the
    same numbers: bit-identical here, at about half the time (8x9x24x320x64, 3 key heads:
    7.6 vs 13.2 ms); tests hold it to transformers' own within float rounding."""
    special = any(kwargs.get(k) is not None for k in ("position_bias", "softcap", "s_aux", "sinks"))
    if (
        getattr(module, "num_key_value_groups", 1) <= 1
        or attention_mask is None
        or query.shape[2] == 1
        or query.device.type != "cpu"
        or special
        or kwargs.get("output_attentions")
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


def _inner(module) -> Callable:
    name = getattr(module, INNER_ATTR, "sdpa")
    return _sdpa_grouped if name == "sdpa" else ALL_ATTENTION_FUNCTIONS[name]


def _packed_attention(module, query, key, value, attention_mask, **kwargs):
    """The module's own attention on the rows apart (see the module docstring); unchanged when no
    packed forward is running (SDPA with grouped keys kept grouped: `_sdpa_grouped`)."""
    inner = _inner(module)
    p = _ACTIVE.get()
    if p is None or query.shape[0] != 1 or query.shape[2] != p.n:
        return inner(module, query, key, value, attention_mask, **kwargs)
    q = scatter_heads(query, p)
    if key.shape[0] == 1:  # no cache: this forward's own keys, packed too
        key, value = scatter_heads(key, p), scatter_heads(value, p)
    kwargs.pop("is_causal", None)
    groups = p.groups or ((0, p.B, p.W),)
    if len(groups) == 1 and groups[0][2] == p.W:
        out, _ = inner(module, q, key, value, p.mask, **kwargs)  # [B, W, H, d]
    else:  # each run of rows over its own width; the positions past it are never gathered
        out = query.new_empty(p.B, p.W, query.shape[1], value.shape[-1])
        for r0, r1, w in groups:
            s = key.shape[2] - (p.W - w)  # the cached tokens, then the run's w new ones
            o, _ = inner(
                module, q[r0:r1, :, :w], key[r0:r1, :, :s], value[r0:r1, :, :s], p.mask[r0:r1, :, :w, :s], **kwargs
            )
            out[r0:r1, :w] = o
    return out.reshape(p.B * p.W, *out.shape[2:])[p.index].unsqueeze(0), None


def _attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if hasattr(m, "num_key_value_groups") or type(m).__name__.endswith("Attention")]


def route(model: torch.nn.Module) -> bool:
    """Route the model's attention through `_packed_attention` (a pass-through outside packed
    forwards). False, changing nothing, where its attention is not one packing can wrap."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current == PACKED_ATTENTION:
        return True
    if current not in WRAPPABLE:
        return False
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(PACKED_ATTENTION, _packed_attention)
    AttentionMaskInterface.register(PACKED_ATTENTION, sdpa_mask)  # what both wrapped functions use
    for m in _attention_modules(model):
        setattr(m, INNER_ATTR, current)
    model.set_attn_implementation(PACKED_ATTENTION)
    return getattr(model.config, "_attn_implementation", None) == PACKED_ATTENTION  # some models refuse
