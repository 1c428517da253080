"""Hook sites as data: per architecture, where the canonical sites live.

Canonical names used across the toolkit:
  resid_pre.L  - the input of decoder block L (== Hugging Face `hidden_states[L]`)
  final        - the output of the final norm (what the unembedding reads)

Each backend translates a canonical site into its own naming. The table is checked
against the loaded module tree (`check_sites`) so an architecture whose layout changed
fails at load with a clear message instead of silently hooking nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.errors import CheckpointError


@dataclass(frozen=True, kw_only=True)
class HookSites:
    layers: str  # dotted path of the ModuleList of decoder blocks
    final_norm: str
    base: str  # the decoder stack without the LM head (returns the final-normed hidden states)


_LLAMA_LIKE = HookSites(layers="model.layers", final_norm="model.norm", base="model")

HOOK_SITES: dict[str, HookSites] = {
    "gpt2": HookSites(layers="transformer.h", final_norm="transformer.ln_f", base="transformer"),
    "llama": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    "gemma2": _LLAMA_LIKE,
    "gemma3_text": _LLAMA_LIKE,
    "olmo": _LLAMA_LIKE,
    "olmo2": _LLAMA_LIKE,
    "smollm3": _LLAMA_LIKE,
}

# TransformerLens (TransformerBridge) names for the same canonical site.
TL_RESID_PRE = "blocks.{layer}.hook_resid_pre"


def sites_for(model_type: str) -> HookSites:
    try:
        return HOOK_SITES[model_type]
    except KeyError:
        supported = ", ".join(sorted(HOOK_SITES))
        raise CheckpointError(
            f"unsupported architecture model_type={model_type!r} (supported: {supported})"
        ) from None


def get_module(root: torch.nn.Module, dotted: str) -> torch.nn.Module:
    mod = root
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def check_sites(model: torch.nn.Module, sites: HookSites, n_layers: int, where: str) -> None:
    """Fail at load if the hook table does not match the module tree."""
    for name in (sites.layers, sites.final_norm, sites.base):
        try:
            get_module(model, name)
        except AttributeError:
            raise CheckpointError(f"{where}: hook site {name!r} not found in the model") from None
    layers = get_module(model, sites.layers)
    if not isinstance(layers, torch.nn.ModuleList) or len(layers) != n_layers:
        raise CheckpointError(
            f"{where}: {sites.layers} has {len(layers)} blocks but config says {n_layers}"
        )


def default_layer(n_layers: int) -> int:
    """Three-quarter depth, as resid_pre: the input of block floor(3 n / 4)."""
    return (3 * n_layers) // 4
