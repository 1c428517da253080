"""Emulate a machine whose "medium" float32 matmuls round their operands to bf16.

torch's "medium" precision lets the kernel round float32 operands to bf16 and accumulate in float32.
Whether it does is the machine's choice: this project's AMD CPU (AVX512-BF16, no AMX) keeps nearly
float32 products; oneDNN's AMX kernels and GPUs with a bf16 path may round. The error a
`float32-medium` or `mixed-bf16-medium` run carries there can still be measured here: inside
`bf16_operand_kernels()`, every float32 `F.linear` / `torch.matmul` / `torch.addmm` called at "medium"
rounds both operands to bf16 (round to nearest even, as the hardware converts) and multiplies the
rounded values in float32. A product of two bf16 numbers is exact in float32 (8 + 8 significant bits),
so this is such a kernel up to the order of its float32 sums. Speed is not emulated: only what the
numbers would be. Used by `python -m bench medium_bf16_operands_error` and the tests of the fallback in
`interp.runner.mixed.make_mixed_medium`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F


def _round(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(torch.float32)


def _rounds(*operands: torch.Tensor) -> bool:
    return torch.get_float32_matmul_precision() == "medium" and all(
        isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in operands
    )


@contextlib.contextmanager
def bf16_operand_kernels() -> Iterator[None]:
    """Within the block, "medium" float32 matmuls (F.linear, torch.matmul, torch.addmm) take bf16-rounded
    operands; the probe `interp.runner.mixed.medium_operand_error` reports it (its cache is cleared on
    entry and exit). Parameters' rounded copies are kept for the block (keyed by storage and version)."""
    from interp.runner import mixed

    linear, matmul, addmm = F.linear, torch.matmul, torch.addmm
    rounded: dict[tuple[int, int, tuple[int, ...]], torch.Tensor] = {}

    def weight(w: torch.Tensor) -> torch.Tensor:
        if not isinstance(w, torch.nn.Parameter):  # an activation's storage is reused: never cached
            return _round(w)
        key = (w.data_ptr(), w._version, tuple(w.shape))
        if key not in rounded:
            rounded[key] = _round(w)
        return rounded[key]

    def highest(fn, *args, **kwargs):
        with mixed._matmul_precision("highest"):
            return fn(*args, **kwargs)

    def round_linear(x, w, b=None):
        return highest(linear, _round(x), weight(w), b) if _rounds(x, w) else linear(x, w, b)

    def round_matmul(a, b, **kwargs):
        return highest(matmul, _round(a), _round(b), **kwargs) if _rounds(a, b) else matmul(a, b, **kwargs)

    def round_addmm(bias, a, b, **kwargs):
        if not _rounds(a, b):
            return addmm(bias, a, b, **kwargs)
        return highest(addmm, bias, _round(a), weight(b), **kwargs)

    F.linear, torch.matmul, torch.addmm = round_linear, round_matmul, round_addmm
    mixed.medium_operand_error.cache_clear()
    try:
        yield
    finally:
        F.linear, torch.matmul, torch.addmm = linear, matmul, addmm
        mixed.medium_operand_error.cache_clear()
