"""Tolerances for comparing the engine with a plain Hugging Face forward (or two engine
configurations / backends with each other), derived from float error by
`interp.core.tolerance` with the model's own depth, widths, logit range and residual scale,
measured with a plain forward over the texts the test compares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from interp.core.tolerance import EPS, logprob_atol, logprob_scale_bound, residual_atol


@dataclass(frozen=True)
class Bounds:
    logp: float  # one token's log-probability
    resid: float  # one residual-stream entry (any layer)
    tokens: int  # most continuation tokens in one scored text (a sum over them: tokens * logp)

    @property
    def sum_logp(self) -> float:
        """A sum (or a log-sum-exp of sums: 1-Lipschitz in the max-norm) over <= `tokens` tokens."""
        return self.tokens * self.logp


def bounds_for(
    model_dir: Path,
    texts: list[str],
    *,
    tokens: int = 1,
    eps: float = EPS["float32"],
    min_length: int = 1,
    steer: tuple[int, np.ndarray] | None = None,
) -> Bounds:
    """K = max(width, MLP width, longest text, `min_length`); M = logit range + log V; residual
    scale = the largest |hidden state| entry; all over `texts` (prompt + continuation as scored;
    `min_length`: the longest scored sequence when `texts` only sample the model's range).
    `steer` = (layer, alpha x direction): measured with that vector added to the input of block
    `layer` at every position (a steered run's logits and residuals are that model's)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    cfg = model.config
    if steer is not None:
        layer, vec = steer
        add = torch.as_tensor(np.asarray(vec), dtype=torch.float32)
        decoder = model.get_decoder()
        block = (decoder.layers if hasattr(decoder, "layers") else decoder.h)[layer]  # llama-like / gpt2
        block.register_forward_pre_hook(
            lambda m, args, kw: (
                ((args[0] + add, *args[1:]), kw) if args else (args, {**kw, "hidden_states": kw["hidden_states"] + add})
            ),
            with_kwargs=True,
        )
    spread, scale, longest = 0.0, 0.0, 1
    for t in texts:
        ids = tok(t, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model(ids, output_hidden_states=True)
        z = out.logits[0].double()
        spread = max(spread, float((z.max(-1).values - z.min(-1).values).max()))
        scale = max(scale, max(float(h.abs().max()) for h in out.hidden_states))
        longest = max(longest, ids.shape[1])
    width = cfg.hidden_size
    mlp = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * width
    k = max(width, mlp, longest, min_length)
    m = logprob_scale_bound(spread, cfg.vocab_size)
    return Bounds(
        logp=logprob_atol(eps, logprob_scale=m, n_layers=cfg.num_hidden_layers, reduction_length=k),
        resid=residual_atol(eps, residual_scale=scale, n_layers=cfg.num_hidden_layers, reduction_length=k),
        tokens=int(tokens),
    )


def continuation_tokens(tok, pairs) -> int:
    """Most tokens any (context, continuation) pair scores (split as the engine splits it)."""
    from interp.runner.scoring import split_continuation

    return max(len(ids) - split for ids, split in (split_continuation(tok, c, o) for c, o in pairs))


def assert_tenth_of_bf16_error(med, f32, bf16) -> None:
    """float32-medium's largest log-prob change against float32 is at most a tenth of mixed-bf16's
    (zero on a CPU without a reduced-precision float32 path, and where "medium" rounds operands to
    bf16, as float32-medium computes in float32 there); bf16's must be nonzero, so the comparison
    has something to compare against. Arguments: score_options results."""
    err, err_bf16 = np.abs(med.logp - f32.logp).max(), np.abs(bf16.logp - f32.logp).max()
    assert err_bf16 > 0 and err <= err_bf16 / 10, (err, err_bf16)


def option_bounds(model_dir: Path, tokenizer, prompts: list[str], options: list[str], **kw) -> Bounds:
    """Bounds for `score_options(prompts, options)`: each option pooled over its surface forms
    (with and without a leading space), `tokens` the longest of them; `kw` as for `bounds_for`."""
    pairs = [(p, v + o) for p in prompts for o in options for v in ("", " ")]
    return bounds_for(model_dir, [c + o for c, o in pairs], tokens=continuation_tokens(tokenizer, pairs), **kw)
