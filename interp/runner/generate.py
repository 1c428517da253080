"""Seeded sampling from the reference (hf) backend, for sampled readouts and free generation."""
from __future__ import annotations

from typing import Sequence

import torch

from interp.errors import ConfigError
from interp.loading import LoadedModel
from interp.runner.scoring import encode


def generate(
    lm: LoadedModel,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    n: int = 1,
    seed: int = 0,
    batch_size: int = 8,
) -> list[list[str]]:
    """`n` sampled replies per prompt (decoded new text only). Deterministic for a seed.

    Each prompt gets its own generator state derived from (seed, prompt index), so results do
    not depend on batch composition.
    """
    model = getattr(lm.backend, "model", None)
    if lm.backend.name != "hf" or model is None:
        raise ConfigError("generation needs backend hf")
    if temperature <= 0:
        raise ConfigError("temperature must be > 0 for sampling")
    tok = lm.tokenizer
    out: list[list[str]] = []
    for i, prompt in enumerate(prompts):
        ids, _ = encode(tok, prompt)
        x = torch.tensor([ids], device=lm.backend.device)
        replies: list[str] = []
        for start in range(0, n, batch_size):
            k = min(batch_size, n - start)
            torch.manual_seed(hash((seed, i, start)) % (2**31))
            with torch.inference_mode():
                gen = model.generate(
                    x.expand(k, -1),
                    attention_mask=torch.ones(k, len(ids), dtype=torch.long, device=x.device),
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tok.pad_token_id,
                )
            replies.extend(tok.decode(g[len(ids):], skip_special_tokens=True) for g in gen)
        out.append(replies)
    return out
