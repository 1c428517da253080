"""Steering: add `alpha × direction` to the residual stream at resid_pre of one layer while scoring.

    with steering(lm, Steering(layer=L, direction=v, alpha=2.0, positions="read")):
        scores = score_options(lm, prompts, options)

The hook is a forward pre-hook on decoder block `layer` (its input is resid_pre L, the
TransformerLens `blocks.L.hook_resid_pre`), registered on entry and removed in `finally`.
Positions:
  all   every position of every forward (prefix segments computed once under prefix reuse
        are steered too, so the result equals steering the whole sequence)
  read  only the position whose next-token distribution is read first: the prompt's last
        token for option scoring, the context's last token for continuation scoring. The
        engine publishes those positions for each forward (`read_positions`, its one hook
        point); forwards with nothing to read (shared prefixes, tokens 2.. of a multi-token
        option) are not steered.
Residuals captured at the steered layer are the steered ones (the steering hook runs first).

The direction is used exactly as given (`alpha × direction`); `direction_from_*` helpers
return unit vectors and `projection_sd` gives the scale the CLI uses for `--units sd`.
"""

from __future__ import annotations

import contextvars
import glob
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from interp.core.errors import ConfigError
from interp.model.hooksites import discover_sites, get_module
from interp.runner import packed

Positions = Literal["all", "read"]

# per-row position (within the current forward's tokens) of the first read, -1 for none;
# set by the engine around each forward, None outside one
_READ_POSITIONS: contextvars.ContextVar[torch.Tensor | None] = contextvars.ContextVar("read_positions", default=None)


@contextmanager
def read_positions(positions: torch.Tensor) -> Iterator[None]:
    """Engine hook point: the read position of each row of the forward about to run."""
    token = _READ_POSITIONS.set(positions)
    try:
        yield
    finally:
        _READ_POSITIONS.reset(token)


@dataclass(frozen=True, kw_only=True)
class Steering:
    """A direction added to the residual stream: ``alpha × direction`` at resid_pre of ``layer``.

    Parameters
    ----------
    layer : int
        The decoder block whose input is steered.
    direction : numpy.ndarray
        A finite vector [d_model].
    alpha : float
        Its multiplier (0: no change).
    positions : {"all", "read"}
        Every token, or only the positions the engine reads (the last prompt token).
    source : str
        Where the direction came from (informative; the vector itself is hashed).
    """

    layer: int
    direction: np.ndarray  # [d_model]
    alpha: float
    positions: Positions = "all"
    source: str = ""  # where the direction came from (informative; the vector itself is hashed)

    def __post_init__(self) -> None:
        if self.positions not in ("all", "read"):
            raise ConfigError(f"steering positions {self.positions!r}: choose all or read")
        d = np.asarray(self.direction, dtype=np.float64)
        if d.ndim != 1 or not np.isfinite(d).all():
            raise ConfigError(
                f"steering direction ({self.source or 'array'}) must be a finite 1-D vector, got shape {d.shape}"
            )
        object.__setattr__(self, "direction", d)

    @property
    def direction_sha256(self) -> str:
        return hashlib.sha256(np.ascontiguousarray(self.direction, dtype="<f8").tobytes()).hexdigest()

    def identity(self) -> dict:
        """What enters the unit identity (settings hash): everything that changes numbers."""
        return {
            "layer": int(self.layer),
            "alpha": float(self.alpha),
            "positions": self.positions,
            "direction_sha256": self.direction_sha256,
        }

    def to_options(self) -> dict:
        """A JSON-able form for RunConfig.steering (travels to sweep workers)."""
        return {**self.identity(), "direction": self.direction.tolist(), "source": self.source}

    @classmethod
    def from_options(cls, o: Mapping) -> Steering:
        s = cls(
            layer=int(o["layer"]),
            direction=np.asarray(o["direction"], dtype=np.float64),
            alpha=float(o["alpha"]),
            positions=o.get("positions", "all"),
            source=str(o.get("source", "")),
        )
        if "direction_sha256" in o and o["direction_sha256"] != s.direction_sha256:
            raise ConfigError("steering options: direction does not match its recorded direction_sha256")
        return s


def _block(lm, layer: int) -> torch.nn.Module:
    """The torch module of decoder block `layer`, whichever backend serves `lm`."""
    be = lm.backend
    if getattr(be, "name", "") == "hf":
        return be.blocks[layer]
    if getattr(be, "name", "") == "transformer_lens":
        root = be.bridge.original_model
    elif getattr(be, "name", "") == "nnsight":
        root = be.model._module
    else:
        raise ConfigError(f"steering: backend {getattr(be, 'name', be)!r} not supported")
    sites = discover_sites(root, lm.n_layers, where=str(lm.info.path), model_type=lm.info.model_type)
    return get_module(root, sites.layers)[layer]


@contextmanager
def steering(lm, steer: Steering) -> Iterator[Steering]:
    """Add ``steer.alpha × steer.direction`` at resid_pre of ``steer.layer`` in every forward inside.

    The hook is removed when the block ends, whatever happens inside.

    Parameters
    ----------
    lm : LoadedModel
        The model to steer (any backend).
    steer : Steering
        What to add, where.

    Yields
    ------
    Steering
        ``steer`` itself.
    """
    if not 0 <= steer.layer < lm.n_layers:
        raise ConfigError(f"steering layer {steer.layer} outside 0..{lm.n_layers - 1}")
    if steer.direction.shape[0] != lm.d_model:
        raise ConfigError(
            f"steering direction ({steer.source or 'array'}) has {steer.direction.shape[0]} values; "
            f"the model's d_model is {lm.d_model}"
        )
    block = _block(lm, steer.layer)

    def hook(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        v = torch.as_tensor(steer.direction, dtype=hidden.dtype, device=hidden.device) * steer.alpha
        if steer.positions == "all":
            hidden = hidden + v
        else:
            pos = _READ_POSITIONS.get()
            p = packed.active()  # a packed forward: the rows' tokens as one sequence [1, N, d]
            rows_in = p.B if p is not None and hidden.shape[:2] == (1, p.n) else hidden.shape[0]
            if pos is None or pos.shape[0] != rows_in or not bool((pos >= 0).any()):
                return None
            hidden = hidden.clone()
            rows = torch.nonzero(pos >= 0).squeeze(-1)
            if rows_in != hidden.shape[0]:
                hidden[0, p.locate(rows * p.W + pos[rows])] += v
            else:
                hidden[rows, pos[rows]] += v
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hidden}

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield steer
    finally:
        handle.remove()


# ----------------------------------------------------------------- directions


def unit(v: np.ndarray, where: str) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64).ravel()
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n == 0:
        raise ConfigError(f"{where}: direction has zero or non-finite norm")
    return v / n


def direction_from_file(path: str | Path) -> np.ndarray:
    """A .npy vector (or an .npz probe-weights file written by `interp probe`), unit norm."""
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ConfigError(f"{path}: direction file does not exist") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a .npy/.npz direction ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        if "direction" not in data:
            raise ConfigError(f"{path}: .npz has no array 'direction' (has {', '.join(data.files)})")
        data = data["direction"]
    return unit(data, str(path))


def probe_weights_path(out: Path, *, study: str, target: str, layer: int, checkpoint: str, bank: str) -> Path:
    safe = checkpoint.replace("/", "--")
    return Path(out) / "results" / "probe_weights" / f"{study}_{target}_L{layer}_{safe}_{bank}.npz"


def direction_from_probe(
    out: Path, *, study: str, target: str, layer: int, checkpoint: str, bank: str | None = None
) -> tuple[np.ndarray, Path]:
    """Unit direction of the readout `interp probe` fitted on OUT's cache (raw residual space)."""
    folder = Path(out) / "results" / "probe_weights"
    name = probe_weights_path(out, study=study, target=target, layer=layer, checkpoint=checkpoint, bank="\0").name
    pattern = (
        "*".join(glob.escape(part) for part in name.split("\0"))
        if bank is None
        else glob.escape(
            probe_weights_path(out, study=study, target=target, layer=layer, checkpoint=checkpoint, bank=bank).name
        )
    )
    found = sorted(folder.glob(pattern))
    if not found:
        raise ConfigError(
            f"{folder}: no probe weights {pattern} (run `interp probe {out} --study {study} "
            f"--target {target} --layer {layer}` first)"
        )
    if len(found) > 1:
        raise ConfigError(
            f"{folder}: probe weights for several banks ({', '.join(p.name for p in found)}); pass the bank"
        )
    return direction_from_file(found[0]), found[0]


def projection_sd(resid: np.ndarray, direction: np.ndarray) -> float:
    """Standard deviation of the residuals' projection on a unit direction: the natural scale
    of that coordinate across trials (`--units sd` multiplies the unit direction by it)."""
    proj = np.asarray(resid, dtype=np.float64) @ unit(direction, "direction")
    sd = float(np.std(proj, ddof=1)) if len(proj) > 1 else 0.0
    if not np.isfinite(sd) or sd == 0:
        raise ConfigError("residual projection on the direction has zero spread; use --units raw")
    return sd


def steering_json(steer: Steering) -> str:
    return json.dumps({**steer.identity(), "source": steer.source}, sort_keys=True)
