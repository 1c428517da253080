"""Batched execution of token sequences over their prefix tree, one padded forward per level.

A `Seq` is a token sequence plus what to read from it: at position p, the log-probabilities
of some target token ids as the next token, and the residual stream at one position (or all).

The sequences form a prefix tree (a radix trie over token ids): a shared instruction, then an
item's text, then a planted verdict, a user turn, an option form... Every node's segment is
computed exactly once. The tree runs level by level: all nodes of one depth (below one batch
of parents) go through one right-padded forward, each row continuing its parent's KV cache.
Parents' caches have different lengths, so the batch cache is padded too: row b holds a
masked gap, then its parent's L_b cached tokens ending at the longest parent's length, then
its own new tokens with explicit `position_ids` L_b, L_b+1, ... (GPT-2 reads absolute
positions; rotary models rotate by them). Nothing is computed twice and no node needs to "pay for" a
forward of its own, so the tree goes as deep as the prompts share.

Reads can fall anywhere in a node (every sequence through it has the same tokens there), so
logits are taken at read positions only, with the unembedding and a float32 log-softmax on
the model's device; only the target log-probs and captured residuals come back to the CPU.

Memory: a node keeps only its own tokens' KV cache and a link to its parent's (`_KV`), so no
token's cache is copied into every descendant; packing a batch copies the chain into a buffer
that a `Workspace` reuses from forward to forward (fresh memory costs more in page faults than
the copy). A node's cache lives only while its children run (depth-first over
batches, breadth-first within one); the rows of one forward are bounded by `batch_size`,
`max_batch_tokens` and a byte budget taken from the device's free memory (KV cache of the
padded parents included). An out-of-memory error halves the batch and retries; no sequence
is lost. The plain computation (each sequence alone, full forward) is the reference this must
equal (tests, to 1e-4).
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers.cache_utils import DynamicLayer

from interp.core.partition import cheapest_runs
from interp.runner import packed
from interp.runner.backends import Backend
from interp.runner.steering import read_positions
from interp.runner.memory import (
    Footprint,
    backend_device,
    footprint_of,
    free_bytes,
    is_oom,
    release_cached,
)


@dataclass
class Seq:
    ids: tuple[int, ...]
    reads: list[tuple[int, tuple[int, ...]]]  # (position, target token ids)
    capture_pos: int | None = None  # position of the residual read (None: no capture)
    # continuations after the end of `ids` whose total log-prob is wanted (multi-token option
    # forms): they become nodes of the tree below this sequence and run in its next level
    ext: list[tuple[int, ...]] = field(default_factory=list)
    # hand this sequence's KV cache and last-position logits to `Engine.on_state` (generation)
    state: bool = False
    # also report the most likely next token at each read (`SeqResult.argmax`): an exact
    # is_greedy check without sending the whole vocabulary's log-probs back
    argmax: bool = False


@dataclass
class SeqResult:
    logp: list[np.ndarray]  # one array per read: log-prob of each target id
    resid: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> [d] or [T, d]
    ext_logp: list[float] = field(default_factory=list)  # one total per `Seq.ext` entry
    argmax: list[int] = field(default_factory=list)  # per read, when `Seq.argmax`: the top token id


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    batch_size: int = 64  # rows (tree nodes) per forward at most
    max_batch_tokens: int = 4096  # rows x padded new-token width per forward at most
    prefix_reuse: bool = True
    # a shared segment shorter than this is recomputed by each child instead of being a node
    # (1: every shared token is computed once)
    min_shared_prefix: int = 1
    min_saved_tokens: int = 0  # deprecated, ignored: level batching removed the threshold
    # share of the device's free memory one forward may plan to use (KV cache included)
    memory_fraction: float = 0.5
    capture_all_positions: bool = False
    progress: bool = False
    # what one more forward costs, in padded tokens: a batch is split where the padding it
    # saves exceeds this (None: by device, FORWARD_COST_TOKENS). Speed only, never the numbers.
    forward_cost_tokens: int | None = None
    # packed forwards (interp.runner.packed): a padded batch's rows as one sequence of their real
    # tokens, so that no Linear computes padding. None: wherever the model supports it (checked at
    # first use); False: always padded. Speed only: the same computation per real token.
    packed: bool | None = None


@dataclass
class EngineStats:
    """What the last `run` computed (for benchmarks and tests)."""

    forwards: int = 0
    tokens: int = 0  # real tokens computed
    padded_tokens: int = 0  # rows x width summed over forwards
    unique_tokens: int = 0  # tokens of the prefix tree (each segment once)
    plain_tokens: int = 0  # tokens of the sequences as given (no sharing)
    oom_retries: int = 0
    depth: int = 0
    packed_forwards: int = 0  # forwards run packed (their Linears computed `tokens`, not padding)


@dataclass(eq=False)
class Node:
    """A token segment [start, end) shared by every sequence below it, computed once."""

    start: int
    end: int
    rep: int  # a sequence holding the segment's tokens
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # sequences whose needed tokens end here
    read_pos: list[int] = field(default_factory=list)  # positions whose logits are read
    wants: list[tuple[int, int, int]] = field(default_factory=list)  # (seq, read k, slot)
    captures: list[tuple[int, int]] = field(default_factory=list)  # (seq, position)
    keep_resid: bool = False  # capture_all_positions: this segment's residuals are needed
    first_read: int | None = None  # a sequence's first read falls here (steering "read" positions)

    @property
    def leaves(self) -> list[int]:  # compatibility name
        return self.ends


def _needed(seq: Seq, capture_all: bool) -> int:
    """Tokens that must be computed: up to the last read / capture (the last token of a scored
    continuation is never an input to anything read)."""
    n = max([p + 1 for p, _ in seq.reads] + [1])
    if seq.state:
        return len(seq.ids)
    if seq.capture_pos is not None:
        n = max(n, len(seq.ids) if capture_all else seq.capture_pos + 1)
    return min(n, len(seq.ids))


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def plan_tree(seqs: Sequence[Seq], cfg: EngineConfig) -> list[Node]:
    """Radix trie over the sequences' needed tokens; returns its roots.

    Without `prefix_reuse` every sequence is a root of its own (no sharing).
    """
    need = [_needed(s, cfg.capture_all_positions) for s in seqs]
    keys = [s.ids[: need[i]] for i, s in enumerate(seqs)]
    if not cfg.prefix_reuse:
        roots = [Node(start=0, end=need[i], rep=i, ends=[i]) for i in range(len(seqs))]
    else:
        order = sorted(range(len(seqs)), key=lambda i: keys[i])
        roots = []
        stack: list[tuple[list[int], int, Node | None]] = [(order, 0, None)]
        while stack:  # iterative: a tree can be deeper than Python's recursion limit
            idx, start, parent = stack.pop()
            k = 0
            while k < len(idx):
                j = k + 1
                while j < len(idx) and keys[idx[j]][start] == keys[idx[k]][start]:
                    j += 1
                group = idx[k:j]  # sorted: the group's common prefix is that of its ends
                end = _lcp(keys[group[0]], keys[group[-1]])
                node = Node(start=start, end=end, rep=group[0], parent=parent)
                node.ends = [i for i in group if len(keys[i]) == end]
                rest = [i for i in group if len(keys[i]) > end]
                (parent.children if parent else roots).append(node)
                if rest:
                    stack.append((rest, end, node))
                k = j
        if cfg.min_shared_prefix > 1:
            roots = _absorb_short(roots, cfg.min_shared_prefix)
    _attach_reads(seqs, roots, cfg)
    return roots


def _absorb_short(nodes: list[Node], min_len: int) -> list[Node]:
    """Push segments shorter than `min_len` down into their children (tokens recomputed)."""
    out: list[Node] = []
    for node in nodes:
        node.children = _absorb_short(node.children, min_len)
        if node.end - node.start >= min_len or not node.children:
            out.append(node)
            continue
        for child in node.children:
            child.start, child.parent = node.start, node.parent
            out.append(child)
        if node.ends:
            out.append(Node(start=node.start, end=node.end, rep=node.ends[0], parent=node.parent, ends=node.ends))
    return out


def _walk(roots: list[Node]):
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _attach_reads(seqs: Sequence[Seq], roots: list[Node], cfg: EngineConfig) -> None:
    for node in _walk(roots):
        for i in node.ends:
            path = []
            n: Node | None = node
            while n is not None:
                path.append(n)
                n = n.parent
            path.reverse()
            starts = [p.start for p in path]
            seq = seqs[i]

            def at(pos: int, path=path, starts=starts) -> Node:
                return path[bisect.bisect_right(starts, pos) - 1]

            for k, (pos, _) in enumerate(seq.reads):
                owner = at(pos)
                if pos not in owner.read_pos:
                    owner.read_pos.append(pos)
                owner.wants.append((i, k, owner.read_pos.index(pos)))
                if k == 0 and owner.first_read is None:
                    owner.first_read = pos
            if seq.capture_pos is not None:
                if cfg.capture_all_positions:
                    for p in path:
                        p.keep_resid = True
                else:
                    at(seq.capture_pos).captures.append((i, seq.capture_pos))


def flatten_ext(seqs: Sequence[Seq]) -> tuple[list[Seq], list[int]]:
    """Each extension becomes a sequence of its own (reads at its tokens); the prefix tree puts
    it under its prompt, so its tokens run in the prompt's next level, batched with others."""
    flat = [replace(s, ext=[]) for s in seqs]
    owner = []
    for i, s in enumerate(seqs):
        n = len(s.ids)
        if s.ext and not s.reads:  # keep the prompt's own last position in the tree
            flat[i] = replace(flat[i], reads=[(n - 1, (s.ids[-1],))])
        for e in s.ext:
            flat.append(Seq(ids=s.ids + e, reads=[(n - 1 + j, (t,)) for j, t in enumerate(e)]))
            owner.append(i)
    return flat, owner


def _depth(roots: list[Node]) -> int:
    best, stack = 0, [(r, 1) for r in roots]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in node.children)
    return best


HookContext = Callable[[], AbstractContextManager]

# Padding vs forwards. On a CPU a forward's fixed cost (the weights streamed once, Python per
# layer) is that of ~16 tokens (SmolLM2-135M, 1 thread: 41 ms for one token, then ~2.3 ms per
# token), so a level is split wherever that saves more padding; on an accelerator a forward is
# launch-bound and rows are nearly free until the batch is large.
FORWARD_COST_TOKENS = {"cpu": 16}
DEFAULT_FORWARD_COST_TOKENS = 256
# share of the byte budget the KV caches of one level's computed parents may take while their
# children wait, so that children of different batches run together (fuller, less padded forwards)
HELD_KV_SHARE = 0.25
# in a packed forward, what a padded position still costs relative to a real token (the attention
# product and the scatter / gather around it run padded; the Linears do not). Speed only.
PACKED_PAD_COST = 0.1


class Engine:
    """Runs sequences on a backend. `hooks` (optional) is entered around every forward: a
    place for interventions (e.g. adding a steering vector at a layer's resid_pre); it must
    act position-wise, since cached prefixes run in separate forwards."""

    def __init__(
        self,
        backend: Backend,
        layers: Sequence[int],
        cfg: EngineConfig,
        pad_id: int,
        hooks: HookContext | None = None,
        on_state: Callable[[int, _KV], None] | None = None,
    ):
        self.backend = backend
        self.layers = sorted(set(layers))
        self.cfg = cfg
        self.pad_id = int(pad_id)
        self.hooks = hooks or contextlib.nullcontext
        self.on_state = on_state  # called with (sequence index, _KV with last_logits) per `Seq.state`
        self.device = backend_device(backend)
        self.footprint: Footprint = footprint_of(backend)
        self.stats = EngineStats()
        # sliding-window attention masks by cache index, not position: a padded gap must not
        # push real tokens out of the window (see _fits)
        self.window = self.footprint.sliding_window
        self.workspace = Workspace()
        # packed forwards: asked for (or left to the engine) and no `hooks` (a caller's own hooks may
        # index rows; interp's steering finds its read positions in a packed forward); the backend's
        # own check decides at the first use. Sliding windows too: a batch of several rows always
        # fits the window (`_fits`), where its mask is the full one.
        self._packed: bool | None = (
            None if cfg.packed is not False and hooks is None and getattr(backend, "supports_packed", False) else False
        )

    # ------------------------------------------------------------------ public

    def run(self, seqs: Sequence[Seq]) -> list[SeqResult]:
        flat, owner = flatten_ext(seqs)
        cfg = self.cfg
        if not self.backend.supports_prefix_cache:
            cfg = replace(cfg, prefix_reuse=False)
        roots = plan_tree(flat, cfg)
        self.stats = EngineStats(
            unique_tokens=sum(n.end - n.start for n in _walk(roots)),
            plain_tokens=sum(_needed(s, cfg.capture_all_positions) for s in flat),
            depth=_depth(roots),
        )
        self._seqs = flat
        self._results = [
            SeqResult(
                logp=[np.full(len(t), np.nan) for _, t in s.reads], argmax=[-1] * len(s.reads) if s.argmax else []
            )
            for s in flat
        ]
        self._segment_resid: dict[int, dict[int, np.ndarray]] = {}
        bar = tqdm(total=len(flat), disable=not cfg.progress, desc="scoring", unit="seq", leave=False)
        self._bar = bar
        try:
            self._run_level([(r, None) for r in roots])
        finally:
            bar.close()
        if cfg.capture_all_positions:
            self._assemble_all_positions(roots)
        out = self._results[: len(seqs)]
        for k, i in enumerate(owner):
            out[i].ext_logp.append(float(sum(a[0] for a in self._results[len(seqs) + k].logp)))
        self._seqs, self._results, self._segment_resid = [], [], {}
        return out

    # ------------------------------------------------------------------ levels

    def _run_level(self, items: list[tuple[Node, _KV | None]]) -> None:
        """Run these nodes (parents already computed), then their children. Children of several
        batches wait for each other (one level, fuller forwards) while their parents' caches fit
        HELD_KV_SHARE of the byte budget; beyond, depth-first, so memory stays bounded."""
        items = sorted(items, key=lambda it: (it[0].end - it[0].start, it[0].start))
        cap = HELD_KV_SHARE * self._byte_budget()
        held: list[tuple[Node, _KV | None]] = []
        held_bytes = 0
        for batch in self._batches(items):
            kvs = self._compute(batch)
            if self.on_state is not None:  # outside _compute: a callback's own OOM is not this batch's
                for n, _ in batch:
                    for i in n.ends:
                        if self._seqs[i].state:
                            self.on_state(i, kvs[id(n)])
            for n, _ in batch:
                if n.children:
                    kv = kvs[id(n)]
                    held.extend((c, kv) for c in n.children)
                    held_bytes += kv.nbytes
            del kvs
            if held and held_bytes > cap:
                self._run_level(held)
                held, held_bytes = [], 0
        if held:
            self._run_level(held)

    def _use_packed(self) -> bool:
        if self._packed is None:
            self._packed = bool(self.backend.enable_packed())
        return self._packed

    def _forward_cost(self) -> float:
        if self.cfg.forward_cost_tokens is not None:
            return float(self.cfg.forward_cost_tokens)
        return float(FORWARD_COST_TOKENS.get(self.device.type, DEFAULT_FORWARD_COST_TOKENS))

    def _batches(self, items):
        """Split rows (in length order) into contiguous batches of least cost: a forward costs
        `_forward_cost()` plus its padded tokens (rows x widest row). Within the caps on rows,
        tokens, memory and the sliding window (a row alone always runs). Dynamic programming
        over the split points, each batch at most `batch_size` rows."""
        budget = self._byte_budget()
        fp = self.footprint
        t0 = self._forward_cost()
        n = len(items)
        lens = [it[0].end - it[0].start for it in items]
        pad_cost = PACKED_PAD_COST if self._use_packed() else 1.0
        cum = np.cumsum([0] + lens).tolist()

        def runs(i: int):  # the batch items[j:i]; sorted, so its width is lens[i - 1]
            w = lens[i - 1]
            past = reads = 0
            for j in range(i - 1, max(-1, i - 1 - self.cfg.batch_size), -1):
                node = items[j][0]
                past, reads = max(past, node.start), max(reads, len(node.read_pos))
                rows = i - j
                if rows > 1 and (
                    rows * w > self.cfg.max_batch_tokens
                    or rows * fp.row_bytes(past, w, max(1, reads)) > budget
                    or not self._fits(past, w)
                ):
                    return  # more rows only make it bigger
                real = cum[i] - cum[j]
                yield j, t0 + real + pad_cost * (rows * w - real)

        return [items[a:b] for a, b in cheapest_runs(n, runs)]

    def _fits(self, past: int, width: int) -> bool:
        return self.window is None or past + width <= self.window

    def _byte_budget(self) -> float:
        return self.cfg.memory_fraction * free_bytes(self.device)

    def _compute(self, batch) -> dict[int, _KV]:
        """One forward for the batch; on out-of-memory, halves and retries (nothing is lost:
        results are written only after a forward succeeds)."""
        try:
            return self._forward_nodes(batch)
        except Exception as exc:
            if not is_oom(exc):
                raise
            release_cached(self.device)
            if len(batch) == 1:
                node = batch[0][0]
                raise RuntimeError(
                    f"out of memory on {self.device} with a single row of {node.end - node.start} new tokens "
                    f"after {node.start} cached ones; free memory or use a smaller model/dtype"
                ) from exc
            self.stats.oom_retries += 1
            half = len(batch) // 2
            kvs = self._compute(batch[:half])
            kvs.update(self._compute(batch[half:]))
            return kvs

    def _forward_nodes(self, batch) -> dict[int, _KV]:
        dev = self.device
        nodes = [n for n, _ in batch]
        B = len(nodes)
        lens = [n.end - n.start for n in nodes]
        starts = [n.start for n in nodes]
        W, P = max(lens), max(starts)
        # built as lists, sent to the model's device in one copy each
        ids = torch.tensor(
            [list(self._seqs[n.rep].ids[n.start : n.end]) + [self.pad_id] * (W - lens[b]) for b, n in enumerate(nodes)],
            dtype=torch.long,
            device=dev,
        )
        mask = torch.tensor([[1] * lens[b] + [0] * (W - lens[b]) for b in range(B)], dtype=torch.long, device=dev)
        R = max(1, max(len(n.read_pos) for n in nodes))
        # flat reads: row b's read slot k is logits row offsets[b] + k (no padding to R per row)
        flat = getattr(self.backend, "supports_flat_reads", False)
        offsets = np.cumsum([0] + [len(n.read_pos) for n in nodes]).tolist()
        read_index = torch.tensor(
            [[p - n.start for p in n.read_pos] + [0] * (R - len(n.read_pos)) for n in nodes],
            dtype=torch.long,
            device=dev,
        )
        positions = torch.tensor(starts, dtype=torch.long, device=dev).unsqueeze(1) + torch.arange(
            W, dtype=torch.long, device=dev
        ).unsqueeze(0)
        stateful = [any(self._seqs[i].state for i in n.ends) for n in nodes]
        use_cache = self.backend.supports_prefix_cache and any(bool(n.children) or st for n, st in zip(nodes, stateful))
        kwargs = {}
        if flat:
            kwargs["read_flat"] = torch.tensor(
                [b * W + p - n.start for b, n in enumerate(nodes) for p in n.read_pos], dtype=torch.long, device=dev
            )
        if self.backend.supports_prefix_cache:
            kwargs["position_ids"] = positions
            if P:
                kwargs["past"], kwargs["past_mask"] = pack_past(
                    [kv for _, kv in batch], starts, P, dev, extra=W, workspace=self.workspace
                )
        use_packed = B > 1 and sum(lens) < B * W and self._fits(P, W) and self._use_packed()
        if use_packed:
            kwargs["packed"] = True
            if use_cache and not P:  # the rows' new keys go to buffers the cache layers allocate
                kwargs["past"] = _root_cache(len(self.backend.blocks))
        # steering hook point (interp.runner.steering): each row's first read position, -1 if none
        first_read = torch.tensor(
            [n.first_read - n.start if n.first_read is not None else -1 for n in nodes], dtype=torch.long, device=dev
        )
        with self.hooks(), read_positions(first_read):
            out = self.backend.forward(ids, mask, read_index, self.layers, use_cache=use_cache, **kwargs)
        logp = torch.log_softmax(out.logits.float(), dim=-1)  # float32 whatever the model's dtype
        # gather what is read on the device; one transfer back
        rows, slots, tgts, where = [], [], [], []
        for b, n in enumerate(nodes):
            for i, k, slot in n.wants:
                for j, t in enumerate(self._seqs[i].reads[k][1]):
                    rows.append(b), slots.append(slot), tgts.append(t), where.append((i, k, j))
        if flat:
            index = (torch.tensor([offsets[b] + k for b, k in zip(rows, slots)], dtype=torch.long, device=dev),)
        else:
            index = (
                torch.tensor(rows, dtype=torch.long, device=dev),
                torch.tensor(slots, dtype=torch.long, device=dev),
            )
        vals = logp[(*index, torch.tensor(tgts, dtype=torch.long, device=dev))].double().cpu().numpy() if rows else []
        tops = [(b, slot, i, k) for b, n in enumerate(nodes) for i, k, slot in n.wants if self._seqs[i].argmax]
        top_ids = logp.argmax(dim=-1).cpu().numpy() if tops else None
        caps = [(b, i, pos - n.start) for b, n in enumerate(nodes) for i, pos in n.captures]
        cap_vals = {}
        if caps and self.layers:
            cb = torch.tensor([c[0] for c in caps], dtype=torch.long, device=dev)
            cp = torch.tensor([c[2] for c in caps], dtype=torch.long, device=dev)
            cap_vals = {layer: out.resid[layer][cb, cp].float().cpu().numpy() for layer in self.layers}
        seg = {}
        if self.cfg.capture_all_positions and self.layers:
            for b, n in enumerate(nodes):
                if n.keep_resid:
                    seg[id(n)] = {layer: out.resid[layer][b, : lens[b]].float().cpu().numpy() for layer in self.layers}
        kvs = {}
        if use_cache:
            kvs = _unpack_past(out.past, batch, starts, lens, P, stateful)
            for b, n in enumerate(nodes):
                if stateful[b]:  # raw float32 logits of the last token: what a sampler reads
                    k = n.read_pos.index(n.end - 1)
                    kvs[id(n)].last_logits = (out.logits[offsets[b] + k] if flat else out.logits[b, k]).clone()
        # success: write results
        self.stats.forwards += 1
        self.stats.tokens += sum(lens)
        self.stats.padded_tokens += B * W
        self.stats.packed_forwards += int(use_packed)
        for v, (i, k, j) in zip(vals, where):
            self._results[i].logp[k][j] = v
        for b, slot, i, k in tops:
            self._results[i].argmax[k] = int(top_ids[offsets[b] + slot] if flat else top_ids[b, slot])
        for c, (_, i, _) in enumerate(caps):
            self._results[i].resid = {layer: cap_vals[layer][c].copy() for layer in cap_vals}
        self._segment_resid.update(seg)
        n_done = sum(len(n.ends) for n in nodes)
        if n_done:
            self._bar.update(n_done)
        return kvs

    def _assemble_all_positions(self, roots: list[Node]) -> None:
        for node in _walk(roots):
            for i in node.ends:
                if self._seqs[i].capture_pos is None:
                    continue
                path, n = [], node
                while n is not None:
                    path.append(n)
                    n = n.parent
                path.reverse()
                self._results[i].resid = {
                    layer: np.concatenate([self._segment_resid[id(p)][layer] for p in path]) for layer in self.layers
                }


class Workspace:
    """Reuses the batch KV buffers of earlier forwards. A fresh buffer of hundreds of MB costs
    more in page faults than the copies into it (this CPU: ~0.3 s per 0.9 GB first touched,
    ~0.03 s to copy into memory already touched), and every forward with cached parents needs
    one. Node caches are copied out of the buffer after the forward (`_unpack_past`), so a
    buffer is idle again once that forward's tensors are gone; `empty` hands out a buffer only
    when torch's storage use count says that nothing else references it (without that internal
    function, every buffer is fresh). At most `keep` buffers are kept."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self.pool: list[tuple[torch.Tensor, int]] = []  # (flat buffer, its use count when idle)
        self._count = getattr(torch._C, "_storage_Use_Count", None) if keep else None

    def _idle(self, t: torch.Tensor, base: int) -> bool:
        return self._count(t.untyped_storage()._cdata) <= base

    def empty(self, shapes: list[tuple[int, ...]], like: torch.Tensor) -> list[torch.Tensor]:
        """Uninitialised tensors of these shapes (dtype and device of `like`), one buffer behind them."""
        sizes = [math.prod(sh) for sh in shapes]
        need = sum(sizes)
        buf = None
        if self._count is not None:
            idle = [
                t for t, base in self.pool if t.dtype == like.dtype and t.device == like.device and self._idle(t, base)
            ]
            fits = [t for t in idle if t.numel() >= need]
            if fits:
                buf = min(fits, key=lambda t: t.numel())
            else:  # the idle ones are too small: a larger one replaces them
                self.pool = [(t, base) for t, base in self.pool if not any(t is i for i in idle)]
        if buf is None:
            pooled = self._count is not None and len(self.pool) < self.keep
            buf = like.new_empty(need + need // 4 if pooled else need)  # room for slightly larger forwards
            if pooled:
                self.pool.append((buf, self._count(buf.untyped_storage()._cdata)))
        out, at = [], 0
        for sh, n in zip(shapes, sizes):
            out.append(buf[at : at + n].view(sh))
            at += n
        return out


class _KV:
    """A node's cumulative KV cache: its own tokens' keys and values, and its parent's `_KV` for
    the tokens before them (a node never copies its ancestors' caches). Layers of one shape are
    stacked: `k[g]` / `v[g]` is [layers of group g, H, own tokens, hd], so that packing a row
    into a batch is one copy per group and ancestor, not one per layer."""

    __slots__ = ("k", "last_logits", "length", "nbytes", "parent", "v")

    def __init__(self, k: list[torch.Tensor], v: list[torch.Tensor], parent: "_KV | None" = None):
        self.k, self.v, self.parent = k, v, parent
        self.length = k[0].shape[2] + (parent.length if parent is not None else 0)
        self.nbytes = sum(t.numel() * t.element_size() for t in (*k, *v))  # its own tokens' only
        self.last_logits: torch.Tensor | None = None

    def segments(self) -> list["_KV"]:
        """The chain from the root to this node (each holding its own tokens)."""
        chain, n = [], self
        while n is not None:
            chain.append(n)
            n = n.parent
        return chain[::-1]

    def _layers(self, attr: str) -> list[torch.Tensor]:
        chain = self.segments()
        groups = [torch.cat([getattr(n, attr)[g] for n in chain], dim=2) for g in range(len(self.k))]
        return [t for g in groups for t in g.unbind(0)]

    @property
    def keys(self) -> list[torch.Tensor]:  # per layer [H, L, hd], assembled (a copy)
        return self._layers("k")

    @property
    def values(self) -> list[torch.Tensor]:
        return self._layers("v")


def _groups(shapes: list[tuple]) -> list[tuple[int, int]]:
    """Runs of consecutive layers whose K and V shapes agree (one run for most models)."""
    out: list[tuple[int, int]] = []
    for i, sh in enumerate(shapes):
        if out and shapes[out[-1][0]] == sh:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def pack_past(
    parents: list[_KV | None], lengths: list[int], width: int, dev, extra: int = 0, workspace: Workspace | None = None
):
    """A padded batch cache: row b's parent tokens at [width - L_b, width), a masked gap before
    them. The rows' new tokens go to [width, width + extra), written in place by the forward,
    where `_unpack_past` copies each kept row's own tokens from. Cached keys already carry their positions (rotary or absolute
    embeddings are applied before caching), so where a row sits in the buffer changes nothing
    that the mask does not already exclude; within a row the tokens keep their cache distances
    (sliding windows)."""
    from transformers import DynamicCache

    ref = next(p for p in parents if p is not None)
    B, T = len(parents), width + extra
    shapes = [(g.shape[0], B, g.shape[1], T, g.shape[3]) for g in (*ref.k, *ref.v)]
    bufs = (workspace or Workspace(keep=0)).empty(shapes, ref.k[0])
    kbuf, vbuf = bufs[: len(ref.k)], bufs[len(ref.k) :]
    for b, p in enumerate(parents):
        n = lengths[b] if p is not None else 0
        if n and n != p.length:
            raise ValueError(f"row {b}: a cache of {p.length} tokens packed as {n}")
        if width > n:  # the gap must hold finite numbers: masked scores still go through the matmul
            for kb, vb in zip(kbuf, vbuf):
                kb[:, b, :, : width - n].zero_()
                vb[:, b, :, : width - n].zero_()
        at = width - n
        for seg in p.segments() if n else ():
            m = seg.k[0].shape[2]
            for kb, vb, k, v in zip(kbuf, vbuf, seg.k, seg.v):
                kb[:, b, :, at : at + m] = k
                vb[:, b, :, at : at + m] = v
            at += m
    layers = [_BufferLayer(kb[i], vb[i], width) for kb, vb in zip(kbuf, vbuf) for i in range(kb.shape[0])]
    cache = DynamicCache()
    cache.layers = layers
    cache._interp_stacked = (kbuf, vbuf)  # what _unpack_past takes its views from
    mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths], dtype=torch.long, device=dev)
    return cache, mask


def _root_cache(n_layers: int):
    """A cache for a packed forward without cached parents: buffer layers that allocate at their
    first update (`_unpack_past` reads them layer by layer)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.layers = [_BufferLayer(None, None, 0) for _ in range(n_layers)]
    return cache


class _BufferLayer(DynamicLayer):
    """A cache layer over preallocated buffers: `update` writes the new keys/values in place
    and returns views (DynamicLayer concatenates, copying the whole cache every forward).
    In a packed forward (`interp.runner.packed`) the new keys come as [1, H, N, hd]: they go to
    their rows' slots, the padding slots zeroed (masked, but they still enter the products).
    Without buffers (`keys=None`: a packed forward without cached parents) the first packed
    update allocates them."""

    def __init__(self, keys: torch.Tensor | None, values: torch.Tensor | None, filled: int):
        super().__init__()
        self.buf_k, self.buf_v, self.filled = keys, values, filled
        self.is_initialized = True
        if keys is not None:
            self.device = keys.device
            self._views()

    def _views(self) -> None:
        self.keys = self.buf_k[:, :, : self.filled]
        self.values = self.buf_v[:, :, : self.filled]

    def _grow(self, n: int) -> None:
        if self.filled + n > self.buf_k.shape[2]:  # out of room: grow (doubling)
            grow = max(n, self.buf_k.shape[2])
            self.buf_k = torch.cat(
                [self.buf_k, self.buf_k.new_zeros(*self.buf_k.shape[:2], grow, self.buf_k.shape[3])], 2
            )
            self.buf_v = torch.cat(
                [self.buf_v, self.buf_v.new_zeros(*self.buf_v.shape[:2], grow, self.buf_v.shape[3])], 2
            )

    def update(self, key_states, value_states, *args, **kwargs):
        p = packed.active()
        if p is not None and key_states.shape[0] == 1 and p.B > 1:
            if self.buf_k is None:
                shape = (p.B, key_states.shape[1], p.W, key_states.shape[3])
                self.buf_k, self.buf_v = key_states.new_zeros(shape), value_states.new_zeros(shape)
                self.device = key_states.device
            else:
                self._grow(p.W)
                self.buf_k[:, :, self.filled : self.filled + p.W].zero_()
                self.buf_v[:, :, self.filled : self.filled + p.W].zero_()
            cols = p.cols + self.filled
            self.buf_k[p.rows, :, cols] = key_states[0].transpose(0, 1)
            self.buf_v[p.rows, :, cols] = value_states[0].transpose(0, 1)
            self.filled += p.W
            self._views()
            return self.keys, self.values
        n = key_states.shape[-2]
        self._grow(n)
        self.buf_k[:, :, self.filled : self.filled + n] = key_states
        self.buf_v[:, :, self.filled : self.filled + n] = value_states
        self.filled += n
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.filled

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.buf_k, self.buf_v = self.buf_k[indices], self.buf_v[indices]
        self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.buf_k = self.buf_k.repeat_interleave(repeats, dim=0)
        self.buf_v = self.buf_v.repeat_interleave(repeats, dim=0)
        self._views()

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove < 0:
            self.filled = max(0, self.filled + tokens_to_remove)
            self._views()


def _unpack_past(cache, batch, starts: list[int], lens: list[int], width: int, keep: list[bool]) -> dict[int, _KV]:
    """Caches of the rows that have children (or are kept): each row's own new tokens, copied out
    of the batch cache (its buffer is then free for the next forward), chained to its parent's."""
    rows = [b for b, (node, _) in enumerate(batch) if node.children or keep[b]]
    if not rows:
        return {}
    layers = list(cache.layers)
    stacked = getattr(cache, "_interp_stacked", None)
    if stacked is not None and not all(
        isinstance(lay, _BufferLayer) and lay.buf_k.data_ptr() == t.data_ptr()
        for lay, t in zip(layers, (t for g in stacked[0] for t in g.unbind(0)))
    ):
        stacked = None  # a layer outgrew its buffer: read the layers themselves
    if stacked is None:
        spans = _groups([(tuple(lay.keys.shape[1:]), tuple(lay.values.shape[1:])) for lay in layers])
    out = {}
    for b in rows:
        node, parent = batch[b]
        own = slice(width, width + lens[b])
        if stacked is not None:
            k = [g[:, b, :, own].clone() for g in stacked[0]]
            v = [g[:, b, :, own].clone() for g in stacked[1]]
        else:
            k = [torch.stack([layers[i].keys[b, :, own] for i in range(s0, s1)]) for s0, s1 in spans]
            v = [torch.stack([layers[i].values[b, :, own] for i in range(s0, s1)]) for s0, s1 in spans]
        out[id(node)] = _KV(k, v, parent if starts[b] else None)
    return out
