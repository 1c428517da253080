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
from interp.core.errors import ConfigError
from interp.core.hashing import sha256_json
from interp.hooksites import default_layer
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
        layer = default_layer(info.n_layers) if cfg.layer is None else cfg.layer
        if not 0 <= layer < info.n_layers:
            raise ConfigError(f"--layer {layer} outside 0..{info.n_layers - 1} for {info.path}")
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
                    settings_hash=sha256_json(study.settings(tok, cfg)),
                    layer=layer,
                    backend=cfg.backend,
                )
                units.append(PlannedUnit(checkpoint=Path(ck), study=study_name, bank=bank, template=tmpl, identity=ident))
    return units


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
