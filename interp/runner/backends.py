"""Backends behind one protocol.

`forward` takes right-padded token ids and returns
  * logits at the requested read positions only ([B, R, V], float32), and
  * residual streams (resid_pre, i.e. the input of block L) for the requested layers ([B, T, d]).

`hf` is the reference: a forward pre-hook on block L reads its input, and the unembedding
is applied only at read positions. It alone supports a shared-prefix KV cache.
`transformer_lens` (TransformerBridge) and `nnsight` (TransformersModel) compute the same
numbers through their own hook systems; tests hold all three within 1e-4.

Devices: every backend exposes `device`, where its inputs must live (the embedding's device,
which under an accelerate device_map need not be where the last block runs). Inputs given on
another device are moved once here; read indices follow the tensor they index.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import torch

from interp.model.checkpoint import CheckpointInfo
from interp.core.registry import Registry
from interp.model.devices import torch_dtype
from interp.core.errors import CheckpointError
from interp.model.hooksites import TL_RESID_PRE, HookSites, get_module
from interp.runner import packed


@dataclass
class ForwardOut:
    logits: torch.Tensor  # [B, R, V] float32 at the read positions ([N, V] with `read_flat`)
    resid: dict[int, torch.Tensor]  # layer -> [B, T, d] (input of block `layer`)
    past: object | None = None  # KV cache when requested (hf only)


class Backend(Protocol):
    name: str
    supports_prefix_cache: bool
    device: torch.device  # where input tensors must be

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        read_index: torch.Tensor,
        layers: Sequence[int],
        *,
        past: object | None = None,
        use_cache: bool = False,
    ) -> ForwardOut: ...


def _gather_positions(h: torch.Tensor, read_index: torch.Tensor) -> torch.Tensor:
    read_index = read_index.to(h.device)  # under a device_map the last block may sit elsewhere
    return h.gather(1, read_index.unsqueeze(-1).expand(-1, -1, h.shape[-1]))


def _on(device: torch.device, *tensors):
    return [t.to(device) if t is not None else None for t in tensors]


@contextmanager
def capture_block_inputs(blocks: torch.nn.ModuleList, layers: Sequence[int]) -> Iterator[dict[int, torch.Tensor]]:
    """Forward pre-hooks on the requested blocks; removed in `finally` whatever happens."""
    store: dict[int, torch.Tensor] = {}
    handles = []

    def make_hook(layer: int):
        def hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            store[layer] = hidden.detach()

        return hook

    try:
        for layer in sorted(set(layers)):
            handles.append(blocks[layer].register_forward_pre_hook(make_hook(layer), with_kwargs=True))
        yield store
    finally:
        for h in handles:
            h.remove()


class HFBackend:
    name = "hf"
    supports_prefix_cache = True
    supports_flat_reads = True  # `read_flat`: unembed exactly the read positions, no per-row padding
    supports_packed = True  # `packed`: see `enable_packed`

    def __init__(self, model: torch.nn.Module, sites: HookSites):
        self.model = model
        self._packed_ok: bool | None = None
        self.base = get_module(model, sites.base)
        self.blocks = get_module(model, sites.layers)
        self.lm_head = model.get_output_embeddings()
        self.device = model.get_input_embeddings().weight.device
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)

    def unembed(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(h).float()  # log-softmax downstream stays float32 whatever the weights
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def forward(
        self,
        input_ids,
        attention_mask,
        read_index,
        layers,
        *,
        past=None,
        use_cache=False,
        past_mask=None,
        position_ids=None,
        read_flat=None,
        packed=False,
    ):
        """`past_mask` / `position_ids` serve rows whose cached part is padded (extensions);
        by default the cache is all real tokens and positions continue from its length.
        `read_flat` (indices into the B x T positions, row-major): logits [N, V] at exactly
        those positions instead of [B, R, V] at `read_index` (rows with fewer reads than the
        most are not unembedded at padding). `packed` (after `enable_packed()`): the rows'
        real tokens run as one sequence (`interp.runner.packed`); `past`, if given, must be
        a cache of `interp.runner.engine._BufferLayer`s. Outputs are laid out as padded ones."""
        input_ids, attention_mask, past_mask, position_ids = _on(
            self.device, input_ids, attention_mask, past_mask, position_ids
        )
        past_len = 0 if past is None else past.get_seq_length()
        if packed:
            return self._forward_packed(
                input_ids,
                attention_mask,
                read_index,
                layers,
                past,
                past_len,
                past_mask,
                position_ids,
                read_flat,
                use_cache,
            )
        if past_mask is not None:
            mask = torch.cat([past_mask, attention_mask], dim=1)
        elif past_len:
            mask = torch.cat([attention_mask.new_ones(attention_mask.shape[0], past_len), attention_mask], dim=1)
        else:
            mask = attention_mask
        if position_ids is None:  # right padding: real tokens sit at past_len + 0..T-1 in every row
            position_ids = (
                torch.arange(past_len, past_len + input_ids.shape[1], device=self.device)
                .unsqueeze(0)
                .expand(input_ids.shape[0], -1)
            )
        with capture_block_inputs(self.blocks, layers) as store:
            out = self.base(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=position_ids,
                cache=past,
                use_cache=use_cache,
            )
        hidden = out.last_hidden_state
        if read_flat is not None:
            h = hidden.reshape(-1, hidden.shape[-1])[read_flat.to(hidden.device)]
        else:
            h = _gather_positions(hidden, read_index)
        return ForwardOut(logits=self.unembed(h), resid=dict(store), past=out.cache if use_cache else None)

    def _forward_packed(
        self,
        input_ids,
        attention_mask,
        read_index,
        layers,
        past,
        past_len,
        past_mask,
        position_ids,
        read_flat,
        use_cache,
    ):
        B, W = input_ids.shape
        if past_len and past_mask is None:
            past_mask = attention_mask.new_ones(B, past_len)
        p = packed.plan(attention_mask, past_mask if past_len else None)
        if position_ids is None:
            position_ids = torch.arange(past_len, past_len + W, device=self.device).unsqueeze(0).expand(B, -1)
        with capture_block_inputs(self.blocks, layers) as store, packed.packing(p):
            out = self.base(
                input_ids=input_ids.reshape(-1)[p.index].unsqueeze(0),
                attention_mask=p.mask,  # 4D: transformers passes it through unchanged
                position_ids=position_ids.reshape(-1)[p.index].unsqueeze(0),
                cache=past,
                use_cache=use_cache,
            )
        hidden = out.last_hidden_state  # [1, N, d]
        if read_flat is not None:
            h = hidden[0][p.locate(read_flat).to(hidden.device)]
        else:
            h = _gather_positions(p.pad(hidden), read_index)
        resid = {layer: p.pad(t) for layer, t in store.items()}
        return ForwardOut(logits=self.unembed(h), resid=resid, past=out.cache if use_cache else None)

    def enable_packed(self) -> bool:
        """Route attention for packed forwards and check, once, that a packed forward of two rows
        (3 and 1 tokens) gives the padded forward's logits at every real token: within 1% of the
        logits' scale, far above rounding and far below what a mask or layout the model does not
        follow would do. False (the model left as it was) where it cannot."""
        if self._packed_ok is not None:
            return self._packed_ok
        before = getattr(self.model.config, "_attn_implementation", None)
        self._packed_ok = False
        try:
            if packed.route(self.model):
                ids = torch.tensor([[3, 4, 5], [6, 0, 0]], device=self.device)
                mask = torch.tensor([[1, 1, 1], [1, 0, 0]], device=self.device)
                flat = torch.tensor([0, 1, 2, 3], device=self.device)
                none = torch.zeros(2, 1, dtype=torch.long, device=self.device)
                a = self.forward(ids, mask, none, [], read_flat=flat).logits
                b = self.forward(ids, mask, none, [], read_flat=flat, packed=True).logits
                self._packed_ok = bool(((a - b).abs().max() <= 0.01 * (1 + a.abs().max())).item())
        except Exception as exc:  # an architecture whose attention packing cannot drive
            logging.getLogger(__name__).info("packed forwards off (%s: %s)", type(exc).__name__, exc)
            self._packed_ok = False
        if not self._packed_ok and before is not None and before != self.model.config._attn_implementation:
            self.model.set_attn_implementation(before)
        return self._packed_ok


class TLBackend:
    name = "transformer_lens"
    supports_prefix_cache = False

    def __init__(self, info: CheckpointInfo, dtype: torch.dtype, device: str = "cpu", device_map=None):
        from transformer_lens.model_bridge import TransformerBridge

        # TL rewrites the model it is given and forces eager attention: boot its own instance
        try:
            self.bridge = TransformerBridge.boot_transformers(
                str(info.path), device=None if device_map is not None else device, dtype=dtype, device_map=device_map
            )
        except Exception as exc:
            raise CheckpointError(
                f"{info.path}: backend transformer_lens does not support architecture model_type="
                f"{info.model_type!r} ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); use --backend hf or nnsight"
            ) from None
        self.bridge.eval()
        emb = self.bridge.original_model.get_input_embeddings() if hasattr(self.bridge, "original_model") else None
        self.device = emb.weight.device if emb is not None else torch.device(device)

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, read_index, layers, *, past=None, use_cache=False):
        input_ids, attention_mask = _on(self.device, input_ids, attention_mask)
        names = {TL_RESID_PRE.format(layer=layer): layer for layer in layers}
        logits, cache = self.bridge.run_with_cache(
            input_ids, attention_mask=attention_mask, names_filter=lambda n: n in names
        )
        resid = {layer: cache[name].detach() for name, layer in names.items()}
        return ForwardOut(logits=_gather_positions(logits.float(), read_index), resid=resid)


class NNsightBackend:
    name = "nnsight"
    supports_prefix_cache = False

    def __init__(
        self, info: CheckpointInfo, sites: HookSites, dtype: torch.dtype, device: str = "cpu", device_map=None
    ):
        from nnsight.modeling.transformers import TransformersModel

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            self.model = TransformersModel(
                str(info.path),
                task="text-generation",
                dispatch=True,
                dtype=dtype,
                device_map=device_map if device_map is not None else device,
            )
        except Exception as exc:
            raise CheckpointError(
                f"{info.path}: backend nnsight cannot wrap architecture model_type={info.model_type!r} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); use --backend hf"
            ) from None
        self.sites = sites
        self.device = self.model._module.get_input_embeddings().weight.device
        cfg = self.model._module.config
        cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        # the LM head's output is read, so Gemma-2's final logit soft-cap (applied after it) is ours to apply
        self.softcap = getattr(cfg, "final_logit_softcapping", None)

    def _envoy(self, dotted: str):
        env = self.model
        for part in dotted.split("."):
            env = getattr(env, part)
        return env

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, read_index, layers, *, past=None, use_cache=False):
        input_ids, attention_mask = _on(self.device, input_ids, attention_mask)
        blocks = self._envoy(self.sites.layers)
        saved = {}
        with self.model.trace({"input_ids": input_ids, "attention_mask": attention_mask}):
            for layer in sorted(set(layers)):  # nnsight requires forward order
                saved[layer] = blocks[layer].input.save()
            logits = self._envoy(self.sites.lm_head).output.save()
        resid = {layer: t.detach() for layer, t in saved.items()}
        logits = _gather_positions(logits.float(), read_index)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return ForwardOut(logits=logits, resid=resid)


@dataclass(frozen=True)
class BackendSpec:
    """How to build a backend from a loaded checkpoint: `build(info, hf_model, sites, dtype, device, device_map)`."""

    name: str
    build: "BackendFactory"
    needs_safetensors: bool = True  # loads the weights again itself (not via the hf model)


class BackendFactory(Protocol):
    def __call__(
        self,
        *,
        info: CheckpointInfo,
        hf_model: torch.nn.Module,
        sites: HookSites,
        dtype: str,
        device: str = "cpu",
        device_map=None,
    ) -> Backend: ...


BACKEND_REGISTRY: Registry[BackendSpec] = Registry("backend")


def register_backend(spec: BackendSpec) -> BackendSpec:
    return BACKEND_REGISTRY.add(spec.name, spec, replace=True)


def with_precision(backend, model: torch.nn.Module, dtype: str):
    """Apply a mixed precision (`interp.runner.mixed`) to the module the backend runs; the
    backend keeps the model to switch it back to float32 (`full_precision_model`)."""
    from interp.runner.mixed import PRECISIONS

    if dtype in PRECISIONS:
        PRECISIONS[dtype](model)
    backend.precision_model = model
    return backend


def _tl_model(be: "TLBackend") -> torch.nn.Module:
    return getattr(be.bridge, "original_model", be.bridge)


register_backend(
    BackendSpec(
        "hf",
        lambda *, info, hf_model, sites, dtype, device="cpu", device_map=None: with_precision(
            HFBackend(hf_model, sites), hf_model, dtype
        ),
        needs_safetensors=False,
    )
)


def _build_tl(*, info, hf_model, sites, dtype, device="cpu", device_map=None):
    be = TLBackend(info, torch_dtype(dtype), device, device_map)
    return with_precision(be, _tl_model(be), dtype)


def _build_nnsight(*, info, hf_model, sites, dtype, device="cpu", device_map=None):
    be = NNsightBackend(info, sites, torch_dtype(dtype), device, device_map)
    return with_precision(be, be.model._module, dtype)


register_backend(BackendSpec("transformer_lens", _build_tl))
register_backend(BackendSpec("nnsight", _build_nnsight))


def make_backend(
    name: str,
    *,
    info: CheckpointInfo,
    hf_model: torch.nn.Module,
    sites: HookSites,
    dtype: str,
    device: str = "cpu",
    device_map=None,
) -> Backend:
    """The registered backend `name` (an unknown name is a one-line ConfigError, never a fallback)."""
    return BACKEND_REGISTRY.get(name).build(
        info=info, hf_model=hf_model, sites=sites, dtype=dtype, device=device, device_map=device_map
    )
