"""FLOP and token counts of recorded forwards, and this machine's matmul rate.

* `Shape` / `model_shape`: a decoder's sizes; FLOPs per computed position (dense: 2 x the weights
  of every nn.Linear in the blocks), per (query, key) pair (attention: 4 x heads x head_dim per
  layer) and per read position (unembedding: 2 x d_model x vocab).
* `Recorder`: a backend proxy that records the shape of every forward, then delegates;
  `runner_counts` / `naive_counts` / `min_tokens` turn shapes into tokens and FLOPs.
* `matmul_rate` / `gemm_rate`: `torch.matmul` GFLOP/s at the current thread count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench import common


@dataclass
class Shape:
    n_dense: int
    n_layers: int
    n_heads: int
    head_dim: int
    d_model: int
    vocab: int

    def attn(self, pairs: float) -> float:
        return 4.0 * self.n_heads * self.head_dim * pairs * self.n_layers

    def dense(self, positions: float) -> float:
        return 2.0 * self.n_dense * positions

    def unembed(self, reads: float) -> float:
        return 2.0 * self.d_model * self.vocab * reads


def model_shape(model) -> Shape:
    import torch

    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    n_dense = sum(m.weight.numel() for m in base.modules() if isinstance(m, torch.nn.Linear))
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return Shape(
        n_dense=n_dense,
        n_layers=cfg.num_hidden_layers,
        n_heads=cfg.num_attention_heads,
        head_dim=head_dim,
        d_model=cfg.hidden_size,
        vocab=model.get_output_embeddings().weight.shape[0],
    )


@dataclass
class Recorder:
    """Backend proxy: records the shape of every forward, then delegates."""

    inner: object
    calls: list = field(default_factory=list)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, input_ids, attention_mask, read_index, layers, **kw):
        past = kw.get("past")
        P = 0 if past is None else int(past.get_seq_length())
        B, T = input_ids.shape
        self.calls.append(
            {"B": int(B), "T": int(T), "P": P, "lens": attention_mask.sum(1).tolist(), "R": int(read_index.shape[1])}
        )
        return self.inner.forward(input_ids, attention_mask, read_index, layers, **kw)


def runner_counts(calls, shape: Shape) -> dict:
    real = sum(sum(c["lens"]) for c in calls)
    padded = sum(c["B"] * c["T"] for c in calls)
    reads = sum(c["B"] * c["R"] for c in calls)
    pairs_useful = sum(sum(n * c["P"] + n * (n + 1) / 2 for n in c["lens"]) for c in calls)
    pairs_exec = sum(c["B"] * c["T"] * (c["P"] + c["T"]) for c in calls)
    useful = shape.dense(real) + shape.attn(pairs_useful) + shape.unembed(reads)
    executed = shape.dense(padded) + shape.attn(pairs_exec) + shape.unembed(reads)
    return {
        "forwards": len(calls),
        "real_tokens": int(real),
        "padded_positions": int(padded),
        "read_positions": int(reads),
        "flops_useful": useful,
        "flops_executed": executed,
        "flops_useful_parts": {
            "dense": shape.dense(real),
            "attention": shape.attn(pairs_useful),
            "unembedding": shape.unembed(reads),
        },
    }


def naive_counts(lengths, shape: Shape) -> dict:
    """One full forward per (prompt, form) of length L: dense, causal attention, unembed at all L."""
    tokens = sum(lengths)
    pairs = sum(L * (L + 1) / 2 for L in lengths)
    return {
        "forwards": len(lengths),
        "real_tokens": int(tokens),
        "read_positions": int(tokens),
        "flops": shape.dense(tokens) + shape.attn(pairs) + shape.unembed(tokens),
    }


def min_tokens(seqs) -> dict:
    """Fewest positions any prefix-sharing scorer computes: each distinct token prefix once (trie nodes)."""
    full = []
    for s in seqs:  # a sequence, and each multi-token extension continuing it (engine `Seq.ext`)
        full.append(tuple(s.ids))
        full += [tuple(s.ids) + tuple(e[:-1]) for e in getattr(s, "ext", []) if len(e) > 1]
    trie = set()
    for ids in full:
        for k in range(1, len(ids) + 1):
            trie.add(ids[:k])
    return {"trie": len(trie), "plain": int(sum(len(ids) for ids in full))}


def matmul_rate(n: int, repeats: int) -> dict:
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    s, _ = common.time_runs(lambda: torch.matmul(a, b), repeats)
    flops = 2.0 * n**3
    return {
        "shape": [n, n, n],
        "gflops_median": flops / s["median"] / 1e9,
        "gflops_best": flops / s["min"] / 1e9,
        "timing": s,
    }


def gemm_rate(m: int, k: int, n: int, repeats: int) -> dict:
    import torch

    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.matmul(a, b)
    s, _ = common.time_runs(lambda: torch.matmul(a, b), repeats)
    flops = 2.0 * m * k * n
    return {
        "shape": [m, k, n],
        "gflops_median": flops / s["median"] / 1e9,
        "gflops_best": flops / s["min"] / 1e9,
        "timing": s,
    }


class EngineRecorder:
    """Backend proxy: per forward, rows, padded width, per-row cached length, real lengths, reads."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def forward(self, input_ids, attention_mask, read_index, layers, **kw):
        pos = kw.get("position_ids")
        past = pos[:, 0].tolist() if pos is not None else [0] * input_ids.shape[0]
        self.calls.append(
            {
                "B": int(input_ids.shape[0]),
                "T": int(input_ids.shape[1]),
                "past": past,
                "P": int(kw["past_mask"].shape[1]) if kw.get("past_mask") is not None else 0,
                "lens": attention_mask.sum(1).tolist(),
                "R": int(read_index.shape[1]),
                # rows unembedded: exactly the reads with flat reads, else every row padded to R
                "reads": int(kw["read_flat"].numel())
                if kw.get("read_flat") is not None
                else int(read_index.shape[0] * read_index.shape[1]),
            }
        )
        return self.inner.forward(input_ids, attention_mask, read_index, layers, **kw)


def engine_counts(calls, shape) -> dict:
    real = sum(sum(c["lens"]) for c in calls)
    padded = sum(c["B"] * c["T"] for c in calls)
    reads = sum(c["reads"] for c in calls)
    pairs = sum(n * p + n * (n + 1) / 2 for c in calls for n, p in zip(c["lens"], c["past"]))
    pairs_exec = sum(c["B"] * c["T"] * (c["P"] + c["T"]) for c in calls)
    return {
        "forwards": len(calls),
        "real_tokens": int(real),
        "padded_tokens": int(padded),
        "reads": int(reads),
        "flops_useful": shape.dense(real) + shape.attn(pairs) + shape.unembed(reads),
        "flops_executed": shape.dense(padded) + shape.attn(pairs_exec) + shape.unembed(reads),
        "flops_dense_useful": shape.dense(real),
    }
