"""Checkpoint directories: validation before any weights are read, and fingerprints.

A fingerprint identifies a checkpoint by content: the hash of config.json plus the hash of
every weight file (sorted by name). Weight hashes are memoised on disk keyed by
(absolute path, size, mtime) so a sweep over hundreds of checkpoints hashes each file once.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from interp.core.atomic import atomic_write_text
from interp.errors import CheckpointError
from interp.hashing import sha256_file, sha256_json
from interp.hooksites import HOOK_SITES

SAFE_WEIGHTS = ("*.safetensors",)
PICKLE_WEIGHTS = ("pytorch_model*.bin", "*.pt", "*.pth", "*.ckpt")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")


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


def _fp_memo_path() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "interp" / "weight_hashes.json"


def _memo_hash(path: Path) -> str:
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    memo_file = _fp_memo_path()
    try:
        memo = json.loads(memo_file.read_text())
    except (OSError, ValueError):
        memo = {}
    if key in memo:
        return memo[key]
    digest = sha256_file(path)
    memo[key] = digest
    try:  # the memo is an optimisation: failing to write it must never fail a run
        atomic_write_text(memo_file, json.dumps(memo))
    except OSError:
        pass
    return digest


def _read_config(path: Path) -> dict:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise CheckpointError(f"{path}: no config.json (not a Hugging Face checkpoint directory)")
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
    if model_type not in HOOK_SITES:
        raise CheckpointError(
            f"{path / 'config.json'}: unsupported architecture model_type={model_type!r} "
            f"(supported: {', '.join(sorted(HOOK_SITES))})"
        )
    safe = sorted({p.name for pat in SAFE_WEIGHTS for p in path.glob(pat)})
    pickled = sorted({p.name for pat in PICKLE_WEIGHTS for p in path.glob(pat)})
    if not safe and not pickled:
        raise CheckpointError(f"{path}: no weight files (*.safetensors or pytorch_model*.bin)")
    if not safe and not allow_pickle:
        raise CheckpointError(
            f"{path}: only pickled weights ({pickled[0]}); refusing to unpickle. "
            "Convert to safetensors, or pass allow_pickle=True (--allow-pickle) to load with weights_only"
        )
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise CheckpointError(f"{path}: no tokenizer (tokenizer.json, tokenizer.model or vocab.json)")
    n_layers = tcfg.get("num_hidden_layers", tcfg.get("n_layer"))
    d_model = tcfg.get("hidden_size", tcfg.get("n_embd"))
    vocab = tcfg.get("vocab_size")
    for field, value in (("num_hidden_layers", n_layers), ("hidden_size", d_model), ("vocab_size", vocab)):
        if not isinstance(value, int) or value <= 0:
            raise CheckpointError(f"{path / 'config.json'}: field {field} missing or not a positive integer")
    return CheckpointInfo(
        path=path,
        name=path.name,
        model_type=model_type,
        n_layers=int(n_layers),
        d_model=int(d_model),
        vocab_size=int(vocab),
        weight_files=tuple(safe or pickled),
        pickled=not safe,
        max_positions=next((int(tcfg[k]) for k in ("max_position_embeddings", "n_positions")
                            if isinstance(tcfg.get(k), int) and tcfg[k] > 0), None),
    )


def fingerprint(info: CheckpointInfo) -> str:
    """Content hash of config + weights (sha256 hex)."""
    cfg = json.loads((info.path / "config.json").read_text(encoding="utf-8"))
    weights = {name: _memo_hash(info.path / name) for name in info.weight_files}
    return sha256_json({"config": cfg, "weights": weights})
