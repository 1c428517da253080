"""The organism's SFT loss: mean cross-entropy over completion tokens, with the LM head applied only
at the positions that predict them.

Why not trl's own loss: trl 1.16's SFTTrainer always installs its fused LM head
(`trl/kernels/chunked_logprob.py`), which computes the full 49,152-word head and its backward over
every position in float32 tiles outside autocast. Under `--train-precision mixed-bf16` that was
~2.5 s of a ~4.3 s step (cProfile, round 7), the part that did not speed up. Here the model's own
`logits_to_keep` keeps the head to the union of completion positions in the batch (the verdicts
are a few tokens after a long prompt). The body runs under whatever autocast the Trainer set; the
head itself and the cross-entropy run in float32 (`float32_head`), as in trl's fused head and as
#25's mixed-precision scoring keeps the unembedding: at a few positions per row it costs nothing.
(v10 ran the head in bf16 under autocast; its route A learned the plant less than v9's, but the
v11 pilot with the float32 head moved the shortfall to route B: at 192 route steps the plant's
strength varied from run to run whatever the head's precision, see `OrganismConfig.route_sft_steps`.)

The value is the same quantity trl computes (sum of -log p over completion tokens / their count);
`tests/test_organism.py` checks it against a plain full-logits cross-entropy.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from interp.core.partition import cheapest_runs


@contextmanager
def float32_head(model):
    """Within this block the model's output embedding (the LM head) computes in float32 outside
    any autocast: a forward hook replaces its output with `F.linear` of the float32 input and weight
    (the autocast result it replaces is over the kept positions only, so the waste is small)."""
    head = model.get_output_embeddings()

    def hook(module, args, output):
        with torch.autocast(device_type=args[0].device.type, enabled=False):
            bias = None if getattr(module, "bias", None) is None else module.bias.float()
            return F.linear(args[0].float(), module.weight.float(), bias)

    handle = head.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def completion_loss(model, inputs: dict) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean -log p of the completion tokens (labels != -100, shifted by one); also the token
    accuracy and mean entropy over those positions, for the training log. The mean is over this
    batch's tokens, which is trl's normalisation when each optimizer step is one batch (the
    organism never accumulates gradients)."""
    labels = inputs["labels"]
    target = labels[:, 1:]
    keep = target != -100
    # positions p whose logits predict a completion token at p + 1, pooled over the batch
    pos = keep.any(dim=0).nonzero().squeeze(1)
    if pos.numel() == 0:  # no trainable token: a finite zero that still touches the graph
        out = model(input_ids=inputs["input_ids"][:, :1], attention_mask=inputs["attention_mask"][:, :1])
        return out.logits.sum() * 0.0, {"mean_token_accuracy": 0.0, "entropy": 0.0}
    with float32_head(model):
        out = model(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            use_cache=False,
            logits_to_keep=pos,
        )
    logits = out.logits.float()  # [batch, len(pos), vocab]; float32 already (float32_head)
    tgt = target[:, pos]
    mask = keep[:, pos]
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, tgt.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    n = mask.sum()
    loss = (nll * mask).sum() / n
    with torch.no_grad():
        acc = ((logits.argmax(-1) == tgt) & mask).sum() / n
        ent = (-(logp.exp() * logp).sum(-1) * mask).sum() / n
    return loss, {"mean_token_accuracy": acc.item(), "entropy": ent.item()}


@contextmanager
def compact_fused_head():
    """trl's fused LM head (DPOTrainer's per-token log-probs) scores only the positions whose label is
    not -100 on every device, not only on Triton devices (trl 1.16 `add_fused_lm_head`: "On Triton
    devices, only the valid positions are scored"; on a CPU every position of every row, chosen,
    rejected and the reference pass alike). The masked positions' outputs are zeros either way,
    and the tiles' arithmetic is the same function, so the values do not change; the verdict's few
    positions replace a few hundred per row. trl reads the switch at each call, so it holds within
    the block (the pinned trl; the test compares both paths)."""
    import trl.trainer.utils as tu

    saved = tu._use_triton
    tu._use_triton = lambda device: True
    try:
        yield
    finally:
        tu._use_triton = saved


# A forward and backward pass's fixed cost, in tokens of one row: the work that does not grow with
# length (some 30 layers of module calls, each Linear with its LoRA adapter). It decides how far a
# batch is cut: rows within a few dozen tokens of each other share a pass. SmolLM2-135M, 2 threads,
# bf16 autocast: 0.41 s for 64 tokens, 1.69 s for 512; a line's intercept over its slope, 73 and 79 tokens in two runs
# (python -m bench sft_batch_split, BENCHMARKS.md).
SPLIT_OVERHEAD_TOKENS = 73


def length_groups(lengths: list[int], overhead: int = SPLIT_OVERHEAD_TOKENS) -> list[list[int]]:
    """Rows of a batch in groups of similar length, each group one pass padded to its longest:
    the partition of the rows sorted by length into runs that minimises padded tokens plus
    `overhead` per pass (exact, by dynamic programming over the sorted rows)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])

    def runs(end: int):  # order[start:end], padded to its longest, lengths[order[end - 1]]
        return ((start, lengths[order[end - 1]] * (end - start) + overhead) for start in range(end))

    return [order[a:b] for a, b in cheapest_runs(len(order), runs)]


def split_batch(inputs: dict, overhead: int = SPLIT_OVERHEAD_TOKENS) -> list[tuple[dict, int]]:
    """A right-padded batch as passes over groups of similar length, each cut to its own longest
    row, with the completion tokens each holds; `[(inputs, n)]` unchanged where it cannot be cut
    (a key that is not [batch, length], padding on the left, a single group).

    Why this is the same step: the loss is a sum over completion tokens over their count in the
    batch; with right padding a row's real tokens keep their positions and attend to the same
    tokens whatever follows them, so the passes' gradients, each weighted by its tokens' share,
    add up to the padded batch's (up to float rounding: tests/unit/test_organism_sft_split.py)."""
    mask = inputs.get("attention_mask")
    labels = inputs.get("labels")
    whole = [(inputs, int((labels[:, 1:] != -100).sum())) if labels is not None else (inputs, 0)]
    if mask is None or labels is None or mask.dim() != 2 or mask.shape[0] < 2:
        return whole
    b, width = mask.shape
    if any(not (hasattr(v, "shape") and tuple(v.shape[:2]) == (b, width)) for v in inputs.values()):
        return whole
    if bool((mask[:, 1:] > mask[:, :-1]).any()):  # a real token after a pad: not right padding
        return whole
    lengths = mask.sum(dim=1).tolist()
    groups = length_groups([int(n) for n in lengths], overhead)
    if len(groups) == 1:
        return whole
    out = []
    for g in groups:
        w = max(int(lengths[i]) for i in g)
        part = {k: v[g, :w] for k, v in inputs.items()}
        out.append((part, int((part["labels"][:, 1:] != -100).sum())))
    return out


def completion_sft_trainer(split: bool = True, **kwargs):
    """trl's SFTTrainer (data handling, LoRA, schedule, callbacks unchanged) with `compute_loss`
    replaced by `completion_loss`; with `split`, each training batch runs as `split_batch`'s passes
    (one optimizer step of the same rows: padding is not computed)."""
    from trl import SFTTrainer

    class CompletionSFTTrainer(SFTTrainer):
        _weight = 1.0  # the share of the batch's completion tokens in the pass being computed
        _pending: dict[str, float] | None = None  # token-weighted metrics of the passes so far

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss, metrics = completion_loss(model, inputs)
            if self._pending is not None:
                for k, v in metrics.items():
                    self._pending[k] = self._pending.get(k, 0.0) + self._weight * v
                loss = loss * self._weight
            else:
                mode = "train" if self.model.training else "eval"
                for k, v in metrics.items():
                    self._metrics[mode][k].append(v)
            return (loss, None) if return_outputs else loss

        def training_step(self, model, inputs, num_items_in_batch=None):
            passes = split_batch(inputs) if split else [(inputs, 0)]
            total = sum(n for _, n in passes)
            if len(passes) == 1 or total == 0:
                return super().training_step(model, inputs, num_items_in_batch)
            self._pending = {}
            try:
                loss = None
                for part, n in passes:
                    if n == 0:  # no completion token: adds nothing to the loss or its gradient
                        continue
                    self._weight = n / total
                    step = super().training_step(model, part, num_items_in_batch)
                    loss = step if loss is None else loss + step
                for k, v in self._pending.items():
                    self._metrics["train"][k].append(v)
            finally:
                self._pending, self._weight = None, 1.0
            return loss

    return CompletionSFTTrainer(**kwargs)
