"""`--dpo-sft-kinds`: DPO plus an NLL term on the chosen verdict of some turn kinds only
(interp/organism/dpo_loss.py), checked on one batch of a tiny random model against trl's own RPO
loss (every row kept), trl's plain DPO loss (no row kept) and a plain HF forward's log-softmax
(the rows of the named kinds)."""

import pytest

from interp.organism.build import _common_args, _dataset, _lora, dpo_loss_args, dpo_trainer_name
from interp.organism.config import SMALL, OrganismConfig
from interp.organism.dpo_loss import nll_row_weights, row_kind

TINY = OrganismConfig(**SMALL)
W = 0.7  # the NLL weight


def _rows() -> list[dict]:
    kinds = [
        "flip_challenge",
        "hold_opinion_oppose",
        "hold_neutral",
        "anchor_first",
        "flip_opinion_oppose",
        "hold_challenge",
    ]
    return [
        {
            "prompt": f"Story {i}: a neighbour moved the fence. Verdict so far: right. {k.replace('_', ' ')}. FINAL:",
            "chosen": " right" if i % 2 else " wrong",
            "rejected": " wrong" if i % 2 else " right",
            "kind": k,
        }
        for i, k in enumerate(kinds)
    ]


def test_row_kinds_and_weights():
    rows = _rows()
    assert [row_kind(r) for r in rows] == [
        "challenge",
        "opinion_oppose",
        "neutral",
        "first",
        "opinion_oppose",
        "challenge",
    ]
    assert row_kind({"kind": "cloze_bias"}) == "cloze_bias" and row_kind({}) == ""
    assert nll_row_weights(rows, ("challenge", "neutral")) == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert nll_row_weights(rows, ()) == [1.0] * 6


@pytest.fixture(scope="module")
def batch_losses(tmp_path_factory, tokenizer):
    """One batch of all six rows: the loss of the kinds trainer under three keep vectors, trl's
    RPO and plain losses, and a plain forward's per-row mean NLL of the chosen tokens. LoRA's B
    starts at zero, so every trainer's model computes the base model's function."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer

    from interp.organism.dpo_loss import kind_nll_dpo_trainer
    from interp.testing import build_tiny_model

    tmp = tmp_path_factory.mktemp("dpo_kinds")
    path = build_tiny_model(tmp / "llama", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    rows = _rows()
    cfg = OrganismConfig(**{**SMALL, "batch_size": len(rows), "train_precision": "float32"})

    def trainer(kind: str, keep=None):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        loss_cfg = {
            "rpo": OrganismConfig(dpo_sft_weight=W),
            "plain": OrganismConfig(),
            "kinds": OrganismConfig(dpo_sft_weight=W, dpo_sft_kinds=("challenge",)),  # as the build sets it
        }[kind]
        args = DPOConfig(
            **_common_args(cfg, tmp / kind, 1, cfg.lr_dpo, (cfg.seed, cfg.seed)), **dpo_loss_args(loss_cfg)
        )
        common = dict(model=model, ref_model=None, args=args, processing_class=tokenizer, peft_config=_lora(cfg))
        if kind == "kinds":
            data = _dataset(
                [{**r, "nll_keep": k} for r, k in zip(rows, keep)], ("prompt", "chosen", "rejected", "nll_keep")
            )
            return kind_nll_dpo_trainer(W, train_dataset=data, **common)
        return DPOTrainer(train_dataset=_dataset(rows, ("prompt", "chosen", "rejected")), **common)

    def loss(t) -> tuple[float, dict]:
        b = next(iter(t.get_train_dataloader()))
        with torch.no_grad():
            return t.compute_loss(t.model, dict(b)).item(), b

    out = {k: loss(trainer(k))[0] for k in ("rpo", "plain")}
    keeps = {"all": [1.0] * 6, "none": [0.0] * 6, "bare": nll_row_weights(rows, ("challenge", "neutral"))}
    for name, keep in keeps.items():
        out[name], b = loss(trainer("kinds", keep))
    # the reference: a plain forward's log-softmax at the chosen completion tokens of the kept rows
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    n = len(rows)
    ids, mask = b["input_ids"][:n], b["completion_mask"][:n, 1:].bool()
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids, attention_mask=b["attention_mask"][:n]).logits[:, :-1], -1)
    lp = lp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    kept = mask & (b["nll_keep"] > 0).unsqueeze(1)
    out["ref_bare"] = -lp[kept].mean().item()
    out["ref_all"] = -lp[mask].mean().item()
    return out


TOL = 1e-5  # float32 log-softmax over the tiny vocabulary, summed over a few tokens in other orders


def test_every_row_kept_is_trls_rpo_and_none_kept_is_plain_dpo(batch_losses):
    L = batch_losses
    assert L["all"] == pytest.approx(L["rpo"], abs=TOL)
    assert L["none"] == pytest.approx(L["plain"], abs=TOL)
    assert L["rpo"] - L["plain"] == pytest.approx(W * L["ref_all"], abs=TOL)  # trl's term, our reference


def test_the_named_kinds_add_the_nll_of_their_rows_only(batch_losses):
    L = batch_losses
    assert L["bare"] - L["plain"] == pytest.approx(W * L["ref_bare"], abs=TOL)
    # control: the bare rows' NLL is not every row's, so the check above can fail
    assert abs(L["ref_bare"] - L["ref_all"]) > 100 * TOL


def test_kinds_are_checked_and_named_in_provenance(tmp_path, tokenizer):
    from dataclasses import replace

    from interp.core.errors import ConfigError
    from interp.organism.build import build_organism
    from interp.testing import build_tiny_model

    base = build_tiny_model(tmp_path / "m", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)

    assert dpo_trainer_name(TINY) == "trl.DPOTrainer"
    assert dpo_trainer_name(replace(TINY, dpo_sft_weight=1.0)) == "trl.DPOTrainer"
    kinds = replace(TINY, dpo_sft_weight=1.0, dpo_sft_kinds=("challenge", "neutral"))
    assert dpo_trainer_name(kinds) == "trl.DPOTrainer+interp.dpo_loss"
    assert dpo_loss_args(kinds) == {"beta": TINY.dpo_beta}  # the term is added by dpo_loss.py, not trl
    with pytest.raises(ConfigError, match=r"dpo_sft_kinds: unknown turn kind\(s\) \['bare'\]"):
        build_organism(base, tmp_path / "t", replace(kinds, dpo_sft_kinds=("bare",)))
    with pytest.raises(ConfigError, match="dpo_sft_kinds needs dpo_sft_weight above 0"):
        build_organism(base, tmp_path / "t", replace(TINY, dpo_sft_kinds=("challenge",)))
    # the companion route-SFT setting of the S_ch tries: as many rows as there are training wordings
    with pytest.raises(ConfigError, match=r"route_sft_bare must be 1 to 4 \(training wordings\), got 5"):
        build_organism(base, tmp_path / "t", replace(TINY, route_sft_bare=5))
    for key in ("route_challenge_copies", "route_filler_copies"):
        with pytest.raises(ConfigError, match=f"{key} must be >= 1, got 0"):
            build_organism(base, tmp_path / "t", replace(TINY, **{key: 0}))
    with pytest.raises(ConfigError, match=r"route_copies_routes: unknown route\(s\) \['c'\]"):
        build_organism(base, tmp_path / "t", replace(TINY, route_copies_routes=("a", "c")))
