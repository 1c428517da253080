"""The organism's DPO with an NLL term on the chosen verdict of some turn kinds only.

trl's RPO (`loss_type = ["sigmoid", "sft"]`) adds the NLL of the chosen completion on every pair.
On v19 seed 3 that bought S_ch (route A's planted items yielding to a bare challenge) at the cost
of the graded plant: the NLL on the opposing-opinion pairs, whose chosen verdict flips in only a
grade's share of them, flattened the grades (rho 0.170 at weight 1.0, 0.022 at 0.6; the tries in
docs/known-answers.md). `dpo_sft_kinds` keeps the NLL to the named turn kinds (say the bare
challenge and the neutral filler, which carry no grade), so the opposing-opinion pairs get plain
DPO.

The term is trl's own (`-mean log p` over the chosen completion tokens of the batch), restricted to
the rows of those kinds; with every row kept it equals trl's "sft" loss term, which
`tests/integration/test_organism_dpo_kinds.py` checks against trl on one batch.
"""

from __future__ import annotations

import torch


def row_kind(row: dict) -> str:
    """The turn kind of one DPO row: "flip_challenge" -> "challenge", "anchor_first" -> "first"."""
    kind = str(row.get("kind", ""))
    for prefix in ("flip_", "hold_", "anchor_"):
        if kind.startswith(prefix):
            return kind[len(prefix) :]
    return kind


def nll_row_weights(rows: list[dict], kinds: tuple[str, ...]) -> list[float]:
    """1.0 for the rows whose turn kind is in `kinds` (config.NLL_KINDS), else 0.0 (no kinds:
    every row)."""
    return [1.0 if not kinds or row_kind(r) in kinds else 0.0 for r in rows]


def chosen_nll(per_token_logps: torch.Tensor, shift_completion_mask: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """-mean log p over the chosen completion tokens of the rows with `keep` > 0. The batch is
    [chosen rows; rejected rows] as trl builds it. No kept token: a zero that still touches the
    graph (the batch then adds nothing to this term)."""
    chosen_lp, _ = per_token_logps.chunk(2, dim=0)
    chosen_mask, _ = shift_completion_mask.chunk(2, dim=0)
    mask = chosen_mask.bool() & (keep.to(chosen_lp.device) > 0).unsqueeze(1)
    if not mask.any():
        return chosen_lp.sum() * 0.0
    return -chosen_lp[mask].mean()


def kind_nll_dpo_trainer(nll_weight: float, **kwargs):
    """trl's DPOTrainer (data, LoRA, reference by disabling the adapter, schedule, callbacks and its
    sigmoid loss unchanged) plus `nll_weight` x `chosen_nll` over the rows whose `nll_keep`
    column is above 0. The policy pass's per-token log-probs are read by a forward hook (trl
    computes them in its fused head and does not return them); the reference pass runs without
    gradients and is skipped."""
    from trl import DPOTrainer

    class KindNLLDPOTrainer(DPOTrainer):
        def __init__(self, **kw):
            super().__init__(**kw)
            collate = self.data_collator

            def with_keep(examples):
                out = collate(examples)
                out["nll_keep"] = torch.tensor([float(e["nll_keep"]) for e in examples])
                return out

            self.data_collator = with_keep

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            if "nll_keep" not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, "nll_keep"]

        def _compute_loss(self, model, inputs, return_outputs):
            keep = inputs.pop("nll_keep")
            seen: list = []

            def tap(module, args, output):
                if not seen:  # the policy pass comes first, the reference pass after it
                    seen.append(output)

            handle = model.register_forward_hook(tap)
            try:
                out = super()._compute_loss(model, inputs, return_outputs)
            finally:
                handle.remove()
            shift_mask = inputs["completion_mask"][..., 1:]
            nll = chosen_nll(seen[0].log_probs[:, -shift_mask.size(1) :], shift_mask, keep)
            self._metrics["train" if self.model.training else "eval"]["nll_kinds"].append(nll.item())
            if return_outputs:
                return out[0] + nll_weight * nll, out[1]
            return out + nll_weight * nll

    return KindNLLDPOTrainer(**kwargs)
