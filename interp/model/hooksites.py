"""Hook sites, found in the loaded module tree instead of a per-architecture table.

Canonical names used across the toolkit:
  resid_pre.L  - the input of decoder block L (== Hugging Face `hidden_states[L]`)
  final        - the output of the final norm (what the unembedding reads)

Every Hugging Face causal LM names its decoder block class in `_no_split_modules` (the unit
accelerate must keep on one device) and holds those blocks in one ModuleList under its base
model (`model.layers`, `transformer.h`, `gpt_neox.layers`, ...). `discover_sites` finds that
list, checks its length against the config, and names the base model and final norm, so a
new architecture works without an entry here; one whose layout does not fit fails at load
with a message naming the architecture instead of silently hooking nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cache.layers import default_layer  # noqa: F401  (re-exported: the one definition)
from interp.core.errors import CheckpointError


@dataclass(frozen=True, kw_only=True)
class HookSites:
    layers: str  # dotted path of the ModuleList of decoder blocks
    final_norm: str  # dotted path of the final norm ("" when the architecture has none)
    base: str  # the decoder stack without the LM head (returns the final-normed hidden states)
    lm_head: str = "lm_head"  # dotted path of the output embedding


# TransformerLens (TransformerBridge) names for the same canonical site.
TL_RESID_PRE = "blocks.{layer}.hook_resid_pre"

_FINAL_NORM_NAMES = ("norm", "final_layer_norm", "ln_f", "final_norm", "norm_f")


def get_module(root: torch.nn.Module, dotted: str) -> torch.nn.Module:
    mod = root
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def _module_name(model: torch.nn.Module, target: torch.nn.Module | None) -> str:
    if target is None:
        return ""
    return next((name for name, mod in model.named_modules() if mod is target), "")


def discover_sites(model: torch.nn.Module, n_layers: int, *, where: str = "", model_type: str = "") -> HookSites:
    """The decoder-block list, base model, final norm and LM head of a loaded HF causal LM.

    The block list is the ModuleList whose entries are all of a class the model declares in
    `_no_split_modules` (falling back to the only ModuleList of `n_layers` same-class blocks).
    """
    arch = f"architecture model_type={model_type!r}" if model_type else f"architecture {type(model).__name__}"
    block_classes = set(getattr(model, "_no_split_modules", None) or ())
    lists = [
        (name, mod) for name, mod in model.named_modules() if isinstance(mod, torch.nn.ModuleList) and len(mod) > 0
    ]
    declared = [(n, m) for n, m in lists if block_classes and all(type(b).__name__ in block_classes for b in m)]
    same_class = [(n, m) for n, m in lists if len(m) == n_layers and len({type(b) for b in m}) == 1]
    candidates = declared or same_class
    if len(candidates) != 1:
        found = ", ".join(f"{n} ({len(m)} x {type(m[0]).__name__})" for n, m in lists) or "none"
        raise CheckpointError(
            f"{where}: unsupported {arch}: cannot identify its decoder blocks "
            f"(ModuleLists found: {found}; declared block classes: {sorted(block_classes) or 'none'})"
        )
    layers_name, layers = candidates[0]
    if len(layers) != n_layers:
        raise CheckpointError(f"{where}: {layers_name} has {len(layers)} blocks but config says {n_layers}")
    base = getattr(model, "base_model", None)
    base_name = _module_name(model, base) if base is not None and base is not model else ""
    if not base_name or not layers_name.startswith(base_name + "."):
        raise CheckpointError(f"{where}: unsupported {arch}: no base model holding {layers_name}")
    norm_name = next(
        (f"{base_name}.{n}" for n in _FINAL_NORM_NAMES if isinstance(getattr(base, n, None), torch.nn.Module)), ""
    )
    head_name = _module_name(model, model.get_output_embeddings())
    if not head_name:
        raise CheckpointError(f"{where}: unsupported {arch}: no output embedding (LM head)")
    return HookSites(layers=layers_name, final_norm=norm_name, base=base_name, lm_head=head_name)
