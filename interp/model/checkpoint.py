"""Checkpoint directories: validation before any weights are read, and fingerprints.

A fingerprint identifies a checkpoint by everything that shapes its numbers: config.json,
every file that shapes the input or generation (tokenizer files, special-tokens map,
tokenizer config with its chat template, generation config, chat template files; hashed in
full) and the weight files (sampled by default, see `interp.model.fingerprint`). Only regular
files are read, with size limits, so a FIFO or a link to /dev/zero is refused, never read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from interp.core.errors import CheckpointError
from interp.core.files import regular_file
from interp.model.fingerprint import CONTENT, checkpoint_digests
from interp.core.hashing import sha256_json

SAFE_WEIGHTS = ("*.safetensors",)
PICKLE_WEIGHTS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.ckpt")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")
# every file that shapes what the model reads or how it generates: part of the fingerprint
INPUT_FILES = TOKENIZER_FILES + (
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "generation_config.json",
    "chat_template.jinja",
    "chat_template.json",
)
MAX_CONFIG_BYTES = 16 << 20


@dataclass(frozen=True, kw_only=True)
class CheckpointInfo:
    path: Path
    name: str
    model_type: str
    n_layers: int
    d_model: int
    vocab_size: int
    weight_files: tuple[str, ...]
    pickled: bool
    max_positions: int | None = None  # context window from the config, when it states one


def _read_config(path: Path) -> dict:
    cfg_file = path / "config.json"
    if not cfg_file.exists():
        raise CheckpointError(f"{path}: no config.json (not a Hugging Face checkpoint directory)")
    regular_file(cfg_file, limit=MAX_CONFIG_BYTES, error=CheckpointError)
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{cfg_file}: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{cfg_file}: expected a JSON object")
    return cfg


def _text_config(cfg: dict) -> dict:
    # multimodal wrappers keep the language model's numbers in text_config
    return cfg.get("text_config") or cfg


# layer kinds whose state is a key/value cache over every earlier token; anything else in a
# config's `layer_types` (mamba, linear_attention, conv, hybrid) is a recurrent or state-space
# block: the residual at a position and the shared-prefix KV reuse mean something else there
_ATTENTION_LAYER_TYPES = {"attention", "full_attention", "sliding_attention", "chunked_attention"}


def check_architecture(model_type: str, tcfg: dict, where: Path) -> None:
    """Refuse, before any weights are read, what is not a decoder-only attention transformer.

    No fixed list of supported names: Transformers must know a causal-LM class for the
    model_type, its config must have attention heads, and no layer may be recurrent. The
    decoder blocks themselves are found in the loaded model (interp.model.hooksites.discover_sites).
    """
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not model_type:
        raise CheckpointError(f"{where}: field model_type missing (cannot tell the architecture)")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise CheckpointError(
            f"{where}: unsupported architecture model_type={model_type!r} (Transformers has no causal-LM class for it)"
        )
    try:
        defaults = AutoConfig.for_model(model_type).to_dict()
    except Exception as exc:  # an unknown or broken config class: one line
        raise CheckpointError(f"{where}: unsupported architecture model_type={model_type!r} ({exc})") from None
    merged = {**defaults, **tcfg}
    heads = merged.get("num_attention_heads", merged.get("n_head"))
    if (
        defaults.get("is_encoder_decoder")
        or not isinstance(heads, int)
        or heads <= 0
        or "num_attention_heads" not in defaults
        and "n_head" not in defaults
    ):
        raise CheckpointError(
            f"{where}: unsupported architecture model_type={model_type!r} (not a decoder-only attention transformer)"
        )
    kinds = {str(k) for key in ("layer_types", "layers_block_type") for k in (merged.get(key) or ())}
    if kinds - _ATTENTION_LAYER_TYPES:
        raise CheckpointError(
            f"{where}: unsupported architecture model_type={model_type!r} (recurrent or "
            f"hybrid layers: {', '.join(sorted(kinds - _ATTENTION_LAYER_TYPES))})"
        )


def inspect_checkpoint(path: str | Path, *, allow_pickle: bool = False) -> CheckpointInfo:
    """Validate a local checkpoint directory without loading weights; one-line errors."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: checkpoint directory does not exist")
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a directory")
    cfg = _read_config(path)
    if cfg.get("auto_map"):
        raise CheckpointError(
            f"{path / 'config.json'}: field auto_map requires trust_remote_code; interp never runs remote code"
        )
    tcfg = _text_config(cfg)
    model_type = str(tcfg.get("model_type") or cfg.get("model_type") or "")
    check_architecture(model_type, tcfg, path / "config.json")
    safe = sorted({p.name for pat in SAFE_WEIGHTS for p in path.glob(pat)})
    pickled = sorted({p.name for pat in PICKLE_WEIGHTS for p in path.glob(pat)})
    if not safe and not pickled:
        raise CheckpointError(f"{path}: no weight files (*.safetensors or pytorch_model*.bin)")
    if not safe and not allow_pickle:
        raise CheckpointError(
            f"{path}: only pickled weights ({pickled[0]}); refusing to unpickle. "
            "Convert to safetensors, or pass allow_pickle=True (--allow-pickle) to load with weights_only"
        )
    for name in (*safe, *pickled, *(f for f in INPUT_FILES if (path / f).exists())):
        regular_file(path / name, error=CheckpointError)  # a FIFO or device would hang the first read
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise CheckpointError(f"{path}: no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
    n_layers = tcfg.get("num_hidden_layers", tcfg.get("n_layer"))
    d_model = tcfg.get("hidden_size", tcfg.get("n_embd"))
    vocab = tcfg.get("vocab_size")
    for field, value in (("num_hidden_layers", n_layers), ("hidden_size", d_model), ("vocab_size", vocab)):
        if not isinstance(value, int) or value <= 0:
            raise CheckpointError(f"{path / 'config.json'}: field {field} missing or not a positive integer")
    check_config_size(
        path,
        n_layers=int(n_layers),
        d_model=int(d_model),
        vocab=int(vocab),
        ffn=tcfg.get("intermediate_size"),
        weight_files=safe or pickled,
    )
    return CheckpointInfo(
        path=path,
        name=path.name,
        model_type=model_type,
        n_layers=int(n_layers),
        d_model=int(d_model),
        vocab_size=int(vocab),
        weight_files=tuple(safe or pickled),
        pickled=not safe,
        max_positions=next(
            (
                int(tcfg[k])
                for k in ("max_position_embeddings", "n_positions")
                if isinstance(tcfg.get(k), int) and tcfg[k] > 0
            ),
            None,
        ),
    )


def check_config_size(
    path: Path, *, n_layers: int, d_model: int, vocab: int, ffn: object, weight_files: list[str]
) -> None:
    """Refuse a config that implies far more parameters than the weight files can hold.

    Building such a model (10^9 layers, say) grows memory without bound before any weight
    is read. The bound is loose on purpose: every decoder layer has at least two d x d
    matrices (query and output projection) and, when stated, two d x ffn matrices; the
    embedding has vocab x d. Weights take at least half a byte per parameter (4-bit).
    """
    lower = n_layers * (2 * d_model * d_model) + vocab * d_model
    if isinstance(ffn, int) and ffn > 0:
        lower += n_layers * 2 * d_model * ffn
    total_bytes = sum(os.stat(path / f).st_size for f in weight_files)
    if lower > 2 * total_bytes:
        raise CheckpointError(
            f"{path / 'config.json'}: config implies at least {lower:.3g} parameters "
            f"(num_hidden_layers={n_layers}, hidden_size={d_model}) but its weights "
            f"({', '.join(weight_files[:3])}{', ...' if len(weight_files) > 3 else ''}) hold {total_bytes} bytes; "
            "refusing to build the model"
        )


def input_files(info: CheckpointInfo) -> list[str]:
    return [f for f in INPUT_FILES if (info.path / f).exists()]


def identity_files(info: CheckpointInfo) -> list[str]:
    """Every file the fingerprint covers (compared before and after a load)."""
    return ["config.json", *input_files(info), *info.weight_files]


def fingerprint_parts(info: CheckpointInfo, *, full_hash: bool = False) -> dict:
    """What the fingerprint is taken over: config, input-shaping files, weight digests."""
    return checkpoint_digests(
        info.path, config="config.json", inputs=input_files(info), weights=list(info.weight_files), full_hash=full_hash
    )


def fingerprint(info: CheckpointInfo, *, full_hash: bool = False) -> str:
    """Content identity of a checkpoint (sha256 hex); see `fingerprint_parts`."""
    return sha256_json(fingerprint_parts(info, full_hash=full_hash))


def content_fingerprint(info: CheckpointInfo, *, known_only: bool = False, fresh: bool = False) -> str | None:
    """Fingerprint of every byte of the checkpoint: config, input files (sha256) and each weight
    file's content digest (xxh3-128 of all its bytes, `interp.model.fingerprint.CONTENT`).

    Reads every weight byte unless memoised (always with `fresh`: what `interp.load` does);
    `known_only`: read no weight file and return None unless the memo holds the digest of every
    weight file as it is now."""
    parts = checkpoint_digests(
        info.path,
        config="config.json",
        inputs=input_files(info),
        weights=list(info.weight_files),
        mode=CONTENT,
        known_only=known_only,
        fresh=fresh,
    )
    return None if parts is None else sha256_json(parts)


def tokenizer_identity(info: CheckpointInfo, parts: dict | None = None) -> str:
    """Hash of the input-shaping files only: checkpoints sharing it share one tokenizer.
    `parts`: this checkpoint's `fingerprint_parts`, when the caller has them already."""
    if parts is None:
        parts = checkpoint_digests(info.path, config="config.json", inputs=input_files(info), weights=[])
    cfg = parts["config"] if isinstance(parts["config"], dict) else {}
    # AutoTokenizer may pick the class from config.json when tokenizer_config.json does not say
    return sha256_json(
        {"inputs": parts["inputs"], "model_type": cfg.get("model_type"), "tokenizer_class": cfg.get("tokenizer_class")}
    )


# safetensors dtype names of floating-point data (what a floating parameter may be stored as)
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"}
# parameters whose values are checked for NaN/Inf after loading: small (norms) or read by every
# token (embeddings), so the check is cheap and a non-finite value poisons every number
_FINITE_CHECKED = ("norm", "embed", "wte", "wpe", "ln_")


def check_tensors(info: CheckpointInfo, state: dict) -> None:
    """The loaded tensors are what the config says: each floating parameter stored as a floating
    dtype with the shape the model expects (from the safetensors headers), and the norms and
    embeddings finite. `state`: the loaded model's state_dict. One-line CheckpointError naming
    the file and the tensor; transformers would cast an I32 norm to float silently."""
    import torch

    from interp.model.fingerprint import safetensors_header

    if not info.pickled:
        for name in info.weight_files:
            for tensor, meta in safetensors_header(info.path / name).items():
                param = state.get(tensor)
                if tensor == "__metadata__" or not isinstance(meta, dict) or param is None:
                    continue
                got = str(meta.get("dtype"))
                if param.is_floating_point() and got not in FLOAT_DTYPES:
                    raise CheckpointError(
                        f"{info.path / name}: tensor {tensor} is stored as {got}, but the model's parameter is "
                        f"floating point ({str(param.dtype).removeprefix('torch.')}); refusing to cast it"
                    )
                if list(meta.get("shape", [])) != list(param.shape):
                    raise CheckpointError(
                        f"{info.path / name}: tensor {tensor} has shape {list(meta.get('shape', []))} but config.json "
                        f"implies {list(param.shape)}"
                    )
    for tensor, param in state.items():
        if param.is_floating_point() and any(k in tensor for k in _FINITE_CHECKED) and param.device.type != "meta":
            with torch.no_grad():
                finite = bool(torch.isfinite(param).all())
            if not finite:
                bad = int((~torch.isfinite(param)).sum())
                raise CheckpointError(f"{info.path}: tensor {tensor} holds {bad} NaN or infinite value(s)")
