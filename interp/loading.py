"""Load a local Hugging Face causal-LM directory behind one of three backends.

Safety: safetensors by default, pickled weights only when the caller allows it (and then
with `weights_only`), never `trust_remote_code`, never the hub (`local_files_only`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import torch

from interp.checkpoint import CheckpointInfo, fingerprint, inspect_checkpoint
from interp.errors import CheckpointError, ConfigError
from interp.hooksites import check_sites, default_layer, sites_for

BackendName = Literal["hf", "transformer_lens", "nnsight"]  # the built-in ones; see runner.backends.BACKEND_REGISTRY

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(kw_only=True)
class LoadedModel:
    """A checkpoint ready to score: tokenizer, backend and what identifies it."""

    info: CheckpointInfo
    tokenizer: object
    backend: object  # interp.runner.backends.Backend
    dtype: str = "float32"
    _fingerprint: str | None = field(default=None, repr=False)

    @property
    def n_layers(self) -> int:
        return self.info.n_layers

    @property
    def d_model(self) -> int:
        return self.info.d_model

    @property
    def default_layer(self) -> int:
        return default_layer(self.info.n_layers)

    @cached_property
    def fingerprint(self) -> str:
        return self._fingerprint or fingerprint(self.info)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


def load_tokenizer(path: Path) -> object:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # transformers raises many types; report one line
        raise CheckpointError(f"{path}: tokenizer cannot be loaded ({type(exc).__name__}: {exc})") from None
    if tok.pad_token_id is None:
        # right padding is masked out, so any id works; eos keeps the vocab unchanged
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.convert_ids_to_tokens(0)
    tok.padding_side = "right"
    return tok


def load_hf_model(info: CheckpointInfo, dtype: str = "float32") -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a weights bar per checkpoint drowns the sweep's own bars
    try:
        model = AutoModelForCausalLM.from_pretrained(
            info.path,
            local_files_only=True,
            trust_remote_code=False,
            use_safetensors=not info.pickled,
            dtype=_DTYPES[dtype],
        )
    except Exception as exc:
        raise CheckpointError(f"{info.path}: weights cannot be loaded ({type(exc).__name__}: {exc})") from None
    return model.eval()


def check_tokenizer_fits(info: CheckpointInfo, tokenizer: object, n_embeddings: int) -> None:
    n_tok = len(tokenizer)
    if n_tok > n_embeddings:
        raise CheckpointError(
            f"{info.path}: tokenizer has {n_tok} tokens but the embedding matrix has {n_embeddings} rows"
        )


def load(
    path: str | Path,
    *,
    backend: BackendName = "hf",
    dtype: str = "float32",
    allow_pickle: bool = False,
    threads: int | None = None,
) -> LoadedModel:
    """Load a local checkpoint directory. Errors are one line and name the directory."""
    from interp.runner.backends import BACKEND_REGISTRY, make_backend

    spec = BACKEND_REGISTRY.get(backend)  # unknown name: one-line ConfigError naming the choices
    if dtype not in _DTYPES:
        raise ConfigError(f"dtype {dtype!r} unknown (choose one of {', '.join(_DTYPES)})")
    if threads:
        torch.set_num_threads(int(threads))
    info = inspect_checkpoint(path, allow_pickle=allow_pickle)
    if spec.needs_safetensors and info.pickled:
        raise CheckpointError(f"{info.path}: backend {backend} needs safetensors weights")
    tokenizer = load_tokenizer(info.path)
    sites = sites_for(info.model_type)
    hf_model = load_hf_model(info, dtype)
    check_sites(hf_model, sites, info.n_layers, str(info.path))
    check_tokenizer_fits(info, tokenizer, hf_model.get_input_embeddings().num_embeddings)
    be = make_backend(backend, info=info, hf_model=hf_model, sites=sites, dtype=dtype)
    return LoadedModel(info=info, tokenizer=tokenizer, backend=be, dtype=dtype)
