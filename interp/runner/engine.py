"""Batched execution of token sequences with shared-prefix KV reuse.

A `Seq` is a token sequence plus what to read from it: at position p, the log-probabilities
of some target token ids as the next token, and the residual stream at one position (or all).

Sequences that share token prefixes are arranged in a prefix tree (a shared instruction, then
an item's text, then that item's turns or option forms): each shared segment is run once with
its parent's KV cache, and every suffix batch starts from a copy of its node's cache, so only
tokens nobody computed yet are computed.
Everything else is batched by length with right padding. The unembedding and the float32
log-softmax run only at read positions. The plain computation (each sequence alone, full
forward) is the reference this must equal (tests, to 1e-4).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from interp.runner.backends import Backend
from interp.runner.steering import read_positions


@dataclass
class Seq:
    ids: tuple[int, ...]
    reads: list[tuple[int, tuple[int, ...]]]  # (position, target token ids)
    capture_pos: int | None = None  # position of the residual read (None: no capture)
    # continuations after the end of `ids` whose total log-prob is wanted (multi-token option
    # forms): computed from this sequence's own KV cache, one short extra forward per batch
    ext: list[tuple[int, ...]] = field(default_factory=list)


@dataclass
class SeqResult:
    logp: list[np.ndarray]  # one array per read: log-prob of each target id
    resid: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> [d] or [T, d]
    ext_logp: list[float] = field(default_factory=list)  # one total per `Seq.ext` entry


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    batch_size: int = 16
    max_batch_tokens: int = 8192  # bounds memory: rows x padded length per forward
    prefix_reuse: bool = True
    min_shared_prefix: int = 16
    # a shared segment gets its own forward only when it saves this many token computations:
    # on CPU every forward re-reads all weights, so tiny batch-1 segments cost more than they save
    min_saved_tokens: int = 128
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


@dataclass
class Node:
    """A token segment [start, end) shared by every sequence below it, computed once."""

    start: int
    end: int
    children: list["Node"] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)  # sequences run from `end` with this node's KV
    rep: int = 0  # a sequence holding the segment's tokens


def plan_tree(seqs: Sequence[Seq], cfg: EngineConfig) -> tuple[list[Node], list[int]]:
    """Prefix tree over the sequences: ([top nodes], sequences with no shared prefix).

    Sequences are sorted; consecutive ones sharing at least `min_shared_prefix` more tokens
    form a node, recursively, so a shared instruction, then an item's text, then the item's
    option forms are each computed once. A node never extends past any read or capture of a
    sequence below it.
    """
    order = sorted(range(len(seqs)), key=lambda i: seqs[i].ids)
    caps = {i: _cap(seqs[i], cfg.capture_all_positions) for i in order}
    return _partition(seqs, order, 0, caps, cfg)


def _partition(seqs, idx: list[int], start: int, caps: dict[int, int], cfg: EngineConfig):
    nodes: list[Node] = []
    leaves: list[int] = []
    k = 0
    while k < len(idx):
        first = idx[k]
        p = caps[first]
        j = k + 1
        while j < len(idx):
            q = min(p, _lcp(seqs[first].ids, seqs[idx[j]].ids), caps[idx[j]])
            if q - start < cfg.min_shared_prefix:
                break
            p = q
            j += 1
        cluster = idx[k:j]
        if len(cluster) > 1:
            children, sub_leaves = _partition(seqs, cluster, p, caps, cfg)
            if (len(cluster) - 1) * (p - start) >= cfg.min_saved_tokens:
                nodes.append(Node(start=start, end=p, children=children, leaves=sub_leaves, rep=first))
            else:  # not worth a forward of its own: children absorb the segment, the rest batch here
                for child in children:
                    child.start = start
                nodes.extend(children)
                leaves.extend(sub_leaves)
        else:
            leaves.append(first)
        k = j
    return nodes, leaves


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
        # every tensor made here is made on the model's input device: no per-row host copies
        self.device = getattr(backend, "device", None) or torch.device("cpu")

    def run(self, seqs: Sequence[Seq]) -> list[SeqResult]:
        if not self.backend.supports_prefix_cache and any(s.ext for s in seqs):
            return self._run_ext_as_sequences(seqs)
        results: list[SeqResult | None] = [None] * len(seqs)
        if self.cfg.prefix_reuse and self.backend.supports_prefix_cache:
            nodes, singles = plan_tree(seqs, self.cfg)
        else:
            nodes, singles = [], list(range(len(seqs)))
        bar = tqdm(total=len(seqs), disable=not self.cfg.progress, desc="scoring", unit="seq", leave=False)
        try:
            for node in nodes:
                self._run_node(seqs, node, None, None, results, bar)
            lengths = {i: len(seqs[i].ids) for i in singles}
            for batch in _batches(singles, lengths, self.cfg):
                self._run_batch(seqs, batch, 0, None, None, results)
                bar.update(len(batch))
        finally:
            bar.close()
        return results  # type: ignore[return-value]

    def _run_ext_as_sequences(self, seqs: Sequence[Seq]) -> list[SeqResult]:
        """Without a KV cache, each extension is scored as a sequence of its own."""
        flat = [replace(s, ext=[]) for s in seqs]
        owner = []
        for i, s in enumerate(seqs):
            for e in s.ext:
                n = len(s.ids)
                flat.append(Seq(ids=s.ids + e, reads=[(n - 1 + j, (t,)) for j, t in enumerate(e)]))
                owner.append(i)
        res = self.run(flat)
        out = res[: len(seqs)]
        for k, i in enumerate(owner):
            out[i].ext_logp.append(float(sum(a[0] for a in res[len(seqs) + k].logp)))
        return out

    def _run_node(self, seqs, node: Node, past, prefix_resid, results, bar):
        segment = torch.tensor([seqs[node.rep].ids[node.start:node.end]], device=self.device)
        past = copy.deepcopy(past) if past is not None else None  # the forward appends to it
        out = self.backend.forward(segment, torch.ones_like(segment), torch.zeros(1, 0, dtype=torch.long, device=self.device),
                                   self.layers, past=past, use_cache=True)
        resid = {layer: r[0] for layer, r in out.resid.items()}
        if prefix_resid is not None and self.cfg.capture_all_positions:
            resid = {layer: torch.cat([prefix_resid[layer], r]) for layer, r in resid.items()}
        for child in node.children:
            self._run_node(seqs, child, out.past, resid, results, bar)
        lengths = {i: len(seqs[i].ids) - node.end for i in node.leaves}
        for batch in _batches(node.leaves, lengths, self.cfg):
            batch_past = copy.deepcopy(out.past)
            batch_past.batch_repeat_interleave(len(batch))
            self._run_batch(seqs, batch, node.end, batch_past, resid, results)
            bar.update(len(batch))

    def _run_batch(self, seqs, batch, offset, past, prefix_resid, results):
        rows = [seqs[i].ids[offset:] for i in batch]
        width = max(len(r) for r in rows)
        # padded on the host as lists, then one transfer each (row writes into a CUDA tensor sync per row)
        ids = torch.tensor([list(r) + [self.pad_id] * (width - len(r)) for r in rows], dtype=torch.long, device=self.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long, device=self.device)
        # an extension's first token is read at the sequence's last position
        reads = [seqs[i].reads + ([(len(seqs[i].ids) - 1, tuple(e[0] for e in seqs[i].ext))] if seqs[i].ext else [])
                 for i in batch]
        n_reads = max(1, max(len(r) for r in reads))
        index_rows = [[0] * n_reads for _ in batch]
        for b in range(len(batch)):
            for r, (pos, _) in enumerate(reads[b]):
                index_rows[b][r] = pos - offset
        read_index = torch.tensor(index_rows, dtype=torch.long, device=self.device)
        tails = [(b, k, e) for b, i in enumerate(batch) for k, e in enumerate(seqs[i].ext) if len(e) > 1]
        # --- steering hook point (interp.runner.steering): each row's first read position in this forward
        first_read = torch.tensor([seqs[i].reads[0][0] - offset if seqs[i].reads else -1 for i in batch])
        with read_positions(first_read):
            out = self.backend.forward(ids, mask, read_index, self.layers, past=past, use_cache=bool(tails))
        logp = torch.log_softmax(out.logits.float(), dim=-1)
        ext_logp = [[float(logp[b, len(reads[b]) - 1, e[0]]) for e in seqs[i].ext] for b, i in enumerate(batch)]
        if tails:
            self._run_tails(seqs, batch, offset, mask, out.past, tails, ext_logp)
        for b, i in enumerate(batch):
            seq = seqs[i]
            per_read = [
                logp[b, r, list(targets)].double().cpu().numpy() for r, (_, targets) in enumerate(seq.reads)
            ]
            resid: dict[int, np.ndarray] = {}
            if seq.capture_pos is not None:
                for layer in self.layers:
                    h = out.resid[layer][b]
                    if self.cfg.capture_all_positions:
                        full = h[: len(rows[b])]
                        if prefix_resid is not None:
                            full = torch.cat([prefix_resid[layer], full], dim=0)
                        resid[layer] = full.float().cpu().numpy().copy()
                    else:
                        resid[layer] = h[seq.capture_pos - offset].float().cpu().numpy().copy()
            results[i] = SeqResult(logp=per_read, resid=resid, ext_logp=ext_logp[b])

    def _run_tails(self, seqs, batch, offset, mask, cache, tails, ext_logp):
        """Tokens 2.. of multi-token extensions, continuing each row's own cache (padding masked)."""
        # index on the host: valid for a cache on any device, including one split by a device_map
        rows = torch.tensor([b for b, _, _ in tails], device="cpu")
        cache.batch_select_indices(rows)  # one cache row per extension (rows repeat)
        width = max(len(e) - 1 for _, _, e in tails)
        dev = self.device
        x = torch.tensor([list(e[:-1]) + [self.pad_id] * (width - len(e) + 1) for _, _, e in tails], dtype=torch.long, device=dev)
        x_mask = torch.tensor([[1] * (len(e) - 1) + [0] * (width - len(e) + 1) for _, _, e in tails], dtype=torch.long, device=dev)
        positions = torch.tensor([[len(seqs[batch[b]].ids) + j for j in range(width)] for b, _, _ in tails],
                                 dtype=torch.long, device=dev)
        past_mask = torch.cat([mask.new_ones(len(tails), offset), mask[rows.to(mask.device)]], dim=1)
        read_index = torch.arange(width, device=dev).unsqueeze(0).expand(len(tails), -1)
        out = self.backend.forward(x, x_mask, read_index, [], past=cache, past_mask=past_mask, position_ids=positions)
        logp = torch.log_softmax(out.logits.float(), dim=-1)
        for r, (b, k, e) in enumerate(tails):
            ext_logp[b][k] += float(sum(logp[r, j, e[j + 1]] for j in range(len(e) - 1)))
