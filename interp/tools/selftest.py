"""`interp selftest`: the first command on a new machine, cluster node or GPU.

Prints the environment, builds a tiny random model (no network, no test folder), and checks:
every installed backend at the chosen device/dtype against a plain Hugging Face forward
(max |d log-prob| against the tolerance derived in `interp.core.tolerance` from that dtype's
epsilon), the residual capture against `output_hidden_states`, a cache write/read with its
checksums (and a damaged copy refused), and a two-checkpoint sweep and its resume. One line per
check; `run_selftest` returns the checks, the command exits 1 if any failed.
"""

from __future__ import annotations

import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from interp.core.tolerance import logprob_atol, logprob_scale_bound, residual_atol

CONTEXTS = [
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Are you sure? FINAL:",
    "আমি বাংলায় কথা বলি। উত্তর:",
    "मैं हिंदी बोलता हूँ। उत्तर:",
]
CONTINUATIONS = [" wrong", " acceptable"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: skipped (e.g. a backend not installed)
    detail: str

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}[self.ok]
        return f"{mark} {self.name}: {self.detail}"


def environment() -> list[str]:
    """interp, Python, torch, CUDA/ROCm, device names, CPU ISA, BLAS and threads."""
    import torch

    from interp.core.version import __version__

    cfg = torch.__config__.show()
    blas = next((p.split("=", 1)[1] for p in cfg.replace(",", " ").split() if p.startswith("BLAS_INFO=")), "?")
    lines = [
        f"interp {__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}",
        f"torch {torch.__version__}, CUDA {torch.version.cuda or 'no'}, ROCm {getattr(torch.version, 'hip', None) or 'no'}",
        f"CPU ISA {torch.backends.cpu.get_cpu_capability()}, BLAS {blas}, "
        f"mkldnn {torch.backends.mkldnn.is_available()}, threads {torch.get_num_threads()}",
    ]
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        lines.append(f"GPUs: {', '.join(names)}; TF32 matmul {torch.backends.cuda.matmul.allow_tf32}")
    else:
        lines.append("GPUs: none visible")
    return lines


@dataclass(frozen=True)
class Precision:
    """What the tolerance of a run at one --dtype on one device is derived from."""

    weights: object  # torch dtype the weights are loaded in (the reference forward's too)
    eps: float  # machine epsilon of the matmul operands
    accumulate_eps: float  # of the matmul accumulator
    operands: bool  # operands narrower than the reference's (mixed precision)

    def describe(self) -> str:
        return (
            f"weights {str(self.weights).replace('torch.', '')}, matmul eps {self.eps:.3g}, "
            f"accumulate eps {self.accumulate_eps:.3g}{', operands rounded' if self.operands else ''}"
        )


def precision(dtype_name: str, device: str) -> Precision:
    """From the dtype registry (`interp.model.devices`; a mixed precision's matmul dtype where the
    registry has one) and the device's matmul settings (TF32, reduced-precision reductions)."""
    import torch

    from interp.model import devices

    weights = devices.torch_dtype(dtype_name)  # unknown name: one-line ConfigError (exit 2)
    compute = getattr(devices, "matmul_dtype", devices.torch_dtype)(dtype_name)
    eps = float(torch.finfo(compute).eps)
    f32 = float(torch.finfo(torch.float32).eps)
    on_cuda = device.startswith("cuda")
    if compute == torch.float32 and on_cuda and torch.backends.cuda.matmul.allow_tf32:
        eps = 2.0**-10  # TF32 operands keep 10 mantissa bits
    reduced = {
        torch.bfloat16: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        torch.float16: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    }
    if dtype_name in devices.MEDIUM_DTYPES:  # the float32 matmuls' operands: what "medium" does here
        eps = max(eps, medium_eps(device))
    acc = eps if (on_cuda and reduced.get(compute, False)) else min(eps, f32)
    return Precision(
        weights=weights,
        eps=eps,
        accumulate_eps=acc,
        operands=compute != weights or (weights == torch.float32 and eps > f32),
    )


def medium_eps(device: str) -> float:
    """The operand epsilon of a float32 matmul at "medium" on `device`, from the planted probe
    (interp.runner.mixed.medium_operand_error): bf16's where it rounds operands to bf16, else
    the probe's own relative error (at least float32's)."""
    import torch

    from interp.runner.mixed import BF16_OPERANDS, medium_operand_error

    err = medium_operand_error(device)
    if err > BF16_OPERANDS:
        return float(torch.finfo(torch.bfloat16).eps)
    return max(err, float(torch.finfo(torch.float32).eps))


def describe_medium(device: str) -> str:
    from interp.runner.mixed import BF16_OPERANDS, medium_operand_error

    err = medium_operand_error(device)
    kind = "operands rounded to bfloat16" if err > BF16_OPERANDS else "near float32"
    return f'"medium" float32 matmul on {device}: a planted product off by {err:.1e} relative ({kind})'


def _reference(path: Path, device: str, dt) -> tuple[object, object]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dt).to(device).eval()
    tok = AutoTokenizer.from_pretrained(path)
    torch.set_grad_enabled(False)
    return model, tok


def _plain_scores(model, tok, device: str) -> tuple[list[float], list[int], float, int]:
    """Sum of token log-probs of each (context, continuation) by one plain forward each;
    the number of continuation tokens; the largest logit range seen; the longest sequence."""
    import torch

    from interp.runner.scoring import split_continuation

    sums, lens, spread, longest = [], [], 0.0, 1
    for c in CONTEXTS:
        for o in CONTINUATIONS:
            ids, split = split_continuation(tok, c, o)
            z = model(torch.tensor([ids], device=device)).logits[0].float()
            lp = torch.log_softmax(z, -1)
            sums.append(sum(lp[i - 1, ids[i]].item() for i in range(split, len(ids))))
            lens.append(len(ids) - split)
            spread = max(spread, float((z.max(-1).values - z.min(-1).values).max()))
            longest = max(longest, len(ids))
    return sums, lens, spread, longest


def check_backends(path: Path, device: str, dtype_name: str) -> list[Check]:
    """Every registered backend against the plain forward, and the residual capture (hf)."""
    import numpy as np
    import torch

    import interp
    from interp.core.errors import InterpError
    from interp.runner.backends import BACKEND_REGISTRY
    from interp.runner.scoring import score_continuations, score_options

    prec = precision(dtype_name, device)
    model, tok = _reference(path, device, prec.weights)
    cfg = model.config
    ref, lens, spread, longest = _plain_scores(model, tok, device)
    m = logprob_scale_bound(spread, cfg.vocab_size)
    k = max(cfg.hidden_size, getattr(cfg, "intermediate_size", 0) or 0, longest)
    bound = dict(accumulate_eps=prec.accumulate_eps, operands=prec.operands)
    per_token = logprob_atol(prec.eps, logprob_scale=m, n_layers=cfg.num_hidden_layers, reduction_length=k, **bound)
    tol = np.asarray(lens, float) * per_token  # a sum over T tokens: T times one token's bound
    checks = []
    for name in BACKEND_REGISTRY.names():
        label = f"backend {name} {device} {dtype_name} vs plain HF"
        try:
            lm = interp.load(path, backend=name, device=device, dtype=dtype_name)
        except ImportError as exc:
            checks.append(Check(label, None, f"not installed ({exc.name or exc})"))
            continue
        except InterpError as exc:  # this backend refuses this device/dtype: say so; hf must not
            checks.append(Check(label, None if name != "hf" else False, f"not supported here: {exc}"))
            continue
        got = score_continuations(lm, [(c, CONTINUATIONS) for c in CONTEXTS]).sum_logp
        d = np.abs(np.asarray(got, float) - np.asarray(ref, float))
        ok = bool(np.all(d <= tol)) and bool(np.all(np.isfinite(got)))
        checks.append(Check(label, ok, f"max |d log-prob| {d.max():.2e} (tolerance {tol.max():.2e})"))
        del lm
    # residual capture: the engine's residual at the last prompt token = output_hidden_states
    lm = interp.load(path, device=device, dtype=dtype_name)
    layer = lm.default_layer
    s = score_options(lm, CONTEXTS, [o.strip() for o in CONTINUATIONS], layers=[layer])
    worst, scale = 0.0, 0.0
    for n, c in enumerate(CONTEXTS):
        ids = tok(c, return_tensors="pt").input_ids.to(device)
        hs = model(ids, output_hidden_states=True).hidden_states[layer][0, -1].float().cpu().numpy()
        worst = max(worst, float(np.abs(np.asarray(s.resid[layer][n], float) - hs).max()))
        scale = max(scale, float(np.abs(hs).max()))
    rtol = residual_atol(prec.eps, residual_scale=scale, n_layers=cfg.num_hidden_layers, reduction_length=k, **bound)
    # the cached residual's own rounding (stored in resid_dtype) is not part of this comparison
    checks.append(
        Check(
            f"residual capture layer {layer}",
            worst <= rtol,
            f"max |d resid| {worst:.2e} (tolerance {rtol:.2e}, scale {scale:.2g})",
        )
    )
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return checks


def check_cache_and_sweep(tree: Path, out: Path, device: str, dtype_name: str) -> list[Check]:
    """A two-checkpoint sweep; every unit read back with its checksums; a damaged copy refused;
    the same sweep again resumes (no unit recomputed, same tables)."""
    import h5py
    import numpy as np

    from analyses.bootstrap import MIN_CI_ITEMS
    from cache.store import CacheError, read_unit
    from interp.config import merge_run_config
    from sweeps.api import run_sweep

    cfg = merge_run_config({"device": device, "dtype": dtype_name, "n_boot": 20, "max_items": MIN_CI_ITEMS})
    # MIN_CI_ITEMS items: the smallest bank whose CIs are defined (fewer would warn in the output)
    kw = dict(studies=["pressure"], out=out, banks=["moral"], progress=False, report=False)
    tables = run_sweep([tree], cfg=cfg, **kw)
    units = sorted((out / "cache").rglob("*.h5"))
    checks = [Check("sweep of two checkpoints", len(units) == 2, f"{len(units)} unit(s) written, expected 2")]
    bad = []
    for u in units:
        try:
            read_unit(u, verify=True)
        except CacheError as exc:
            bad.append(str(exc))
    checks.append(Check("cache read with checksums", not bad and bool(units), bad[0] if bad else f"{len(units)} ok"))
    if units:  # a copy with one value changed must be refused
        damaged = out / "damaged.h5"
        damaged.write_bytes(units[0].read_bytes())
        with h5py.File(damaged, "r+") as f:
            name = _first_numeric_dataset(f)
            if name is not None:
                a = f[name][()]
                f[name][...] = np.asarray(a) + np.asarray(1, dtype=np.asarray(a).dtype)
        try:
            read_unit(damaged, verify=True)
            refused = False
        except CacheError:
            refused = True
        checks.append(Check("checksum refuses a damaged unit", refused, f"dataset {name} changed by 1"))
        damaged.unlink()
    before = {u: u.stat().st_mtime_ns for u in units}
    again = run_sweep([tree], cfg=cfg, **kw)
    same_units = {u: u.stat().st_mtime_ns for u in sorted((out / "cache").rglob("*.h5"))} == before
    same_tables = sorted(again) == sorted(tables) and all(again[k].equals(tables[k]) for k in tables)
    checks.append(
        Check(
            "sweep resume",
            same_units and same_tables,
            "no unit recomputed, same tables" if same_units and same_tables else "units rewritten or tables changed",
        )
    )
    return checks


def _first_numeric_dataset(f) -> str | None:
    found: list[str] = []

    def visit(name, obj):
        if not found and hasattr(obj, "dtype") and obj.dtype.kind in "fiu" and obj.size:
            found.append(name)

    f.visititems(visit)
    return found[0] if found else None


def run_selftest(
    device: str = "cpu", dtype: str = "float32", *, workdir: Path | None = None, echo: Callable[[str], None] = print
) -> list[Check]:
    """Run every check, echo one line each, return them. Bad device/dtype: ConfigError."""
    from interp.model.devices import resolve_device
    from interp.testing import build_tiny_model, build_tokenizer

    device = resolve_device(device)
    prec = precision(dtype, device)
    for line in environment():
        echo(line)
    from interp.model.devices import MEDIUM_DTYPES

    if dtype in MEDIUM_DTYPES:
        echo(describe_medium(device))
    echo(f"selftest on {device}, {dtype} ({prec.describe()})")
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        tok = build_tokenizer()
        tree = root / "run"
        for i, name in enumerate(("step100", "final")):
            build_tiny_model(tree / name, "llama", n_layers=2, d_model=32, seed=10 + i, tokenizer=tok)
        for step in (
            lambda: check_backends(tree / "final", device, dtype),
            lambda: check_cache_and_sweep(tree, root / "out", device, dtype),
        ):
            try:
                new = step()
            except Exception as exc:  # a check that crashes is a failed check, with its reason
                new = [Check("selftest step", False, f"{type(exc).__name__}: {exc}")]
            for c in new:
                echo(c.line())
            checks += new
    n_bad = sum(c.ok is False for c in checks)
    echo(f"selftest: {'all checks passed' if not n_bad else f'{n_bad} check(s) FAILED'}")
    return checks


def passed(checks: list[Check]) -> bool:
    """All checks held (skipped ones, e.g. a backend not installed, do not fail)."""
    return bool(checks) and all(c.ok is not False for c in checks)
