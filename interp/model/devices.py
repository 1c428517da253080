"""Devices and precisions by name: what `--device` and `--dtype` accept, checked early."""

from __future__ import annotations

import torch

from interp.core.errors import ConfigError

# name -> the dtype the weights are loaded in. `mixed-bf16` keeps float32 weights and runs the
# dense matmuls on bf16 copies (interp.runner.mixed); everything else stays float32.
# `float32-medium`: all float32, the blocks' matmuls at torch's "medium" float32 precision.
# `mixed-bf16-medium`: float32-medium with bf16 operands in the MLP's gate / up projections.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "mixed-bf16": torch.float32,
    "float32-medium": torch.float32,
    "mixed-bf16-medium": torch.float32,
}
# reduced precisions whose model keeps float32 weights and switches to float32 in place: the
# precision audit's reference is the same model, and the tie guard (ScoringConfig.tie_guard) applies
SWITCHABLE: tuple[str, ...] = tuple(n for n, d in DTYPES.items() if d == torch.float32 and n != "float32")


def tie_guard_in_force(dtype: str, tie_guard: float) -> float:
    """The tie guard a run at `dtype` applies: `tie_guard` where the precision is switchable, else 0."""
    return tie_guard if dtype in SWITCHABLE else 0.0


# names whose float32 matmuls run at torch's "medium" precision (interp.runner.mixed: how exact that
# is depends on the machine's kernel, `medium_operand_error` probes it)
MEDIUM_DTYPES: tuple[str, ...] = ("float32-medium", "mixed-bf16-medium")

# mixed names -> the dtype of their matmul operands
MIXED: dict[str, torch.dtype] = {"mixed-bf16": torch.bfloat16, "mixed-bf16-medium": torch.bfloat16}


def torch_dtype(name: str) -> torch.dtype:
    """The dtype weights are loaded in (float32 for the mixed precisions)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(f"dtype {name!r} unknown (choose one of {', '.join(DTYPES)})") from None


def matmul_dtype(name: str) -> torch.dtype:
    """The dtype the dense matmuls run in: the weights' own, or a mixed precision's operands."""
    return MIXED.get(name) or torch_dtype(name)


def is_reduced(name: str) -> bool:
    """Anything but plain float32: such runs measure their own error against float32."""
    torch_dtype(name)  # unknown name: one-line ConfigError
    return name != "float32"


def resolve_device(name: str | None) -> str:
    """`cpu`, `cuda`, `cuda:N`, `mps` or `auto` -> a concrete device string, or one clear error."""
    name = (name or "cpu").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"device {name!r} unknown (choose cpu, cuda, cuda:N or auto)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device {name!r} requested but CUDA is not available "
                f"(torch {torch.__version__}, built for CUDA: {torch.version.cuda or 'no'})"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r} requested but only {torch.cuda.device_count()} CUDA device(s) visible")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise ConfigError(f"device {name!r} requested but MPS is not available")
    elif dev.type != "cpu":
        raise ConfigError(f"device {name!r} unsupported (choose cpu, cuda, cuda:N or auto)")
    return str(dev)


def device_class(name: str | None) -> str:
    """What of a device can change numbers: its type, not its index (cuda:3 == cuda).

    Parsed, not checked for availability: a driver without a GPU plans units for GPU workers.
    `auto` is resolved where it is planned; name the device for a cluster sweep."""
    name = (name or "cpu").strip().lower()
    if name == "auto":
        return resolve_device(name)
    try:
        return torch.device(name).type
    except (RuntimeError, ValueError):
        raise ConfigError(f"device {name!r} unknown (choose cpu, cuda, cuda:N or auto)") from None
