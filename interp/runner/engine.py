"""Batched execution of token sequences with shared-prefix KV reuse.

A `Seq` is a token sequence plus what to read from it: at position p, the log-probabilities
of some target token ids as the next token, and the residual stream at one position (or all).

Sequences that share a long token prefix (pressure trials of one item share the account and
the planted verdict; cloze completions share their context) are grouped: the prefix is run
once, its KV cache is copied for every suffix batch, and only suffix tokens are computed.
Everything else is batched by length with right padding. The unembedding and the float32
log-softmax run only at read positions. The plain computation (each sequence alone, full
forward) is the reference this must equal (tests, to 1e-4).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from interp.runner.backends import Backend


@dataclass
class Seq:
    ids: tuple[int, ...]
    reads: list[tuple[int, tuple[int, ...]]]  # (position, target token ids)
    capture_pos: int | None = None  # position of the residual read (None: no capture)


@dataclass
class SeqResult:
    logp: list[np.ndarray]  # one array per read: log-prob of each target id
    resid: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> [d] or [T, d]


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    batch_size: int = 16
    max_batch_tokens: int = 8192  # bounds memory: rows x padded length per forward
    prefix_reuse: bool = True
    min_shared_prefix: int = 16
    capture_all_positions: bool = False
    progress: bool = False


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _cap(seq: Seq, capture_all: bool) -> int:
    """Longest prefix that can be shared: every read and capture must fall in the suffix."""
    limits = [p for p, _ in seq.reads]
    if seq.capture_pos is not None and not capture_all:
        limits.append(seq.capture_pos)
    return min(limits) if limits else len(seq.ids) - 1


def plan_groups(seqs: Sequence[Seq], cfg: EngineConfig) -> tuple[list[tuple[int, list[int]]], list[int]]:
    """Group sequences by shared token prefix. Returns ([(prefix_len, members)], singles)."""
    order = sorted(range(len(seqs)), key=lambda i: seqs[i].ids)
    groups: list[tuple[int, list[int]]] = []
    singles: list[int] = []
    cur: list[int] = []
    cur_p = 0

    def close():
        if len(cur) > 1 and cur_p >= cfg.min_shared_prefix:
            groups.append((cur_p, list(cur)))
        else:
            singles.extend(cur)

    for i in order:
        cap = _cap(seqs[i], cfg.capture_all_positions)
        if cur:
            p = min(cur_p, _lcp(seqs[cur[0]].ids, seqs[i].ids), cap)
            if p >= cfg.min_shared_prefix:
                cur.append(i)
                cur_p = p
                continue
            close()
        cur, cur_p = [i], cap
    if cur:
        close()
    return groups, singles


def _batches(idx: list[int], lengths: dict[int, int], cfg: EngineConfig) -> list[list[int]]:
    idx = sorted(idx, key=lambda i: lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in idx:
        if cur and (len(cur) >= cfg.batch_size or (len(cur) + 1) * lengths[i] > cfg.max_batch_tokens):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


class Engine:
    def __init__(self, backend: Backend, layers: Sequence[int], cfg: EngineConfig, pad_id: int):
        self.backend = backend
        self.layers = sorted(set(layers))
        self.cfg = cfg
        self.pad_id = pad_id

    def run(self, seqs: Sequence[Seq]) -> list[SeqResult]:
        results: list[SeqResult | None] = [None] * len(seqs)
        if self.cfg.prefix_reuse and self.backend.supports_prefix_cache:
            groups, singles = plan_groups(seqs, self.cfg)
        else:
            groups, singles = [], list(range(len(seqs)))
        bar = tqdm(total=len(seqs), disable=not self.cfg.progress, desc="scoring", unit="seq", leave=False)
        try:
            for plen, members in groups:
                self._run_group(seqs, plen, members, results)
                bar.update(len(members))
            lengths = {i: len(seqs[i].ids) for i in singles}
            for batch in _batches(singles, lengths, self.cfg):
                self._run_batch(seqs, batch, 0, None, None, results)
                bar.update(len(batch))
        finally:
            bar.close()
        return results  # type: ignore[return-value]

    def _run_group(self, seqs, plen, members, results):
        prefix = torch.tensor([seqs[members[0]].ids[:plen]])
        out = self.backend.forward(
            prefix, torch.ones_like(prefix), torch.zeros(1, 0, dtype=torch.long), self.layers, use_cache=True
        )
        prefix_resid = {layer: r[0] for layer, r in out.resid.items()}
        lengths = {i: len(seqs[i].ids) - plen for i in members}
        for batch in _batches(members, lengths, self.cfg):
            past = copy.deepcopy(out.past)
            past.batch_repeat_interleave(len(batch))
            self._run_batch(seqs, batch, plen, past, prefix_resid, results)

    def _run_batch(self, seqs, batch, offset, past, prefix_resid, results):
        rows = [seqs[i].ids[offset:] for i in batch]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : len(r)] = torch.tensor(r)
            mask[b, : len(r)] = 1
        n_reads = max(1, max(len(seqs[i].reads) for i in batch))
        read_index = torch.zeros((len(rows), n_reads), dtype=torch.long)
        for b, i in enumerate(batch):
            for r, (pos, _) in enumerate(seqs[i].reads):
                read_index[b, r] = pos - offset
        out = self.backend.forward(ids, mask, read_index, self.layers, past=past)
        logp = torch.log_softmax(out.logits.float(), dim=-1)
        for b, i in enumerate(batch):
            seq = seqs[i]
            per_read = [
                logp[b, r, list(targets)].double().numpy() for r, (_, targets) in enumerate(seq.reads)
            ]
            resid: dict[int, np.ndarray] = {}
            if seq.capture_pos is not None:
                for layer in self.layers:
                    h = out.resid[layer][b]
                    if self.cfg.capture_all_positions:
                        full = h[: len(rows[b])]
                        if prefix_resid is not None:
                            full = torch.cat([prefix_resid[layer], full], dim=0)
                        resid[layer] = full.float().numpy().copy()
                    else:
                        resid[layer] = h[seq.capture_pos - offset].float().numpy().copy()
            results[i] = SeqResult(logp=per_read, resid=resid)
