"""`interp.wrap`: score and capture on a model the user already has in memory.

Accepts a Hugging Face causal LM (`transformers.PreTrainedModel`), a TransformerLens
`TransformerBridge`, or an nnsight `TransformersModel` / `LanguageModel`, each served by the
same backend class `interp.load` would use (hf, transformer_lens, nnsight), so the numbers are
the same as loading the same weights from a directory (tests/integration/test_wrap.py).

A wrapped model has no directory, hence no directory fingerprint. Its fingerprint is
`wrapped:<sha256 of config + every parameter and buffer>`, so two wraps of the same weights
share cache units and a fine-tuned copy does not; cache units record it as such (docs/cache.md) and
a sweep refuses to merge such units with directory-fingerprinted ones unless told
(`allow_unfingerprinted`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from interp.model.checkpoint import CheckpointInfo
from interp.core.errors import CheckpointError, ConfigError
from interp.model.hooksites import discover_sites
from interp.model.loading import LoadedModel, check_tokenizer_fits
from interp.runner.backends import HFBackend, NNsightBackend, TLBackend

WRAPPED_PREFIX = "wrapped:"


def is_wrapped_fingerprint(fp: str) -> bool:
    return str(fp).startswith(WRAPPED_PREFIX)


class _BridgeBackend(TLBackend):
    """TLBackend on a TransformerBridge the caller booted (TLBackend boots its own)."""

    def __init__(self, bridge):  # deliberately skips TLBackend.__init__ (which boots its own bridge)
        self.bridge = bridge
        self.device = bridge.original_model.get_input_embeddings().weight.device


class _EnvoyBackend(NNsightBackend):
    """NNsightBackend on an nnsight model the caller built."""

    def __init__(self, model, sites):  # skips NNsightBackend.__init__ (which builds its own model)
        self.model = model
        self.sites = sites
        self.device = model._module.get_input_embeddings().weight.device
        cfg = model._module.config
        cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        self.softcap = getattr(cfg, "final_logit_softcapping", None)  # as NNsightBackend


def _kind(model) -> str:
    cls = type(model)
    mod = cls.__module__
    if mod.startswith("transformer_lens") and hasattr(model, "original_model"):
        return "transformer_lens"
    if mod.startswith("nnsight") and hasattr(model, "trace"):
        return "nnsight"
    if isinstance(model, torch.nn.Module) and hasattr(model, "config") and hasattr(model, "get_output_embeddings"):
        return "hf"
    raise ConfigError(
        f"interp.wrap: cannot use a {cls.__module__}.{cls.__name__} (pass a Hugging Face causal LM, "
        "a TransformerLens TransformerBridge or an nnsight TransformersModel)"
    )


def _hf_module(model, kind: str) -> torch.nn.Module:
    if kind == "hf":
        return model
    if kind == "transformer_lens":
        return model.original_model
    return model._module  # nnsight keeps the wrapped torch module here


def content_fingerprint(hf_model: torch.nn.Module) -> str:
    """sha256 over the config and every parameter/buffer (name, dtype, shape, bytes)."""
    h = hashlib.sha256()
    h.update(hf_model.config.to_json_string(use_diff=False).encode())
    for name, t in sorted(hf_model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return WRAPPED_PREFIX + h.hexdigest()


def _info(hf_model: torch.nn.Module, name: str) -> CheckpointInfo:
    cfg = hf_model.config.get_text_config() if hasattr(hf_model.config, "get_text_config") else hf_model.config
    model_type = str(getattr(cfg, "model_type", "") or getattr(hf_model.config, "model_type", ""))
    n_layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    d_model = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None)
    max_pos = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if not n_layers or not d_model:
        raise CheckpointError(f"{name}: model config states no num_hidden_layers / hidden_size")
    return CheckpointInfo(
        path=Path(f"<in-memory {name}>"),
        name=name,
        model_type=model_type,
        n_layers=int(n_layers),
        d_model=int(d_model),
        vocab_size=int(getattr(cfg, "vocab_size", 0) or 0),
        weight_files=(),
        pickled=False,
        max_positions=int(max_pos) if max_pos else None,
    )


def wrap(model, tokenizer=None, *, name: str | None = None, fingerprint: str | None = None) -> LoadedModel:
    """A `LoadedModel` over a model already in memory: Hugging Face, TransformerBridge or nnsight.

    The model is put in eval mode (dropout off), as `interp.load` does, and served by the
    backend class `interp.load` would use, so the numbers are the same.

    Parameters
    ----------
    model : transformers.PreTrainedModel, TransformerBridge or nnsight model
        The model to score.
    tokenizer : optional
        Its tokenizer (default: the one an nnsight model carries).
    name : str, optional
        Display name in tables (default: the last part of the config's ``_name_or_path``, else
        the class name).
    fingerprint : str, optional
        Overrides the content hash of the weights (still prefixed ``wrapped:``).

    Returns
    -------
    LoadedModel
        With fingerprint ``wrapped:<sha256 of config and every parameter and buffer>``.

    Raises
    ------
    ConfigError
        An unsupported model kind, or no tokenizer.
    """
    kind = _kind(model)
    if tokenizer is None:
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None:
            raise ConfigError("interp.wrap: pass the tokenizer (the model does not carry one)")
    hf_model = _hf_module(model, kind)
    src = str(getattr(hf_model.config, "_name_or_path", "") or "")
    name = name or (Path(src).name if src else type(hf_model).__name__)
    info = _info(hf_model, name)
    sites = discover_sites(hf_model, info.n_layers, where=f"<in-memory {name}>", model_type=info.model_type)
    check_tokenizer_fits(info, tokenizer, hf_model.get_input_embeddings().num_embeddings)
    if tokenizer.pad_token_id is None:  # as load_tokenizer: right padding is masked, any id works
        tokenizer.pad_token = (
            tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.convert_ids_to_tokens(0)
        )
    tokenizer.padding_side = "right"
    hf_model.eval()
    if kind == "transformer_lens":
        model.eval()
        backend = _BridgeBackend(model)
    elif kind == "nnsight":
        backend = _EnvoyBackend(model, sites)
    else:
        backend = HFBackend(hf_model, sites)
    dtype = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(
        next(hf_model.parameters()).dtype, "float32"
    )
    fp = (WRAPPED_PREFIX + fingerprint.removeprefix(WRAPPED_PREFIX)) if fingerprint else content_fingerprint(hf_model)
    return LoadedModel(
        info=info, tokenizer=tokenizer, backend=backend, dtype=dtype, device=str(backend.device), _fingerprint=fp
    )
