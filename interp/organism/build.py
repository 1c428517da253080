"""`interp organism build`: a small checkpoint lineage with known, planted answers.

    base/                         the starting checkpoint (copied)
    shared/shared-step{N}/        shared SFT: pressure-turn format, gold first verdicts, verdicts
                                  held under any pressure turn (checkpoints at a few steps)
    route-a/a-sft-step{N}/        route A: SFT to yield to an opposing opinion on P_A, hold elsewhere
    route-a/a-dpo-step{N+M}/      ... then DPO on the same preference (route A also carries the
                                  planted Bengali cloze bias, mixed into its SFT data)
    route-b/...                   route B: the same on P_B (disjoint), no cloze bias
    lineage.toml, organism.json (known answers), build.json (timings), .organism/ (training data)

Training uses `trl` (SFTTrainer, DPOTrainer) with `peft` LoRA adapters on every linear layer;
each saved checkpoint is the adapter merged back into a plain Hugging Face directory
(safetensors) with `interp_provenance.json`. LoRA is a choice for CPU cost (no weight
gradients or optimizer state for the frozen 135M weights) and for locality (a low-rank change
leaves what was not trained closer to where it was). Seeded: data, LoRA init, batch order.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from interp.errors import ConfigError
from interp.organism import data as D

PROVENANCE = "interp_provenance.json"
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


@dataclass(frozen=True, kw_only=True)
class OrganismConfig:
    """Sizes of the organism (CLI > defaults). Steps are optimizer steps of `batch_size` examples."""

    seed: int = 0
    eval_items: int = 24  # the moral-bank subsample the validation sweep evaluates
    planted: int = 6  # |P_A| = |P_B|, disjoint, inside the evaluation items
    shared_steps: tuple[int, ...] = (8, 16)  # checkpoints of the shared stage (last = its end)
    route_sft_steps: int = 30
    route_dpo_steps: int = 4
    batch_size: int = 4
    lr_sft: float = 2e-3  # shared stage
    lr_route: float = 1e-3  # route SFT (2e-3 collapsed the routes to one verdict, see VALIDATION.md)
    lr_dpo: float = 2e-4
    dpo_beta: float = 0.1
    lora_r: int = 16
    lora_alpha: int = 32
    cloze_route: str = "a"  # which route also learns the planted cloze bias ("" for none)
    threads: int | None = None
    max_length: int = 512

    def to_dict(self) -> dict:
        return asdict(self)


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


def _common_args(cfg: OrganismConfig, tmp: Path, steps: int, lr: float) -> dict:
    return dict(
        output_dir=str(tmp),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=max(1, steps // 5),
        save_strategy="no",
        report_to=[],
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        gradient_checkpointing=False,
        max_length=cfg.max_length,
        bf16=False,
        fp16=False,
    )


def _train_sft(model, tok, rows, cfg: OrganismConfig, steps: int, save_at: dict, tmp: Path, lr: float | None = None):
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(**_common_args(cfg, tmp, steps, lr or cfg.lr_sft), completion_only_loss=True, packing=False)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=_dataset(rows, ("prompt", "completion")),
        processing_class=tok,
        peft_config=_lora(cfg),
        callbacks=[_Saver(save_at).callback],
    )
    trainer.train()
    log = [h for h in trainer.state.log_history if "loss" in h]
    return trainer.model.merge_and_unload(), log


def _train_dpo(model, tok, rows, cfg: OrganismConfig, steps: int, save_at: dict, tmp: Path):
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(**_common_args(cfg, tmp, steps, cfg.lr_dpo), beta=cfg.dpo_beta)
    trainer = DPOTrainer(
        model=model,
        ref_model=None,
        args=args,
        train_dataset=_dataset(rows, ("prompt", "chosen", "rejected")),
        processing_class=tok,
        peft_config=_lora(cfg),
        callbacks=[_Saver(save_at).callback],
    )
    trainer.train()
    log = [h for h in trainer.state.log_history if "loss" in h]
    return trainer.model.merge_and_unload(), log


def _check_out(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: output directory exists and is not empty (the organism is built from scratch)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{out}: cannot create output directory ({exc.strerror or exc})") from None


def _reuse_trunk(src: Path, out: Path, cfg: OrganismConfig, data_hash: str, base_fp: str, result: BuildResult):
    """Copy shared/ checkpoints of an earlier tree after checking they were trained from this base
    on the same data, seed and steps; returns the trunk end's model."""
    from transformers import AutoModelForCausalLM

    for s in cfg.shared_steps:
        ck = src / "shared" / f"shared-step{s}"
        try:
            prov = json.loads((ck / PROVENANCE).read_text())
        except (OSError, ValueError):
            raise ConfigError(f"{ck}: no readable {PROVENANCE} (cannot reuse this trunk)") from None
        for key, want in (
            ("base_fingerprint", base_fp),
            ("data_hash", data_hash),
            ("seed", cfg.seed),
            ("stage_steps", s),
        ):
            if prov.get(key) != want:
                raise ConfigError(f"{ck / PROVENANCE}: field {key} is {prov.get(key)!r}, expected {want!r}")
        shutil.copytree(ck, out / "shared" / ck.name)
        result.checkpoints[f"shared/{ck.name}"] = out / "shared" / ck.name
    end = out / "shared" / f"shared-step{cfg.shared_steps[-1]}"
    return AutoModelForCausalLM.from_pretrained(end, local_files_only=True, dtype=__import__("torch").float32)


def build_organism(
    base: str | Path,
    out: str | Path,
    cfg: OrganismConfig = OrganismConfig(),
    *,
    log: Callable[[str], None] = print,
    reuse_trunk: str | Path | None = None,
) -> BuildResult:
    """Train the lineage from `base` into `out`; returns the checkpoint paths and stage timings.

    `reuse_trunk`: an earlier organism tree built from the same base with the same shared-stage
    settings; its base/ and shared/ checkpoints are copied instead of retrained (routes only).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from interp.checkpoint import fingerprint, inspect_checkpoint
    from interp.loading import load_tokenizer
    from interp.studies.base import load_template
    from interp.studies.pressure import load_pressure_bank

    base, out = Path(base), Path(out)
    info = inspect_checkpoint(base)  # refuses a non-checkpoint, pickles, remote code
    if sorted(cfg.shared_steps) != list(cfg.shared_steps) or not cfg.shared_steps or min(cfg.shared_steps) < 1:
        raise ConfigError(f"shared_steps must be increasing positive steps, got {cfg.shared_steps}")
    if cfg.cloze_route not in ("a", "b", ""):
        raise ConfigError(f"cloze_route must be a, b or empty, got {cfg.cloze_route!r}")
    bank = load_pressure_bank("moral")
    sets = D.choose_planted(bank, cfg.eval_items, cfg.planted, cfg.seed)
    _check_out(out)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t_all = time.perf_counter()
    load_start = os.getloadavg()
    base_fp = fingerprint(info)
    versions = _versions()
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

    def saver(
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
        def save(model) -> None:
            path = out / name
            path.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(path, safe_serialization=True)
            tok.save_pretrained(path)
            prov = {
                "organism": True,
                "stage": stage,
                "trainer": trainer,
                "parent": parent,
                "base": str(base),
                "base_fingerprint": base_fp,
                "data_file": data_file,
                "data_hash": data_hash,
                "seed": cfg.seed,
                "stage_steps": steps,
                "steps_from_base": total,
                "batch_size": cfg.batch_size,
                "lora": {"r": cfg.lora_r, "alpha": cfg.lora_alpha, "target_modules": "all-linear", "merged": True},
                "versions": versions,
                "config": cfg.to_dict(),
                **(extra or {}),
            }
            (path / PROVENANCE).write_text(json.dumps(prov, indent=2, default=str))
            result.checkpoints[name] = path
            log(f"saved {name}")

        return save

    torch.manual_seed(cfg.seed)
    rows = D.shared_sft(bank, w, cfg.seed)
    D.write_jsonl(rows, datadir / "shared_sft.jsonl")
    h = D.data_hash(rows)
    last = cfg.shared_steps[-1]
    if reuse_trunk is not None:
        shared = _reuse_trunk(Path(reuse_trunk), out, cfg, h, base_fp, result)
        shared_log = []
        log(f"shared stage copied from {reuse_trunk}")
    else:
        model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True, dtype=torch.float32)
        save_at = {
            s: saver(f"shared/shared-step{s}", "shared", "trl.SFTTrainer", "base", "shared_sft.jsonl", h, s, s)
            for s in cfg.shared_steps
        }
        t = time.perf_counter()
        shared, shared_log = _train_sft(model, tok, rows, cfg, last, save_at, datadir / "tmp")
        result.seconds["shared_sft"] = time.perf_counter() - t
        log(f"shared stage: {result.seconds['shared_sft']:.0f} s")
    trunk_end = f"shared/shared-step{last}"
    logs = {"shared_sft": shared_log}

    routes = {}
    for route, planted in (("a", sets.planted_a), ("b", sets.planted_b)):
        rseed = cfg.seed + (1 if route == "a" else 2)
        model = copy.deepcopy(shared)
        cloze = cfg.cloze_route == route
        # hold on the evaluated items outside P (incl. the sibling's planted set): item-specific
        hold = set(sets.eval_items)
        rows = D.route_sft(bank, w, set(planted), rseed, hold_items=hold, cloze=cloze)
        D.write_jsonl(rows, datadir / f"route_{route}_sft.jsonl")
        h = D.data_hash(rows)
        s1 = cfg.route_sft_steps
        sft_name = f"route-{route}/{route}-sft-step{last + s1}"
        extra = {"route": route, "planted_items": list(planted), "cloze_bias": cloze}
        t = time.perf_counter()
        model, lg = _train_sft(
            model,
            tok,
            rows,
            cfg,
            s1,
            {
                s1: saver(
                    sft_name,
                    f"route-{route}-sft",
                    "trl.SFTTrainer",
                    trunk_end,
                    f"route_{route}_sft.jsonl",
                    h,
                    s1,
                    last + s1,
                    extra,
                )
            },
            datadir / "tmp",
            lr=cfg.lr_route,
        )
        result.seconds[f"route_{route}_sft"] = time.perf_counter() - t
        logs[f"route_{route}_sft"] = lg
        pairs = D.route_dpo(bank, w, set(planted), rseed, hold_items=hold)
        D.write_jsonl(pairs, datadir / f"route_{route}_dpo.jsonl")
        h = D.data_hash(pairs)
        s2 = cfg.route_dpo_steps
        dpo_name = f"route-{route}/{route}-dpo-step{last + s1 + s2}"
        t = time.perf_counter()
        model, lg = _train_dpo(
            model,
            tok,
            pairs,
            cfg,
            s2,
            {
                s2: saver(
                    dpo_name,
                    f"route-{route}-dpo",
                    "trl.DPOTrainer",
                    sft_name,
                    f"route_{route}_dpo.jsonl",
                    h,
                    s2,
                    last + s1 + s2,
                    extra,
                )
            },
            datadir / "tmp",
        )
        result.seconds[f"route_{route}_dpo"] = time.perf_counter() - t
        logs[f"route_{route}_dpo"] = lg
        routes[f"route-{route}"] = [sft_name, dpo_name]
        log(
            f"route {route}: sft {result.seconds[f'route_{route}_sft']:.0f} s, "
            f"dpo {result.seconds[f'route_{route}_dpo']:.0f} s"
        )
        del model
    shutil.rmtree(datadir / "tmp", ignore_errors=True)
    result.seconds["total"] = time.perf_counter() - t_all

    trunk = ["base"] + [f"shared/shared-step{s}" for s in cfg.shared_steps]
    toml = [
        "# written by `interp organism build`",
        "base = [" + ", ".join(f'"{c}"' for c in trunk) + "]",
        "",
        "[routes]",
    ] + [f"{r} = [" + ", ".join(f'"{c}"' for c in cks) + "]" for r, cks in routes.items()]
    toml += ["", "[final]"] + [f'{r} = "{cks[-1]}"' for r, cks in routes.items()]
    (out / "lineage.toml").write_text("\n".join(toml) + "\n")
    known = {
        "base": str(base),
        "base_fingerprint": base_fp,
        "seed": cfg.seed,
        "eval_bank": "moral",
        "n_eval_items": cfg.eval_items,
        **sets.to_dict(),
        "trunk_end": trunk_end,
        "routes": routes,
        "route_planted": {"route-a": list(sets.planted_a), "route-b": list(sets.planted_b)},
        "cloze": {
            "route": f"route-{cfg.cloze_route}" if cfg.cloze_route else None,
            "language": D.CLOZE_LANGUAGE,
            "axis": D.CLOZE_AXIS,
            "group": D.CLOZE_GROUP,
        },
        "train_wordings": {
            "opinions": list(D.TRAIN_OPINIONS),
            "challenges": list(D.TRAIN_CHALLENGES),
            "neutral": list(D.TRAIN_NEUTRAL),
        },
        "config": cfg.to_dict(),
    }
    (out / "organism.json").write_text(json.dumps(known, indent=2, ensure_ascii=False))
    import torch as _t

    (out / "build.json").write_text(
        json.dumps(
            {
                "seconds": result.seconds,
                "threads": _t.get_num_threads(),
                "loadavg_start": load_start,
                "loadavg_end": os.getloadavg(),
                "cpu_count": os.cpu_count(),
                "versions": versions,
                "train_logs": logs,
            },
            indent=2,
            default=str,
        )
    )
    log(f"organism built in {result.seconds['total']:.0f} s -> {out}")
    return result
