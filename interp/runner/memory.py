"""Where a backend's model lives, how much memory a forward needs, and out-of-memory errors.

The engine takes the device from the model itself (`next(model.parameters()).device`), never
a fixed one, and sizes each forward from the device's free memory: the padded KV cache of the
parents, the new tokens' activations, attention scores and the read logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _module_of(backend) -> torch.nn.Module | None:
    for attr in ("model", "bridge"):
        m = getattr(backend, attr, None)
        if isinstance(m, torch.nn.Module):
            return m
        inner = getattr(m, "_model", None)  # nnsight wraps the torch module
        if isinstance(inner, torch.nn.Module):
            return inner
    return None


def backend_device(backend) -> torch.device:
    dev = getattr(backend, "device", None)
    if isinstance(dev, (str, torch.device)):
        return torch.device(dev)
    m = _module_of(backend)
    if m is not None:
        for p in m.parameters():
            if p.device.type != "meta":  # device_map offload leaves meta placeholders
                return p.device
    return torch.device("cpu")


@dataclass(frozen=True)
class Footprint:
    """Bytes per row of a forward, from the model's config (estimates, erring high)."""

    kv_per_token: int  # K and V over all layers
    act_per_token: int  # hidden states and MLP intermediates alive at once
    heads: int
    vocab: int
    sliding_window: int | None = None

    def row_bytes(self, past: int, width: int, reads: int) -> int:
        total = past + width
        return (
            total * self.kv_per_token
            + width * self.act_per_token
            + 4 * self.heads * width * total  # attention scores of one layer (float32)
            + 8 * reads * self.vocab
        )  # logits + log-softmax in float32


def footprint_of(backend) -> Footprint:
    m = _module_of(backend)
    cfg = getattr(m, "config", None)
    if cfg is not None and hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    if cfg is None:  # unknown model: a generous guess (a 7B-class layer stack)
        return Footprint(kv_per_token=2 * 32 * 4096 * 4, act_per_token=20 * 4096 * 4, heads=32, vocab=128_000)
    elem = next(m.parameters()).element_size()
    n_layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 1)
    d = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 1)
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", 1)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or d // heads
    inter = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * d
    vocab = getattr(cfg, "vocab_size", 0)
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if window is not None and types is not None and "sliding_attention" not in types:
        window = None
    if window is not None and types is None and getattr(cfg, "use_sliding_window", True) is False:
        window = None
    return Footprint(
        kv_per_token=2 * n_layers * kv_heads * head_dim * elem,
        act_per_token=(6 * d + 3 * inter) * elem,
        heads=heads,
        vocab=vocab,
        sliding_window=int(window) if window else None,
    )


def free_bytes(device: torch.device) -> float:
    """Free memory on the device: CUDA's free plus what its caching allocator holds unused;
    on CPU, the system's available memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(8 << 30)


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    msg = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


def release_cached(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
