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
# Offered in --help (issue 50): float32, and the reduced kinds that paid on some workload measured on
# a named machine kind (BENCHMARKS.md, "Precision kinds": the moral bank, long chat contexts and cloze
# on AMD EPYC, 2 threads; docs/commands.md, Precision). A kind pays when float32's time over its own
# reaches the 1.2x floor precision.csv warns under (analyses.precision.SPEEDUP_FLOOR). The others stay
# accepted, so units computed at them stay valid, and --help gives each one line (HIDDEN; the same
# words in interp.studies.base.RunConfig.dtype, which may not import torch).
OFFERED: tuple[str, ...] = ("float32", "mixed-bf16")
HIDDEN: dict[str, str] = {
    "float32-medium": "no faster than float32 on any of the three workloads measured",
    "mixed-bf16-medium": "under the 1.2x floor on all three workloads measured",
    "bfloat16": "verdicts moved beyond the audit's bounds, no tie guard",
    "float16": "no fast float16 matmul on the project's CPUs; not measured on a GPU",
}


def bf16_matmul_supported() -> bool:
    """Whether this CPU has a native bf16 matmul path (AVX-512 BF16 or AMX, as oneDNN reports it)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def no_gain_reason(name: str, device: str) -> str | None:
    """Why a user cannot benefit from `--dtype name` on `device` (None: they may; measure it).

    On a CPU without a native bf16 matmul path, "medium" computes float32 and bf16 operands are
    emulated, so no reduced kind can be faster than float32; float16 has no fast CPU matmul."""
    torch_dtype(name)  # unknown name: one-line ConfigError
    if name in HIDDEN:
        return HIDDEN[name]
    if name == "float32" or not device.startswith("cpu") or bf16_matmul_supported():
        return None
    return "this CPU has no native bf16 matmul (AVX-512 BF16 or AMX): no faster than float32 here"


def kinds_here(device: str) -> tuple[list[str], dict[str, str]]:
    """(--dtype kinds worth trying on `device`, {hidden kind: why}): OFFERED less those this device
    cannot speed up, and every hidden kind with its reason."""
    hidden = {n: r for n in DTYPES if (r := no_gain_reason(n, device)) is not None}
    return [n for n in OFFERED if n not in hidden], hidden


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
