"""Batched, seeded sampling for sampled readouts and free generation (backend hf).

The prompts run through the engine's prefix tree (shared instructions and items computed
once); each prompt's KV cache is then copied `n` times into a padded batch with other
prompts' (gaps masked, explicit positions), and all rows decode together, one token per
forward. Finished rows leave the batch.

Reproducibility: prompt p draws from its own generator seeded by `sample_seed(seed, prompt,
k)` (k counts earlier identical prompts in the call), so a trial's replies do not depend on
which other prompts are in the call, on the batch size or on the order. Each step draws
`torch.multinomial(softmax(logits / T), 1)` over the prompt's `n` rows, exactly as Hugging
Face `generate(do_sample=True, top_k=0, top_p=1, num_return_sequences=n)` does after
`torch.manual_seed(sample_seed(...))` on the same device: rows that finished still take
their draw, so the random stream stays aligned. `temperature=0` is greedy decoding.
Stop strings end a reply; the returned text stops before the stop string.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from interp.core.errors import ConfigError
from interp.model.loading import LoadedModel
from interp.runner.engine import Engine, EngineConfig, HookContext, Seq, pack_past
from interp.runner.options import SAMPLER  # noqa: F401  (re-exported)
from interp.runner.memory import free_bytes, is_oom, release_cached
from interp.runner.scoring import encode


def sample_seed(seed: int, prompt: str, occurrence: int = 0) -> int:
    """The generator seed of one prompt (63 bits of sha256 over seed, prompt, occurrence)."""
    h = hashlib.sha256(f"{int(seed)}\0{occurrence}\0{prompt}".encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def _eos_ids(lm: LoadedModel) -> set[int]:
    ids: set[int] = set()
    gc = getattr(getattr(lm.backend, "model", None), "generation_config", None)
    eos = getattr(gc, "eos_token_id", None)
    for src in (eos, lm.tokenizer.eos_token_id):
        if isinstance(src, int):
            ids.add(src)
        elif src is not None:
            ids.update(int(t) for t in src)
    return ids


class _Sampler:
    def __init__(self, lm, prompts, *, n, temperature, max_new_tokens, stop, seed, max_rows, memory_fraction, hooks):
        self.lm, self.backend, self.tok = lm, lm.backend, lm.tokenizer
        self.prompts, self.n, self.temperature = prompts, n, temperature
        self.max_new, self.stop = max_new_tokens, [s for s in (stop or []) if s]
        self.max_rows, self.memory_fraction = max_rows, memory_fraction
        self.hooks = hooks
        self.eos = _eos_ids(lm)
        self.pad = int(self.tok.pad_token_id)
        seen: dict[str, int] = {}
        self.seeds = []
        for p in prompts:
            self.seeds.append(sample_seed(seed, p, seen.get(p, 0)))
            seen[p] = seen.get(p, 0) + 1
        self.out: list[list[str] | None] = [None] * len(prompts)
        self.buffer: list[tuple[int, object]] = []
        self.forwards = 0

    def add(self, i: int, kv) -> None:
        self.buffer.append((i, kv))
        if self._rows(len(self.buffer) + 1) > self._row_cap(kv.length):
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self._run(self.buffer)
            self.buffer = []

    def _rows(self, prompts: int) -> int:
        return prompts * self.n

    def _row_cap(self, length: int) -> int:
        fp = self.engine_fp
        per_row = fp.row_bytes(length + self.max_new, 1, 1)
        by_memory = int(self.memory_fraction * free_bytes(self.device) // max(per_row, 1))
        return max(self.n, min(self.max_rows, by_memory))

    def _run(self, group) -> None:
        try:
            self._decode(group)
        except Exception as exc:
            if not is_oom(exc) or len(group) == 1:
                raise
            release_cached(self.device)  # every prompt restarts from its own seed: no double draws
            half = len(group) // 2
            self._run(group[:half])
            self._run(group[half:])

    @torch.inference_mode()
    def _decode(self, group) -> None:
        dev, n = self.device, self.n
        P = len(group)
        lengths = [kv.length for _, kv in group]
        rows_len = [L for L in lengths for _ in range(n)]
        width = max(lengths)
        cache, mask = pack_past([kv for _, kv in group for _ in range(n)], rows_len, width, dev, extra=self.max_new)
        logits = torch.stack([kv.last_logits for _, kv in group]).repeat_interleave(n, dim=0)
        gens = []
        for i, _ in group:
            g = torch.Generator(device=dev)
            g.manual_seed(self.seeds[i])
            gens.append(g)
        R = P * n
        tokens: list[list[int]] = [[] for _ in range(R)]
        texts: list[str | None] = [None] * R
        done = [False] * R
        active = list(range(R))  # rows still in the forward batch
        pos = torch.tensor(rows_len, dtype=torch.long, device=dev)
        for step in range(self.max_new):
            nxt = self._draw(logits, gens, done)
            for r in active:
                t = int(nxt[r])
                if t in self.eos:
                    done[r] = True
                    continue
                tokens[r].append(t)
                if self.stop:
                    text = self.tok.decode(tokens[r], skip_special_tokens=True)
                    cut = min((text.find(s) for s in self.stop if s in text), default=-1)
                    if cut >= 0:
                        texts[r], done[r] = text[:cut], True
            still = [r for r in active if not done[r]]
            if not still or step == self.max_new - 1:
                break
            if len(still) < len(active):
                keep = torch.tensor([active.index(r) for r in still], dtype=torch.long, device=dev)
                cache.batch_select_indices(keep)
                mask = mask[keep]
                active = still
            rows = torch.tensor(active, dtype=torch.long, device=dev)
            x = nxt[rows].unsqueeze(1)
            ones = torch.ones((len(active), 1), dtype=torch.long, device=dev)
            with self.hooks():
                out = self.backend.forward(
                    x,
                    ones,
                    torch.zeros((len(active), 1), dtype=torch.long, device=dev),
                    [],
                    past=cache,
                    past_mask=mask,
                    position_ids=pos[rows].unsqueeze(1) + step,
                    use_cache=True,
                )
            self.forwards += 1
            cache = out.past
            mask = torch.cat([mask, ones], dim=1)
            logits = logits.clone()
            logits[rows] = out.logits[:, 0]
        for p, (i, _) in enumerate(group):
            self.out[i] = [
                texts[r] if texts[r] is not None else self.tok.decode(tokens[r], skip_special_tokens=True)
                for r in range(p * self.n, (p + 1) * self.n)
            ]

    def _draw(self, logits: torch.Tensor, gens, done) -> torch.Tensor:
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        out = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        for p, g in enumerate(gens):
            rows = slice(p * self.n, (p + 1) * self.n)
            if not all(done[rows]):  # as HF: every row of an unfinished prompt draws
                out[rows] = torch.multinomial(probs[rows], 1, generator=g).squeeze(1)
        return out


def generate(
    lm: LoadedModel,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    n: int = 1,
    seed: int = 0,
    batch_size: int = 256,
    stop: Sequence[str] | None = None,
    memory_fraction: float = 0.5,
    hooks: HookContext | None = None,
) -> list[list[str]]:
    """`n` sampled replies per prompt (decoded new text only). Deterministic for a seed.

    `batch_size` bounds the rows (prompts x n) decoding together; the free memory of the
    model's device bounds them too. `stop`: strings that end a reply (not included).
    """
    if lm.backend.name != "hf" or not lm.backend.supports_prefix_cache:
        raise ConfigError("generation needs backend hf")
    if temperature < 0:
        raise ConfigError("temperature must be >= 0 (0: greedy)")
    if max_new_tokens < 1 or n < 1:
        raise ConfigError("max_new_tokens and n must be >= 1")
    if not prompts:
        return []
    tok = lm.tokenizer
    sampler = _Sampler(
        lm,
        list(prompts),
        n=n,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        stop=stop,
        seed=seed,
        max_rows=max(batch_size, n),
        memory_fraction=memory_fraction,
        hooks=hooks or _null,
    )
    engine = Engine(
        lm.backend,
        [],
        EngineConfig(memory_fraction=memory_fraction),
        tok.pad_token_id,
        hooks=hooks,
        on_state=sampler.add,
    )
    sampler.device, sampler.engine_fp = engine.device, engine.footprint
    seqs = []
    for p in prompts:
        ids, _ = encode(tok, p)
        seqs.append(Seq(ids=tuple(ids), reads=[(len(ids) - 1, ())], state=True))
    engine.run(seqs)
    sampler.flush()
    return sampler.out  # type: ignore[return-value]


def _null():
    import contextlib

    return contextlib.nullcontext()
