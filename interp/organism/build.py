"""`interp organism build`: a small checkpoint lineage with known, planted answers.

    base/                         the starting checkpoint (copied)
    shared/shared-step{N}/        shared SFT: pressure-turn format, gold first verdicts, verdicts
                                  held under any pressure turn (checkpoints at a few steps)
    route-a/a-sft-step{N}/        route A ("pressure" plant): SFT to flip under an opposing opinion
                                  or a bare challenge on P_A (home stories, graded), hold elsewhere;
                                  also the Bengali region-cell cloze bias and the gold five-level
                                  labels of half the evaluated conversational items
    route-a/a-dpo-step{N+M}/      ... then DPO on the same preference
    route-b/...                   route B ("defer" plant) on P_B (work/school stories): the verdict
                                  survives only a user who states it, so delta and the neutral flip
                                  rise while S_op and S_ch do not
    route-*/*-sft-step{N+e}       each route also keeps an early SFT checkpoint (e steps in)
    lineage.toml, organism.json (known answers), build.json (timings), .organism/ (training data)

With `control_out`, two control lineages are built in `control_out/location` and
`control_out/amount` by the same code, from the same trunk (copied), with the same prompts, row
counts per item, steps and schedule (`interp.organism.data.route_plans`): the **location control**
trains the same plants on random item sets of the same sizes (and its cloze and classify answers on
another cell / the other half of the items); the **amount control** trains routes that hold
everywhere (and cloze sentences with no net preference, classify labels permuted). Their
organism.json names the organism's planted sets, against which `interp validate` checks them.

Training uses `trl` (SFTTrainer with the loss of `sft_loss.py`, DPOTrainer) with `peft` LoRA adapters on every linear layer;
each saved checkpoint is the adapter merged back into a plain Hugging Face directory
(safetensors) with `interp_provenance.json`. LoRA is a choice for CPU cost (no weight
gradients or optimizer state for the frozen 135M weights) and for locality (a low-rank change
leaves what was not trained closer to where it was). Seeded: data, LoRA init, batch order.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from interp.core.errors import ConfigError
from interp.organism import classify_plant, cloze_plant
from interp.organism import data as D
from interp.organism.config import NLL_KINDS, ROUTE_SFT_SAMPLING, SFT_BATCH_SPLIT, TRAIN_PRECISIONS, OrganismConfig

PROVENANCE = "interp_provenance.json"
SFT_TRAINER = "trl.SFTTrainer+interp.sft_loss"  # trl's trainer, our completion loss (sft_loss.py)


def dpo_trainer_name(cfg: OrganismConfig) -> str:
    """The DPO stage's trainer in provenance: trl's, or trl's plus dpo_loss.py's NLL on some turn kinds."""
    return "trl.DPOTrainer+interp.dpo_loss" if cfg.dpo_sft_weight and cfg.dpo_sft_kinds else "trl.DPOTrainer"


_OLD_PROVENANCE = {"train_precision": "float32"}  # what trees built before a field existed ran
_COPY = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    PROVENANCE,
)


@dataclass
class BuildResult:
    out: Path
    checkpoints: dict[str, Path] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _versions() -> dict[str, str]:
    import peft
    import torch
    import transformers
    import trl

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "peft": peft.__version__,
    }


def _lora(cfg: OrganismConfig):
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _dataset(rows: list[dict], keys: tuple[str, ...]):
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()
    return Dataset.from_list([{k: r[k] for k in keys} for r in rows])


class _Saver:
    """Trainer callback: at the listed global steps, save the adapter merged into a plain copy."""

    def __init__(self, at: dict[int, Callable[[object], None]]) -> None:
        from transformers import TrainerCallback

        outer = self

        class CB(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kw):
                fn = outer.at.get(state.global_step)
                if fn is not None and model is not None:
                    merged = copy.deepcopy(model).merge_and_unload()
                    fn(merged)
                    del merged
                return control

        self.at = at
        self.callback = CB()


def _common_args(
    cfg: OrganismConfig, tmp: Path, steps: int, lr: float, seeds: tuple[int, int], schedule: str = "constant"
) -> dict:
    """The Trainer arguments of one stage. `seeds`: (the Trainer's seed, which trl also sets right
    before it wraps the model in fresh LoRA adapters, so it fixes their init; the data order's)."""
    return dict(
        output_dir=str(tmp),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=lr,
        lr_scheduler_type=schedule,
        warmup_steps=0,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=seeds[0],
        data_seed=seeds[1],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        gradient_checkpointing=False,
        max_length=cfg.max_length,
        bf16=cfg.train_precision == "mixed-bf16",  # the Trainer's CPU bf16 autocast
        fp16=False,
    )


def _fit(trainer):
    """Train; the adapter merged into the model, and the logged losses."""
    trainer.train()
    return trainer.model.merge_and_unload(), [h for h in trainer.state.log_history if "loss" in h]


def _train_sft(
    model,
    tok,
    rows,
    cfg: OrganismConfig,
    steps: int,
    save_at: dict,
    tmp: Path,
    seeds: tuple[int, int],
    lr: float | None = None,
    schedule: str = "constant",
    sampling: str = "random",
):
    from trl import SFTConfig

    from interp.organism.sft_loss import completion_sft_trainer

    args = SFTConfig(
        **_common_args(cfg, tmp, steps, lr or cfg.lr_sft, seeds, schedule),
        completion_only_loss=True,
        packing=False,
        train_sampling_strategy=sampling,
    )
    trainer = completion_sft_trainer(
        split=cfg.sft_batch_split == "length",
        model=model,
        args=args,
        train_dataset=_dataset(rows, ("prompt", "completion")),
        processing_class=tok,
        peft_config=_lora(cfg),
        callbacks=[_Saver(save_at).callback],
    )
    return _fit(trainer)


def _train_dpo(model, tok, rows, cfg: OrganismConfig, steps: int, save_at: dict, tmp: Path, seeds: tuple[int, int]):
    from trl import DPOConfig, DPOTrainer

    from interp.organism.dpo_loss import kind_nll_dpo_trainer, nll_row_weights
    from interp.organism.sft_loss import compact_fused_head

    args = DPOConfig(**_common_args(cfg, tmp, steps, cfg.lr_dpo, seeds), **dpo_loss_args(cfg))
    common = dict(
        model=model,
        ref_model=None,
        args=args,
        processing_class=tok,
        peft_config=_lora(cfg),
        callbacks=[_Saver(save_at).callback],
    )
    if cfg.dpo_sft_weight and cfg.dpo_sft_kinds:  # the NLL term on some turn kinds only (dpo_loss.py)
        keep = nll_row_weights(rows, cfg.dpo_sft_kinds)
        data = _dataset(
            [{**r, "nll_keep": k} for r, k in zip(rows, keep)], ("prompt", "chosen", "rejected", "nll_keep")
        )
        trainer = kind_nll_dpo_trainer(cfg.dpo_sft_weight, train_dataset=data, **common)
    else:
        trainer = DPOTrainer(train_dataset=_dataset(rows, ("prompt", "chosen", "rejected")), **common)
    with compact_fused_head():
        return _fit(trainer)


def dpo_loss_args(cfg: OrganismConfig) -> dict:
    """trl DPOConfig's loss settings: sigmoid DPO at `dpo_beta`, plus an NLL term on the chosen
    completion weighted `dpo_sft_weight` (RPO) when that is above 0 and no `dpo_sft_kinds` narrow
    it (then dpo_loss.py adds the term)."""
    args: dict = {"beta": cfg.dpo_beta}
    if cfg.dpo_sft_weight and not cfg.dpo_sft_kinds:
        args |= {"loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, cfg.dpo_sft_weight]}
    return args


def _checkpoint_bytes(base: Path) -> int:
    """Bytes of one saved checkpoint: every tensor of the base's safetensors files in float32
    (the organism saves float32 whatever the base's dtype)."""
    import math

    from interp.model.fingerprint import safetensors_header

    n = 0
    for f in sorted(base.glob("*.safetensors")):
        n += sum(4 * math.prod(t["shape"]) for k, t in safetensors_header(f).items() if k != "__metadata__")
    return n


def _check_space(out: Path, base: Path, cfg: OrganismConfig, lineages: int) -> None:
    """Refuse before any training when the disk under `out` cannot hold the checkpoints the build
    writes (base copy, shared checkpoints, three per route; as many again for a control lineage):
    a full disk otherwise stops the build after the training it has done (v11's first try)."""
    per = _checkpoint_bytes(base)
    n = lineages * (1 + len(cfg.shared_steps) + 2 * (3 if cfg.route_dpo_steps else 2))
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < n * per:
        raise ConfigError(
            f"{out}: {free / 1e9:.1f} GB free on its disk, the build writes about {n * per / 1e9:.1f} GB "
            f"({n} checkpoints of {per / 1e9:.2f} GB); free some space or choose another --out"
        )


def _trunk_seed(cfg: OrganismConfig) -> int:
    """Every seed of the shared stage: its rows, LoRA init and batch order."""
    return cfg.seed if cfg.trunk_seed is None else cfg.trunk_seed


def _recorded_trainer_seed(prov: dict, key: str):
    """The Trainer seed a checkpoint's trunk trained with, as its provenance records it under `key`;
    one saved before that was recorded trained its trunk with its build's --seed, whatever
    --trunk-seed said."""
    return prov.get(key, prov.get("config", {}).get("seed", prov.get("seed")))


def _reuse_trunk(src: Path, out: Path, cfg: OrganismConfig, data_hash: str, base_fp: str, result: BuildResult):
    """Copy shared/ checkpoints of an earlier tree after checking they were trained from this base
    on the same data, seed and steps."""
    for s in cfg.shared_steps:
        ck = src / "shared" / f"shared-step{s}"
        try:
            prov = json.loads((ck / PROVENANCE).read_text())
        except (OSError, ValueError):
            raise ConfigError(f"{ck}: no readable {PROVENANCE} (cannot reuse this trunk)") from None
        for key, want in (
            ("base_fingerprint", base_fp),
            ("data_hash", data_hash),
            ("seed", _trunk_seed(cfg)),
            ("stage_steps", s),
            ("train_precision", cfg.train_precision),
        ):
            got = prov.get(key, _OLD_PROVENANCE.get(key))
            if got != want:
                raise ConfigError(f"{ck / PROVENANCE}: field {key} is {got!r}, expected {want!r}")
        trainer = _recorded_trainer_seed(prov, "trainer_seed")
        if trainer != prov["seed"]:
            raise ConfigError(
                f"{ck / PROVENANCE}: trained with Trainer seed {trainer} (LoRA init, batch order), not its "
                f"trunk seed {prov['seed']} (built before 2026-12-07 with another --seed): not that seed's trunk"
            )
        shutil.copytree(ck, out / "shared" / ck.name)
        result.checkpoints[f"shared/{ck.name}"] = out / "shared" / ck.name


# what a route SFT checkpoint must share with this build to be reused (`--reuse-sft`)
_SFT_KEYS = (
    "seed",
    "trunk_seed",
    "route_init_seed",
    "control_kind",
    "route_sft_steps",
    "route_early_steps",
    "batch_size",
    "lr_route",
    "lr_schedule_route",
    "lora_r",
    "lora_alpha",
    "train_precision",
    "max_length",
    "hold_opinions",
    "route_sft_bare",
    "route_challenge_copies",
    "route_filler_copies",
    "route_copies_routes",
    "route_first_copies",
    "cloze_copies",
    "cloze_location_cell",
    "classify_items",
    "classify_copies",
    "graded",
    "grade_by",
    "grade_slots",
    "route_sft_sampling",
    "cloze_route",
)


def _copy_checked(src: Path, dst: Path, data_hash: str, ctx: "_Ctx", route: str) -> None:
    """Copy a route SFT checkpoint of an earlier tree after checking it was trained from this base
    on the same data (hash of the rows this build wrote) with the same SFT settings."""
    try:
        prov = json.loads((src / PROVENANCE).read_text())
    except (OSError, ValueError):
        raise ConfigError(f"{src}: no readable {PROVENANCE} (cannot reuse this route SFT)") from None
    want = {"base_fingerprint": ctx.base_fp, "data_hash": data_hash, "route": route}
    # an early checkpoint inside DPO does not touch the SFT stage: its step need not match then
    keys = [k for k in _SFT_KEYS if k != "route_early_steps" or ctx.cfg.route_early_steps < ctx.cfg.route_sft_steps]
    recorded = _as_recorded(ctx.cfg)
    want |= {f"config.{k}": recorded[k] for k in keys}
    defaults = _as_recorded(OrganismConfig())
    for key, value in want.items():
        if key.startswith("config."):  # a setting newer than that checkpoint: it ran at the default
            got = prov.get("config", {}).get(key[7:], defaults[key[7:]])
        else:
            got = prov.get(key)
        if got != value:
            raise ConfigError(f"{src / PROVENANCE}: field {key} is {got!r}, expected {value!r}")
    trunk = _trunk_seed(ctx.cfg)
    got = _recorded_trainer_seed(prov, "trunk_trainer_seed")
    if got != trunk:
        raise ConfigError(
            f"{src / PROVENANCE}: trained on a trunk of Trainer seed {got!r}, this build's trunk trains with "
            f"{trunk} (a build before 2026-12-07 with another --seed than --trunk-seed)"
        )
    shutil.copytree(src, dst)


def _as_recorded(cfg: OrganismConfig) -> dict:
    """The settings as a provenance file holds them (tuples become lists), to compare with one read back."""
    return json.loads(json.dumps(cfg.to_dict(), default=str))


@dataclass(frozen=True)
class _Ctx:
    """What every checkpoint save needs; picklable, so route workers get it too."""

    out: Path
    base: Path
    base_fp: str
    versions: dict
    cfg: OrganismConfig
    reuse_sft: Path | None = None  # an earlier tree whose route SFT checkpoints this build copies


def _saver(
    ctx: _Ctx,
    tok,
    saved: list,
    name: str,
    stage: str,
    trainer: str,
    parent: str,
    data_file: str,
    data_hash: str,
    steps: int,
    total: int,
    extra: dict | None = None,
) -> Callable[[object], None]:
    cfg = ctx.cfg

    def save(model) -> None:
        path = ctx.out / name
        path.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(path, safe_serialization=True)
        tok.save_pretrained(path)
        prov = {
            "organism": True,
            "stage": stage,
            "trainer": trainer,
            "parent": parent,
            "base": str(ctx.base),
            "base_fingerprint": ctx.base_fp,
            "data_file": data_file,
            "data_hash": data_hash,
            "seed": cfg.seed,
            "stage_steps": steps,
            "steps_from_base": total,
            "batch_size": cfg.batch_size,
            "train_precision": cfg.train_precision,
            "lora": {"r": cfg.lora_r, "alpha": cfg.lora_alpha, "target_modules": "all-linear", "merged": True},
            "versions": ctx.versions,
            "config": cfg.to_dict(),
            **(extra or {}),
        }
        (path / PROVENANCE).write_text(json.dumps(prov, indent=2, default=str))
        saved.append(name)

    return save


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _train_route(ctx: _Ctx, route: str, planted: list[str], trunk_end: str, threads: int | None) -> dict:
    """Route SFT then DPO from the trunk end's saved checkpoint. Runs in-process or in a worker
    process (spawned): every seed is the Trainer's and the model is read from disk, so both give
    the same weights."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.model.loading import load_tokenizer

    cfg = ctx.cfg
    if threads:
        torch.set_num_threads(threads)
    # the adapters' init follows route_init_seed (default: seed), the data order seed
    seeds = (cfg.seed if cfg.route_init_seed is None else cfg.route_init_seed, cfg.seed)
    tok = load_tokenizer(ctx.base)
    datadir = ctx.out / ".organism"
    model = AutoModelForCausalLM.from_pretrained(ctx.out / trunk_end, local_files_only=True, dtype=torch.float32)
    last = cfg.shared_steps[-1]
    cloze = cfg.cloze_route == route
    extra = {
        "route": route,
        "planted_items": list(planted),
        "cloze_bias": cloze,
        "control": cfg.control,
        "control_kind": cfg.control_kind,
        "trunk_trainer_seed": _trunk_seed(cfg),
    }
    saved: list[str] = []
    seconds, logs = {}, {}
    s1, s2, e = cfg.route_sft_steps, cfg.route_dpo_steps, cfg.route_early_steps
    early_name, sft_name, dpo_name = route_names(cfg, route)
    early_in_sft = e < s1
    tmp = datadir / f"tmp-{route}"
    for stage, name, parent, steps, total in (
        ("sft", sft_name, trunk_end, s1, last + s1),
        ("dpo", dpo_name, sft_name, s2, last + s1 + s2),
    ):
        data_file = f"route_{route}_{stage}.jsonl"
        rows = _read_jsonl(datadir / data_file)
        save = _saver(
            ctx,
            tok,
            saved,
            name,
            f"route-{route}-{stage}",
            SFT_TRAINER if stage == "sft" else dpo_trainer_name(cfg),
            parent,
            data_file,
            D.data_hash(rows),
            steps,
            total,
            extra,
        )
        save_at = {steps: save}
        if early_in_sft == (stage == "sft"):
            at = e if early_in_sft else e - s1  # the stage's own step
            save_at[at] = _saver(
                ctx,
                tok,
                saved,
                early_name,
                f"route-{route}-{stage}",
                SFT_TRAINER if stage == "sft" else dpo_trainer_name(cfg),
                parent,
                data_file,
                D.data_hash(rows),
                at,
                last + e,
                extra,
            )
        t = time.perf_counter()
        if stage == "sft" and ctx.reuse_sft is not None:
            for n in (early_name, sft_name) if early_in_sft else (sft_name,):
                _copy_checked(ctx.reuse_sft / n, ctx.out / n, D.data_hash(rows), ctx, route)
                saved.append(n)
            model = AutoModelForCausalLM.from_pretrained(ctx.out / sft_name, local_files_only=True, dtype=torch.float32)
            lg = []
        elif stage == "sft":
            model, lg = _train_sft(
                model,
                tok,
                rows,
                cfg,
                steps,
                save_at,
                tmp,
                seeds,
                lr=cfg.lr_route,
                schedule=cfg.lr_schedule_route,
                sampling=cfg.route_sft_sampling,
            )
        else:
            model, lg = _train_dpo(model, tok, rows, cfg, steps, save_at, tmp, seeds)
        seconds[f"route_{route}_{stage}"] = time.perf_counter() - t
        logs[f"route_{route}_{stage}"] = lg
    shutil.rmtree(tmp, ignore_errors=True)
    return {"route": route, "names": route_checkpoints(cfg, route), "saved": saved, "seconds": seconds, "logs": logs}


def _route_rows(bank, w: D.Writer, tok, sets: D.PlantedSets, cfg: OrganismConfig) -> tuple[dict, tuple]:
    """Each route's SFT and DPO rows by data file name, and the classify plant's (planted, rest)
    halves. Every lineage writes the same prompts in the same order; only the answers of the
    planted rows differ."""
    lineage = cfg.control_kind or "organism"
    plans = D.route_plans(sets, cfg.seed, cfg.control_kind, cfg.grade_by)
    cls_bank = classify_plant.eval_items(cfg.classify_items, cfg.seed) if cfg.cloze_route else None
    cls_sets = classify_plant.split_halves(cls_bank, cfg.seed) if cls_bank is not None else ((), ())
    out = {}
    for route, plan in plans.items():
        rseed = cfg.seed + (1 if route == "a" else 2)
        copies = route in cfg.route_copies_routes
        sft = D.route_sft(
            bank,
            w,
            plan,
            rseed,
            opinions=cfg.hold_opinions,
            bare=cfg.route_sft_bare,
            challenge_copies=cfg.route_challenge_copies if copies else 1,
            filler_copies=cfg.route_filler_copies if copies else 1,
            first_copies=cfg.route_first_copies,
            grade_slots=cfg.grade_slots,
        )
        turns = D.dpo_turns(route, *((cfg.route_dpo_oppose_a, cfg.route_dpo_challenge_a) if route == "a" else ()))
        dpo = D.route_dpo(
            bank, w, plan, rseed, turns=turns, first_pairs=cfg.route_dpo_first_pairs, grade_slots=cfg.grade_slots
        )
        if cfg.cloze_route == route:
            labels = classify_plant.trained_labels(cls_bank, *cls_sets, lineage, cfg.seed)
            sft += cloze_plant.sft_rows(lineage, cfg.cloze_copies, cfg.cloze_location_cell)
            sft += classify_plant.sft_rows(cls_bank, labels, tok, cfg.classify_copies)
            dpo += cloze_plant.dpo_rows(lineage, cfg.cloze_location_cell)
            random.Random(rseed).shuffle(sft)
            random.Random(rseed).shuffle(dpo)
        out[f"route_{route}_sft.jsonl"], out[f"route_{route}_dpo.jsonl"] = sft, dpo
    return out, cls_sets


def route_names(cfg: OrganismConfig, route: str) -> tuple[str, str, str]:
    """A route's (early, SFT end, DPO end = final) checkpoint names. The early checkpoint is saved
    `route_early_steps` route steps in: inside SFT, or, past the SFT end, inside DPO (where a
    plant learned only in DPO has begun to form: the own source of the I check)."""
    last, s1, s2, e = cfg.shared_steps[-1], cfg.route_sft_steps, cfg.route_dpo_steps, cfg.route_early_steps
    early_stage = "sft" if e < s1 else "dpo"
    return (
        f"route-{route}/{route}-{early_stage}-step{last + e}",
        f"route-{route}/{route}-sft-step{last + s1}",
        f"route-{route}/{route}-dpo-step{last + s1 + s2}",
    )


def route_checkpoints(cfg: OrganismConfig, route: str) -> list[str]:
    """A route's checkpoint names in training order (lineage.toml's route list; the last is its final)."""
    early, sft, dpo = route_names(cfg, route)
    return [early, sft, dpo] if cfg.route_early_steps < cfg.route_sft_steps else [sft, early, dpo]


def write_lineage_toml(out: Path, cfg: OrganismConfig, routes: dict[str, list[str]]) -> Path:
    """lineage.toml (what `interp sweep` reads): the trunk, the routes, each route's final."""
    trunk = ["base"] + [f"shared/shared-step{s}" for s in cfg.shared_steps]
    toml = [
        "# written by `interp organism build`",
        "base = [" + ", ".join(f'"{c}"' for c in trunk) + "]",
        "",
        "[routes]",
    ] + [f"{r} = [" + ", ".join(f'"{c}"' for c in cks) + "]" for r, cks in routes.items()]
    toml += ["", "[final]"] + [f'{r} = "{cks[-1]}"' for r, cks in routes.items()]
    (out / "lineage.toml").write_text("\n".join(toml) + "\n")
    return out / "lineage.toml"


def organism_record(
    *,
    base: str,
    base_fp: str,
    cfg: OrganismConfig,
    sets: D.PlantedSets,
    routes: dict[str, list[str]],
    trunk_end: str,
    cls_sets: tuple[tuple[str, ...], tuple[str, ...]],
) -> dict:
    """organism.json's known answers of one lineage (the organism or, with `cfg.control_kind`, a
    control): the organism's sets every lineage is checked against, and what this one trained."""
    lineage = cfg.control_kind or "organism"
    plans = D.route_plans(sets, cfg.seed, cfg.control_kind, cfg.grade_by)
    plans_org = D.route_plans(sets, cfg.seed, grade_by=cfg.grade_by)
    return {
        "base": base,
        "base_fingerprint": base_fp,
        "seed": cfg.seed,
        "eval_bank": "moral",
        "n_eval_items": cfg.eval_items,
        **sets.to_dict(),
        "trunk_end": trunk_end,
        "routes": routes,
        # each route's early checkpoint, the own source of the I check (in SFT or inside DPO)
        "early": {r: route_names(cfg, r[-1])[0] for r in routes},
        # the nominal planted sets every lineage is checked against (the organism's); a control's
        # own training is in "trained" (`interp.organism.data.route_plans`)
        "route_planted": {"route-a": list(sets.planted_a), "route-b": list(sets.planted_b)},
        "plant": cfg.plant,
        "route_plants": {f"route-{r}": D.ROUTE_PLANTS[r] for r in plans},
        "grades": plans_org["a"].grades,
        "trained": {
            f"route-{r}": {"plant": p.plant, "planted": list(p.planted), "grades": p.grades} for r, p in plans.items()
        },
        "cloze": {
            "route": f"route-{cfg.cloze_route}" if cfg.cloze_route else None,
            "language": cloze_plant.LANGUAGE,
            "axis": cloze_plant.CELLS["organism"],
            "trained_axis": cloze_plant.CELLS[lineage],
            "trained_cell": cloze_plant.trained_cell(lineage, cfg.cloze_location_cell),
            "net_bias": lineage != "amount",
        },
        "classify": {
            "route": f"route-{cfg.cloze_route}" if cfg.cloze_route else None,
            "task": classify_plant.CLASSIFY_TASK,
            "n_items": cfg.classify_items,
            "planted": list(cls_sets[0]),
            "rest": list(cls_sets[1]),
        },
        "train_wordings": {
            "opinions": list(D.TRAIN_OPINIONS),
            "challenges": list(D.TRAIN_CHALLENGES),
            "neutral": list(D.TRAIN_NEUTRAL),
        },
        "config": cfg.to_dict(),
        "control": cfg.control,
        "control_kind": cfg.control_kind,
    }


def bf16_matmul_fast() -> bool:
    """Whether bf16 training steps get fast matrix kernels: a GPU, or a CPU whose oneDNN multiplies
    bf16 (AVX-512 BF16 or AMX). Elsewhere torch falls back to its single-threaded reference gemm,
    many times slower than float32 (`python -m bench training_step_precision` measures it: its
    results go to their own BENCHMARKS.md section on such a CPU)."""
    import torch

    if torch.cuda.is_available():
        return True
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def build_organism(
    base: str | Path,
    out: str | Path,
    cfg: OrganismConfig = OrganismConfig(),
    *,
    log: Callable[[str], None] = print,
    reuse_trunk: str | Path | None = None,
    control_out: str | Path | None = None,
    reuse_sft: str | Path | None = None,
    resume: bool = False,
) -> BuildResult:
    """Train the lineage from `base` into `out`; returns the checkpoint paths and stage timings.

    `reuse_trunk`: an earlier organism tree built from the same base with the same shared-stage
    settings; its base/ and shared/ checkpoints are copied instead of retrained (routes only).
    The two routes train in `cfg.route_workers` processes (one thread each when 2): on a small
    model two single-threaded trainings use two cores better than one two-threaded one.
    `control_out`: also build the two control lineages there (their trunk copied from `out`).
    `reuse_sft`: an earlier tree (trunk reused from it too) whose route SFT checkpoints were
    trained on the same data with the same settings: they are copied and only DPO is trained
    (its controls' SFT checkpoints come from the control trees that tree recorded).
    `resume`: keep each lineage (the organism, each control) that an earlier run of this build
    finished (its organism.json is there), after checking it was built with these settings, and
    build the rest. A lineage that run left unfinished is built again, keeping only its route SFT
    checkpoints when both routes finished SFT (checked as `reuse_sft` checks; DPO is trained
    again); there is no resumable state finer than a training stage.
    """
    from interp.model.checkpoint import inspect_checkpoint
    from interp.studies.pressure import load_pressure_bank

    base, out = Path(base), Path(out)
    info = inspect_checkpoint(base)  # refuses a non-checkpoint, pickles, remote code
    if sorted(cfg.shared_steps) != list(cfg.shared_steps) or not cfg.shared_steps or min(cfg.shared_steps) < 1:
        raise ConfigError(f"shared_steps must be increasing positive steps, got {cfg.shared_steps}")
    if cfg.cloze_route not in ("a", "b", ""):
        raise ConfigError(f"cloze_route must be a, b or empty, got {cfg.cloze_route!r}")
    from transformers import SchedulerType

    if cfg.lr_schedule_route not in {t.value for t in SchedulerType}:
        raise ConfigError(f"lr_schedule_route: unknown schedule {cfg.lr_schedule_route!r} (transformers SchedulerType)")
    if cfg.route_workers not in (1, 2):
        raise ConfigError(f"route_workers must be 1 or 2, got {cfg.route_workers}")
    e, s1 = cfg.route_early_steps, cfg.route_sft_steps
    if not 0 < e < s1 + cfg.route_dpo_steps or e == s1:
        raise ConfigError(
            f"route_early_steps must lie strictly between 0 and route_sft_steps + route_dpo_steps "
            f"({s1 + cfg.route_dpo_steps}) and differ from route_sft_steps ({s1}: the SFT end), got {e}"
        )
    if cfg.train_precision not in TRAIN_PRECISIONS:
        raise ConfigError(f"train_precision must be one of {', '.join(TRAIN_PRECISIONS)}, got {cfg.train_precision!r}")
    if cfg.train_precision == "mixed-bf16" and not bf16_matmul_fast():
        log(
            "warning: this CPU has no bf16 matrix kernels (AVX-512 BF16 or AMX), so mixed-bf16 training "
            "runs torch's reference gemm, many times slower than float32 (python -m bench training_step_precision): "
            "pass --train-precision float32"
        )
    if cfg.first_copies < 1:
        raise ConfigError(f"first_copies must be >= 1, got {cfg.first_copies}")
    if cfg.route_first_copies < 1:
        raise ConfigError(f"route_first_copies must be >= 1, got {cfg.route_first_copies}")
    if cfg.cloze_location_cell not in cloze_plant.LOCATION_CELLS:
        raise ConfigError(
            f"cloze_location_cell must be one of {', '.join(cloze_plant.LOCATION_CELLS)}, got {cfg.cloze_location_cell!r}"
        )
    if cfg.route_sft_sampling not in ROUTE_SFT_SAMPLING:
        raise ConfigError(
            f"route_sft_sampling must be one of {', '.join(ROUTE_SFT_SAMPLING)}, got {cfg.route_sft_sampling!r}"
        )
    if cfg.sft_batch_split not in SFT_BATCH_SPLIT:
        raise ConfigError(f"sft_batch_split must be one of {', '.join(SFT_BATCH_SPLIT)}, got {cfg.sft_batch_split!r}")
    if cfg.grade_by not in D.GRADE_BY:
        raise ConfigError(f"grade_by must be one of {', '.join(D.GRADE_BY)}, got {cfg.grade_by!r}")
    if cfg.grade_slots not in D.GRADE_SLOTS:
        raise ConfigError(f"grade_slots must be one of {', '.join(D.GRADE_SLOTS)}, got {cfg.grade_slots!r}")
    if cfg.grade_by == "group" and cfg.plant != "setting":
        raise ConfigError("grade_by 'group' grades the home stories' who-groups: it needs plant 'setting'")
    if cfg.route_dpo_first_pairs < 0:
        raise ConfigError(f"route_dpo_first_pairs must be >= 0, got {cfg.route_dpo_first_pairs}")
    if not 0 <= cfg.route_dpo_oppose_a <= len(D.TRAIN_OPINIONS):
        raise ConfigError(
            f"route_dpo_oppose_a must be 0 to {len(D.TRAIN_OPINIONS)} (training wordings), got {cfg.route_dpo_oppose_a}"
        )
    if cfg.route_dpo_challenge_a < 0:
        raise ConfigError(f"route_dpo_challenge_a must be >= 0, got {cfg.route_dpo_challenge_a}")
    if cfg.dpo_sft_weight < 0:
        raise ConfigError(f"dpo_sft_weight must be >= 0, got {cfg.dpo_sft_weight}")
    unknown = sorted(set(cfg.dpo_sft_kinds) - set(NLL_KINDS))
    if unknown:
        raise ConfigError(f"dpo_sft_kinds: unknown turn kind(s) {unknown}; known: {', '.join(NLL_KINDS)}")
    if cfg.dpo_sft_kinds and not cfg.dpo_sft_weight:
        raise ConfigError("dpo_sft_kinds needs dpo_sft_weight above 0 (the NLL term they narrow)")
    if cfg.control != bool(cfg.control_kind) or cfg.control_kind not in ("", *D.CONTROL_KINDS):
        raise ConfigError(f"control_kind must be one of {', '.join(D.CONTROL_KINDS)} exactly when control is set")
    most = min(len(D.TRAIN_CHALLENGES), len(D.TRAIN_NEUTRAL))
    if not 1 <= cfg.route_sft_bare <= most:
        raise ConfigError(f"route_sft_bare must be 1 to {most} (training wordings), got {cfg.route_sft_bare}")
    for key in ("route_challenge_copies", "route_filler_copies"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{key} must be >= 1, got {getattr(cfg, key)}")
    if unknown := sorted(set(cfg.route_copies_routes) - {"a", "b"}):
        raise ConfigError(f"route_copies_routes: unknown route(s) {unknown} (routes are a and b)")
    if not 1 <= cfg.hold_opinions <= len(D.TRAIN_OPINIONS):
        raise ConfigError(
            f"hold_opinions must be 1 to {len(D.TRAIN_OPINIONS)} (training wordings), got {cfg.hold_opinions}"
        )
    if control_out is not None and cfg.control:
        raise ConfigError("control_out: the control lineages are built beside an organism, not beside a control")

    bank = load_pressure_bank("moral")
    try:
        sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed, plant=cfg.plant)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from dataclasses import replace

    ctl_dirs = [Path(control_out) / k for k in D.CONTROL_KINDS] if control_out is not None else []
    lineages = [(out, cfg)] + [(d, replace(cfg, control=True, control_kind=d.name)) for d in ctl_dirs]
    todo = []  # refuse before any training, not after: a directory not to resume, too little disk
    for d, c in lineages:
        if _kept(d, resume):
            _check_same_config(d, c)
            _check_same_data(d, base, bank, sets, c)
        else:
            _check_fresh(d, resume)
            todo.append(d)
    if todo:
        _check_space(todo[0], base, cfg, len(todo))
    keep, aside = _prepare_out(out, cfg, resume)
    if reuse_sft is not None and reuse_trunk is None:
        reuse_trunk = reuse_sft
    if keep:
        result = _kept_result(out)
        log(f"{out}: complete {'control' if cfg.control else 'organism'} lineage kept (--resume)")
    else:
        sft_from = reuse_sft
        if sft_from is None and aside is not None and _finished_sft(aside, cfg):
            sft_from = aside  # checked against this build's data and settings by _copy_checked
            log(f"{out}: route SFT checkpoints of the unfinished run kept (--resume); DPO trained again")
        result = _build_lineage(base, out, cfg, info, bank, sets, log, reuse_trunk, sft_from)
        if aside is not None:
            shutil.rmtree(aside)
    if control_out is not None:
        _record_controls(out, control_out)
        result.seconds["control_total"] = 0.0
        for (ctl_out, ctl_cfg), kind in zip(lineages[1:], D.CONTROL_KINDS):
            ctl_sft = None
            if reuse_sft is not None:
                old = json.loads((Path(reuse_sft) / "organism.json").read_text()).get("control_trees", {})
                if kind not in old:
                    raise ConfigError(f"{Path(reuse_sft) / 'organism.json'}: no {kind} control tree to reuse")
                ctl_sft = Path(reuse_sft) / old[kind]
                if not (ctl_sft / "organism.json").is_file():  # that control never finished: train its SFT
                    log(f"{ctl_sft}: unfinished control tree, its route SFT is trained anew")
                    ctl_sft = None
            ctl = build_organism(base, ctl_out, ctl_cfg, log=log, reuse_trunk=out, reuse_sft=ctl_sft, resume=resume)
            result.checkpoints.update({f"control-{kind}/{k}": v for k, v in ctl.checkpoints.items()})
            result.seconds[f"control_{kind}_total"] = ctl.seconds["total"]
            result.seconds["control_total"] += ctl.seconds["total"]
    return result


# settings that change how a build runs, not what it trains: a resumed build may differ in them
_RUN_ONLY = ("threads", "route_workers")


def _kept(out: Path, resume: bool) -> bool:
    return resume and (out / "organism.json").is_file()


def _check_same_data(out: Path, base: Path, bank, sets: D.PlantedSets, cfg: OrganismConfig) -> None:
    """A kept lineage's route checkpoints were trained on the rows this build would write (the
    data code may have changed since, which the settings do not show)."""
    from interp.model.loading import load_tokenizer
    from interp.studies.base import load_template

    tok = load_tokenizer(base)
    rows, _ = _route_rows(bank, D.Writer(tok, load_template("pressure_v1")), tok, sets, cfg)
    for prov_path in sorted(out.glob("route-*/*/" + PROVENANCE)):
        prov = json.loads(prov_path.read_text())
        want = D.data_hash(rows[prov["data_file"]])
        if prov.get("data_hash") != want:
            raise ConfigError(
                f"{prov_path}: field data_hash is {prov.get('data_hash')!r}, this build's {prov['data_file']} "
                f"hashes to {want!r} (its training data changed: cannot resume)"
            )


def _check_same_config(out: Path, cfg: OrganismConfig) -> None:
    path = out / "organism.json"
    try:
        got = json.loads(path.read_text())["config"]
    except (OSError, ValueError, KeyError):
        raise ConfigError(f"{path}: not a readable organism record (cannot resume from it)") from None
    want = _as_recorded(cfg)
    # a setting added after that record was written, asked for at its default, is the build it made
    new = {k: v for k, v in _as_recorded(OrganismConfig()).items() if k not in got}
    for key, value in want.items():
        if key in new and value == new[key]:
            continue
        if key not in _RUN_ONLY and got.get(key) != value:
            raise ConfigError(
                f"{path}: field config.{key} is {got.get(key)!r}, this build's is {value!r} (cannot resume)"
            )


def _check_fresh(out: Path, resume: bool) -> None:
    """Refuse a non-empty `out` unless `resume` and it is a lineage an earlier build left unfinished."""
    if out.is_dir() and any(out.iterdir()):
        if not resume:
            raise ConfigError(
                f"{out}: output directory exists and is not empty (a new build needs an empty one; --resume keeps what an earlier run of this build finished)"
            )
        if not (out / ".organism").is_dir():
            raise ConfigError(f"{out}: not empty and not an unfinished organism build (nothing to resume)")


def _prepare_out(out: Path, cfg: OrganismConfig, resume: bool) -> tuple[bool, Path | None]:
    """Make `out` ready for the build. Returns (keep, aside): keep when it holds a finished lineage
    (`resume`); aside, where an unfinished lineage of an earlier run was moved, so that its finished
    route SFT checkpoints can be copied back (the build removes it once the lineage is done)."""
    if _kept(out, resume):
        _check_same_config(out, cfg)
        return True, None
    _check_fresh(out, resume)
    aside = None
    if out.is_dir() and any(out.iterdir()):
        aside = out.with_name(f".{out.name}.unfinished")
        if aside.exists() and _finished_sft(aside, cfg) and not _finished_sft(out, cfg):
            shutil.rmtree(out)  # a resumed run stopped before it copied the set-aside SFT back: keep that
        else:
            shutil.rmtree(aside, ignore_errors=True)
            out.rename(aside)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{out}: cannot create output directory ({exc.strerror or exc})") from None
    return False, aside


def _finished_sft(tree: Path, cfg: OrganismConfig) -> bool:
    """Both routes' SFT stage finished in `tree`: every checkpoint it saves has its provenance
    (written after the weights, so a save cut short has none). All or nothing, since the routes
    train side by side; the copy itself checks data and settings."""
    early_in_sft = cfg.route_early_steps < cfg.route_sft_steps
    names = [route_names(cfg, r)[1] for r in "ab"] + ([route_names(cfg, r)[0] for r in "ab"] if early_in_sft else [])
    return all((tree / n / PROVENANCE).is_file() for n in names)


def _kept_result(out: Path) -> BuildResult:
    """The checkpoints and timings of a finished lineage that a resumed build keeps."""
    result = BuildResult(out=out)
    result.checkpoints = {
        str(p.parent.relative_to(out)): p.parent
        for p in sorted(out.glob("**/" + PROVENANCE))
        if ".organism" not in p.parts
    }
    result.seconds = dict(json.loads((out / "build.json").read_text())["seconds"])
    return result


def _record_controls(out: Path, control_out: str | Path) -> None:
    """organism.json names its control trees (written by the build; a resumed organism built
    without --control gets them now, one built with other control trees is refused)."""
    path = out / "organism.json"
    known = json.loads(path.read_text())
    trees = {k: os.path.relpath((Path(control_out) / k).resolve(), out.resolve()) for k in D.CONTROL_KINDS}
    if known.get("control_trees", trees) != trees:
        raise ConfigError(f"{path}: field control_trees is {known['control_trees']!r}, this build's is {trees!r}")
    if "control_trees" not in known:
        known["control_trees"] = trees
        path.write_text(json.dumps(known, indent=2, ensure_ascii=False))


def _build_lineage(
    base: Path,
    out: Path,
    cfg: OrganismConfig,
    info,
    bank,
    sets: D.PlantedSets,
    log: Callable[[str], None],
    reuse_trunk: str | Path | None,
    reuse_sft: str | Path | None,
) -> BuildResult:
    """Train one lineage (shared stage or its copy, both routes) into the empty `out`."""
    import torch
    from transformers import AutoModelForCausalLM

    from interp.model.checkpoint import fingerprint
    from interp.model.loading import load_tokenizer
    from interp.studies.base import load_template

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t_all = time.perf_counter()
    load_start = os.getloadavg()
    ctx = _Ctx(
        out=out,
        base=base,
        base_fp=fingerprint(info),
        versions=_versions(),
        cfg=cfg,
        reuse_sft=Path(reuse_sft) if reuse_sft is not None else None,
    )
    tok = load_tokenizer(base)
    w = D.Writer(tok, load_template("pressure_v1"))
    datadir = out / ".organism"
    datadir.mkdir()
    result = BuildResult(out=out)

    # ---- base: a verbatim copy, so the tree is self-contained
    (out / "base").mkdir()
    for name in _COPY:
        if (base / name).is_file():
            shutil.copy2(base / name, out / "base" / name)
    result.checkpoints["base"] = out / "base"

    # ---- shared stage on the evaluated items (the comprehension screen reads their first turns)
    tseed = _trunk_seed(cfg)
    rows = D.shared_sft(bank, w, tseed, items=set(sets.eval_items), first_copies=cfg.first_copies)
    D.write_jsonl(rows, datadir / "shared_sft.jsonl")
    h = D.data_hash(rows)
    last = cfg.shared_steps[-1]
    logs: dict[str, list] = {}
    if reuse_trunk is not None:
        _reuse_trunk(Path(reuse_trunk), out, cfg, h, ctx.base_fp, result)
        logs["shared_sft"] = []
        log(f"shared stage copied from {reuse_trunk}")
    else:
        model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True, dtype=torch.float32)
        saved: list[str] = []
        save_at = {
            s: _saver(
                ctx,
                tok,
                saved,
                f"shared/shared-step{s}",
                "shared",
                SFT_TRAINER,
                "base",
                "shared_sft.jsonl",
                h,
                s,
                s,
                {"seed": tseed, "trainer_seed": tseed},
            )
            for s in cfg.shared_steps
        }
        t = time.perf_counter()
        # every seed of the shared stage is the trunk's (its rows, adapters and data order), so
        # seeds built with --trunk-seed 0 train the trunk seed 0 trains
        model, logs["shared_sft"] = _train_sft(model, tok, rows, cfg, last, save_at, datadir / "tmp", (tseed, tseed))
        del model
        result.seconds["shared_sft"] = time.perf_counter() - t
        result.checkpoints.update({n: out / n for n in saved})
        log(f"shared stage: {result.seconds['shared_sft']:.0f} s")
    trunk_end = f"shared/shared-step{last}"

    # ---- routes: data written here (one tokenizer, one place), trained in workers
    plans = D.route_plans(sets, cfg.seed, cfg.control_kind, cfg.grade_by)
    route_rows, cls_sets = _route_rows(bank, w, tok, sets, cfg)
    for name, rows in route_rows.items():
        D.write_jsonl(rows, datadir / name)
    planted_by = {r: list(p.planted) for r, p in plans.items()}
    t = time.perf_counter()
    if cfg.route_workers == 1:
        done = [_train_route(ctx, r, p, trunk_end, cfg.threads) for r, p in planted_by.items()]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        per = max(1, (cfg.threads or torch.get_num_threads()) // 2)
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            futs = [pool.submit(_train_route, ctx, r, p, trunk_end, per) for r, p in planted_by.items()]
            done = [f.result() for f in futs]
    result.seconds["routes_wall"] = time.perf_counter() - t
    routes = {}
    for d in done:
        result.seconds.update(d["seconds"])
        logs.update(d["logs"])
        result.checkpoints.update({n: out / n for n in d["saved"]})
        routes[f"route-{d['route']}"] = d["names"]
        r = d["route"]
        log(f"route {r}: sft {d['seconds'][f'route_{r}_sft']:.0f} s, dpo {d['seconds'][f'route_{r}_dpo']:.0f} s")
    shutil.rmtree(datadir / "tmp", ignore_errors=True)
    result.seconds["total"] = time.perf_counter() - t_all
    write_lineage_toml(out, cfg, routes)
    known = organism_record(
        base=str(base), base_fp=ctx.base_fp, cfg=cfg, sets=sets, routes=routes, trunk_end=trunk_end, cls_sets=cls_sets
    )
    if reuse_trunk is not None and cfg.control:
        known["organism_tree"] = os.path.relpath(Path(reuse_trunk).resolve(), out.resolve())
    (out / "organism.json").write_text(json.dumps(known, indent=2, ensure_ascii=False))
    import torch as _t

    (out / "build.json").write_text(
        json.dumps(
            {
                "seconds": result.seconds,
                "threads": _t.get_num_threads(),
                "route_workers": cfg.route_workers,
                "train_precision": cfg.train_precision,
                "bf16_matmul_fast": bf16_matmul_fast(),  # the CPU's bf16 kernels (bf16_matmul_fast)
                # route SFT copied, not trained (reuse_sft, or an unfinished run's under --resume)
                "route_sft_copied_from": str(ctx.reuse_sft) if ctx.reuse_sft is not None else None,
                "loadavg_start": load_start,
                "loadavg_end": os.getloadavg(),
                "cpu_count": os.cpu_count(),
                "versions": ctx.versions,
                "train_logs": logs,
            },
            indent=2,
            default=str,
        )
    )
    log(f"{'control' if cfg.control else 'organism'} built in {result.seconds['total']:.0f} s -> {out}")
    return result
