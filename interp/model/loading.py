"""Load a local Hugging Face causal-LM directory behind one of three backends.

Safety: safetensors by default, pickled weights only when the caller allows it (and then
with `weights_only`), never `trust_remote_code`, never the hub (`local_files_only`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import torch

from interp.model.checkpoint import (
    CheckpointInfo,
    check_tensors,
    content_fingerprint,
    fingerprint,
    fingerprint_parts,
    identity_files,
    inspect_checkpoint,
    tokenizer_identity,
)
from interp.core.hashing import sha256_json
from interp.model.fingerprint import file_signature
from interp.core.errors import CheckpointError, ConfigError
from interp.model.devices import DTYPES, resolve_device, torch_dtype
from interp.model.hooksites import default_layer, discover_sites

BackendName = Literal["hf", "transformer_lens", "nnsight"]  # the built-in ones; see runner.backends.BACKEND_REGISTRY


@dataclass(kw_only=True)
class LoadedModel:
    """A checkpoint ready to score: tokenizer, backend and what identifies it."""

    info: CheckpointInfo
    tokenizer: object
    backend: object  # interp.runner.backends.Backend
    dtype: str = "float32"
    device: str = "cpu"  # where inputs go: the model's device (the embedding's, under a device_map)
    device_map: str | None = None
    _fingerprint: str | None = field(default=None, repr=False)
    # xxh3-128 of every byte that was loaded (interp.model.checkpoint.content_fingerprint); None for a
    # wrapped model, whose fingerprint is of its weights already. `load` leaves it computing in
    # the background (`_pending`): reading `content` waits for it.
    content_fingerprint: str | None = None
    # seconds: "hash" (content digest of the weight files, once done), "load" (all of `load`)
    timings: dict = field(default_factory=dict, repr=False)
    _pending: object | None = field(default=None, repr=False)

    @property
    def n_layers(self) -> int:
        return self.info.n_layers

    @property
    def d_model(self) -> int:
        return self.info.d_model

    @property
    def default_layer(self) -> int:
        return default_layer(self.info.n_layers)

    @property
    def device_class(self) -> str:
        """cpu / cuda / mps: what can change the numbers (the device index cannot)."""
        return self.device.split(":")[0]

    @cached_property
    def fingerprint(self) -> str:
        return self._fingerprint or fingerprint(self.info)

    @property
    def content(self) -> str:
        """What a unit records as the bytes it ran on (waits for the hash `load` started)."""
        if self._pending is not None:
            self.content_fingerprint, self.timings["hash"] = self._pending.result()
            self._pending = None
        return self.content_fingerprint or self.fingerprint

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


# Tokenizers loaded in this process by tokenizer identity (content hashes of every input-shaping
# file, model_type, tokenizer_class): a sweep plans with the tokenizer and then loads the same
# checkpoint, and a Gemma-3 tokenizer takes seconds to build (transformers parses its 33 MB JSON
# three times). An edited tokenizer file has another identity and is loaded afresh. Bounded:
# one large tokenizer holds ~300 MiB.
TOKENIZER_CACHE_SIZE = 4
_tokenizers: OrderedDict[str, object] = OrderedDict()
_tokenizers_lock = threading.Lock()  # Dask workers with several threads share a process


def shared_tokenizer(info: CheckpointInfo, parts: dict | None = None) -> object:
    """`load_tokenizer(info.path)`, loaded once per process for each tokenizer identity.

    `parts`: the checkpoint's `fingerprint_parts` when the caller has them (no rehashing).
    Every caller gets the same object: read it, do not modify it (copy it first)."""
    key = tokenizer_identity(info, parts)
    with _tokenizers_lock:
        tok = _tokenizers.get(key)
        if tok is not None:
            _tokenizers.move_to_end(key)
            return tok
    tok = load_tokenizer(info.path)
    with _tokenizers_lock:
        _tokenizers[key] = tok
        while len(_tokenizers) > TOKENIZER_CACHE_SIZE:
            _tokenizers.popitem(last=False)
    return tok


def clear_tokenizer_cache() -> None:
    with _tokenizers_lock:
        _tokenizers.clear()


def load_hf_model(
    info: CheckpointInfo, dtype: str = "float32", *, device: str = "cpu", device_map: str | dict | None = None
) -> torch.nn.Module:
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
            dtype=torch_dtype(dtype),
            # accelerate places the blocks over the devices; without a map the model goes to `device`
            **({"device_map": device_map} if device_map is not None else {}),
        )
    except Exception as exc:
        mismatch = _shape_mismatch(info)
        if mismatch:
            raise CheckpointError(f"{info.path}: weights cannot be loaded: {mismatch}") from None
        raise CheckpointError(f"{info.path}: weights cannot be loaded ({type(exc).__name__}: {exc})") from None
    if device_map is None and device != "cpu":
        model = model.to(device)
    return model.eval()


def _shape_mismatch(info: CheckpointInfo) -> str | None:
    """Name the first tensor whose shape in the files differs from what config.json implies
    (transformers only says "look at the above report", which its logging hides)."""
    if info.pickled:
        return None
    try:
        from transformers import AutoConfig, AutoModelForCausalLM

        from interp.model.fingerprint import safetensors_header

        config = AutoConfig.from_pretrained(info.path, local_files_only=True, trust_remote_code=False)
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in AutoModelForCausalLM.from_config(config).state_dict().items()}
        for name in info.weight_files:
            for tensor, meta in safetensors_header(info.path / name).items():
                if tensor == "__metadata__" or not isinstance(meta, dict):
                    continue
                want = expected.get(tensor)
                got = tuple(meta.get("shape", ()))
                if want is not None and want != got:
                    return f"{name}: tensor {tensor} has shape {list(got)} but config.json implies {list(want)}"
    except Exception:  # noqa: BLE001 - a diagnosis only; the caller reports the original error
        return None
    return None


def check_tokenizer_fits(info: CheckpointInfo, tokenizer: object, n_embeddings: int) -> None:
    n_tok = len(tokenizer)
    if n_tok > n_embeddings:
        raise CheckpointError(
            f"{info.path}: tokenizer has {n_tok} tokens but the embedding matrix has {n_embeddings} rows"
        )


class _Background:
    """Run `fn` in a thread; `result()` joins it and returns (value, seconds) or re-raises."""

    def __init__(self, fn):
        self._value = self._error = None
        self._seconds = 0.0

        def run():
            t = time.perf_counter()
            try:
                self._value = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = exc
            self._seconds = time.perf_counter() - t

        self._thread = threading.Thread(target=run, name="interp-content-hash", daemon=True)
        self._thread.start()

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value, self._seconds


def load(
    path: str | Path,
    *,
    backend: BackendName = "hf",
    dtype: str = "float32",
    device: str = "cpu",
    device_map: str | dict | None = None,
    allow_pickle: bool = False,
    threads: int | None = None,
    full_hash: bool = False,
) -> LoadedModel:
    """Load a local checkpoint directory behind one backend; errors are one line naming the directory.

    The fingerprint is of what was loaded: it is taken just before loading, and the files'
    (size, mtime, inode, ctime) are compared before and after; a checkpoint that changed
    meanwhile (a live training directory) is refused rather than scored under a stale id.

    Parameters
    ----------
    path : str or Path
        A Hugging Face causal-LM directory (config.json, tokenizer, safetensors weights).
    backend : {"hf", "transformer_lens", "nnsight"}
        Which library runs the forward (the numbers agree to float error).
    dtype : str
        Weights and activations: "float32" (the default and the reference), "float32-medium",
        "mixed-bf16-medium", "mixed-bf16", "bfloat16" or "float16" (docs/commands.md).
    device : str
        "cpu", "cuda", "cuda:N" or "auto" (cuda when available, else cpu).
    device_map : str or dict, optional
        Handed to accelerate (e.g. "auto") for a model larger than one device; inputs then go to
        the embedding's device and the hooks read each block where it lives.
    allow_pickle : bool
        Load pickled ``.bin`` weights (with ``weights_only``); safetensors only otherwise.
    threads : int, optional
        torch threads (None: leave torch's setting).
    full_hash : bool
        Fingerprint the weights by hashing every byte (default: header and sampled blocks).

    Returns
    -------
    LoadedModel
        Tokenizer, backend and the checkpoint's identity.

    Raises
    ------
    CheckpointError
        A missing, incomplete, remote-code or changing checkpoint.
    ConfigError
        An unknown backend, dtype or device.
    """
    from interp.runner.backends import BACKEND_REGISTRY, make_backend

    t_load = time.perf_counter()
    spec = BACKEND_REGISTRY.get(backend)  # unknown name: one-line ConfigError naming the choices
    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} unknown (choose one of {', '.join(DTYPES)})")
    device = resolve_device(device)
    if threads:
        torch.set_num_threads(int(threads))
    info = inspect_checkpoint(path, allow_pickle=allow_pickle)
    if spec.needs_safetensors and info.pickled:
        raise CheckpointError(f"{info.path}: backend {backend} needs safetensors weights")
    files = identity_files(info)
    before = file_signature(info.path, files)
    parts = fingerprint_parts(info, full_hash=full_hash)
    fp = sha256_json(parts)

    # Every weight byte is hashed as it is first read: this pass brings the files' pages into
    # the page cache and transformers then maps those same pages (no second read from disk).
    # It runs in a thread beside the tokenizer, the model construction and the first scoring
    # (file reads and xxhash release the GIL) and is joined when a unit needs it
    # (`LoadedModel.content`), where the files' signatures are compared once more.
    def digest() -> str:
        content = content_fingerprint(info, fresh=True)
        if file_signature(info.path, files) != before:
            raise CheckpointError(
                f"{info.path}: files changed while loading; the checkpoint is being written, retry when it is complete"
            )
        return content

    hashing = _Background(digest)
    tokenizer = shared_tokenizer(info, parts)
    hf_model = load_hf_model(info, dtype, device=device, device_map=device_map)
    after = file_signature(info.path, files)
    if after != before or fingerprint(info, full_hash=full_hash) != fp:
        changed = sorted(n for n in files if before.get(n) != after.get(n)) or ["contents"]
        raise CheckpointError(
            f"{info.path}: files changed while loading ({', '.join(changed)}); "
            "the checkpoint is being written, retry when it is complete"
        )
    check_tensors(info, hf_model.state_dict())  # dtype, shape, NaN/Inf: one line naming the tensor
    sites = discover_sites(hf_model, info.n_layers, where=str(info.path), model_type=info.model_type)
    check_tokenizer_fits(info, tokenizer, hf_model.get_input_embeddings().num_embeddings)
    be = make_backend(
        backend, info=info, hf_model=hf_model, sites=sites, dtype=dtype, device=device, device_map=device_map
    )
    input_device = str(be.device)
    return LoadedModel(
        info=info,
        tokenizer=tokenizer,
        backend=be,
        dtype=dtype,
        device=input_device,
        device_map=device_map if isinstance(device_map, str) else None,
        _fingerprint=fp,
        timings={"load": time.perf_counter() - t_load},
        _pending=hashing,
    )
