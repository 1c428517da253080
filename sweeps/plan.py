"""Plan a sweep: units (checkpoint x study x bank x template x layer) with identity hashes.

The identity is computed the same way here (from the plan) and in the cache (from what was
written), so `--dry-run` can say exactly which units are done.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from cache.store import Store, UnitIdentity
from interp.banks import Bank
from interp.checkpoint import CheckpointInfo, fingerprint, inspect_checkpoint
from interp.core.hashing import sha256_json
from cache.layers import layer_key, parse_layers
from interp.devices import device_class
from interp.loading import load_tokenizer
from interp.studies import get_study
from interp.studies.base import RunConfig, Template, load_template


@dataclass(frozen=True)
class PlannedUnit:
    checkpoint: Path
    study: str
    bank: Bank
    template: Template
    identity: UnitIdentity


def plan_units(
    checkpoints: Sequence[Path],
    studies: Sequence[str],
    *,
    banks: Sequence[str] | None = None,
    template: str | None = None,
    cfg: RunConfig = RunConfig(),
    names: Mapping[Path, str] | None = None,
) -> list[PlannedUnit]:
    units: list[PlannedUnit] = []
    loaded_banks: dict[tuple[str, str], Bank] = {}
    for study_name in studies:
        study = get_study(study_name)
        for ref in banks or study.default_banks:
            bank = study.load_bank(ref)
            if cfg.max_items:
                bank = study.subsample(bank, cfg.max_items, seed=cfg.seed)
            loaded_banks[(study_name, ref)] = bank
    templates = {}
    for study_name in studies:  # checked before any checkpoint is hashed or loaded
        study = get_study(study_name)
        templates[study_name] = load_template(template or study.default_template)
        study.check_template(templates[study_name])
    infos: dict[Path, tuple[CheckpointInfo, str, object]] = {}
    for ck in checkpoints:
        info = inspect_checkpoint(ck, allow_pickle=cfg.allow_pickle)
        infos[Path(ck)] = (info, fingerprint(info), load_tokenizer(info.path))
    for ck in checkpoints:
        info, fp, tok = infos[Path(ck)]
        spec = cfg.layers if cfg.layers is not None else cfg.layer
        layers = parse_layers(spec, info.n_layers, where=f"{'--layers' if cfg.layers is not None else '--layer'} "
                              f"for {info.path}")
        for study_name in studies:
            study = get_study(study_name)
            tmpl = templates[study_name]
            for ref in banks or study.default_banks:
                bank = loaded_banks[(study_name, ref)]
                ident = UnitIdentity(
                    checkpoint=(names or {}).get(Path(ck), info.name),
                    checkpoint_fingerprint=fp,
                    study=study_name,
                    study_version=study.version,
                    bank=bank.name,
                    bank_hash=bank.hash,
                    template_hash=tmpl.hash,
                    settings_hash=settings_hash(study.settings(tok, cfg), cfg),
                    layer=layer_key(layers),
                    backend=cfg.backend,
                )
                units.append(PlannedUnit(checkpoint=Path(ck), study=study_name, bank=bank, template=tmpl, identity=ident))
    return units


def settings_hash(study_settings: dict, cfg: RunConfig) -> str:
    """A study's numbers-changing settings plus the precision they were computed in: the weight
    dtype and the device class (cpu / cuda: kernels differ; the device index does not matter)."""
    precision = {"dtype": cfg.dtype, "device": device_class("auto" if cfg.device_map else cfg.device)}
    return sha256_json({**study_settings, "precision": precision})


def describe_plan(units: Sequence[PlannedUnit], store: Store) -> list[dict]:
    return [
        {
            "checkpoint": u.identity.checkpoint,
            "study": u.study,
            "bank": u.bank.name,
            "items": len(u.bank),
            "layer": u.identity.layer,
            "unit": u.identity.hash[:16],
            "status": "done" if store.is_complete(u.identity) else "todo",
        }
        for u in units
    ]
