"""Plan a sweep: units (checkpoint x study x bank x template x layer) with identity hashes.

The identity is computed the same way here (from the plan) and in the cache (from what was
written), so `--dry-run` can say exactly which units are done.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from cache.store import CONTENT_ATTR, Store, UnitIdentity
from interp.banks import Bank
from interp.model.checkpoint import CheckpointInfo, content_fingerprint, fingerprint_parts, inspect_checkpoint
from interp.core.hashing import sha256_json
from cache.layers import layer_key, parse_layers
from interp.model.devices import SWITCHABLE, device_class
from interp.model.loading import LoadedModel, shared_tokenizer
from interp.studies import get_study
from interp.studies.base import RunConfig, Template, load_template


log = logging.getLogger("interp.sweep")


def distinct_banks(study: str, refs: Sequence[str], banks: Sequence[Bank]) -> list[tuple[str, Bank]]:
    """Banks by content: the same content given twice is used once (with a warning); two
    different banks with one name (a/mybank.csv, b/mybank.csv) get the name plus a hash prefix."""
    seen: dict[str, str] = {}
    kept: list[tuple[str, Bank]] = []
    for ref, bank in zip(refs, banks):
        if bank.hash in seen:
            msg = f"--bank {ref}: same items as {seen[bank.hash]} for {study}; used once"
            warnings.warn(msg, stacklevel=3)
            log.warning(msg)
            continue
        seen[bank.hash] = ref
        kept.append((ref, bank))
    names = [b.name for _, b in kept]
    return [(ref, replace(b, name=f"{b.name}-{b.hash[:8]}") if names.count(b.name) > 1 else b) for ref, b in kept]


@dataclass(frozen=True)
class PlannedUnit:
    checkpoint: Path
    study: str
    bank: Bank
    template: Template
    identity: UnitIdentity
    model: object | None = None  # a LoadedModel passed in memory (interp.wrap); None: load `checkpoint`
    # content fingerprint of every weight byte as known now without reading the weights (the
    # memo, interp.model.fingerprint); None: unknown until the checkpoint is loaded
    content: str | None = None
    recompute: str | None = None  # why it is recomputed although complete (already said once)


def unit_settings(study, tokenizer, cfg: RunConfig) -> dict:
    """The study's numbers-changing settings, plus steering when the run steers (part of the identity)."""
    settings = study.settings(tokenizer, cfg)
    if cfg.steering:
        from interp.runner.steering import Steering

        settings = {**settings, "steering": Steering.from_options(cfg.steering).identity()}
    return settings


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
    study_banks: dict[str, list[tuple[str, Bank]]] = {}
    for study_name in studies:
        study = get_study(study_name)
        refs = list(banks or study.default_banks)
        loaded = []
        for ref in refs:
            bank = study.load_bank(ref)
            if cfg.max_items:
                bank = study.subsample(bank, cfg.max_items, seed=cfg.seed)
            loaded.append(bank)
        study_banks[study_name] = distinct_banks(study_name, refs, loaded)
    templates = {}
    for study_name in studies:  # checked before any checkpoint is hashed or loaded
        study = get_study(study_name)
        templates[study_name] = load_template(template or study.default_template)
        study.check_template(templates[study_name])
    infos: dict[Path, tuple[CheckpointInfo, str, object]] = {}
    contents: dict[Path, str | None] = {}
    full_hash = cfg.full_hash
    models: dict[Path, LoadedModel] = {}  # in-memory models (interp.wrap) by their pseudo-path
    for ck in checkpoints:
        if isinstance(ck, LoadedModel):
            models[ck.info.path] = ck
            infos[ck.info.path] = (ck.info, ck.fingerprint, ck.tokenizer)
            contents[ck.info.path] = ck.content
            continue
        info = inspect_checkpoint(ck, allow_pickle=cfg.allow_pickle)
        parts = fingerprint_parts(info, full_hash=full_hash)
        # checkpoints of one lineage share tokenizer files: loaded once, and again reused by `load`
        infos[Path(ck)] = (info, sha256_json(parts), shared_tokenizer(info, parts))
        contents[Path(ck)] = content_fingerprint(info, known_only=True)
    for ck in checkpoints:
        ck = ck.info.path if isinstance(ck, LoadedModel) else Path(ck)
        info, fp, tok = infos[ck]
        spec = cfg.layers if cfg.layers is not None else cfg.layer
        layers = parse_layers(
            spec, info.n_layers, where=f"{'--layers' if cfg.layers is not None else '--layer'} for {info.path}"
        )
        for study_name in studies:
            study = get_study(study_name)
            tmpl = templates[study_name]
            for _ref, bank in study_banks[study_name]:
                ident = UnitIdentity(
                    checkpoint=(names or {}).get(Path(ck), info.name),
                    checkpoint_fingerprint=fp,
                    study=study_name,
                    study_version=study.version,
                    bank=bank.name,
                    bank_hash=bank.hash,
                    template_hash=tmpl.hash,
                    settings_hash=settings_hash(unit_settings(study, tok, cfg), cfg),
                    layer=layer_key(layers),
                    backend=models[ck].backend.name if ck in models else cfg.backend,
                )
                units.append(
                    PlannedUnit(
                        checkpoint=ck,
                        study=study_name,
                        bank=bank,
                        template=tmpl,
                        identity=ident,
                        model=models.get(ck),
                        content=contents.get(ck),
                    )
                )
    return units


def settings_hash(study_settings: dict, cfg: RunConfig) -> str:
    """A study's numbers-changing settings plus the precision they were computed in: the weight
    dtype and the device class (cpu / cuda: kernels differ; the device index does not matter),
    and in a switchable reduced precision the tie guard (float32 identities stay as they were)."""
    precision = {"dtype": cfg.dtype, "device": device_class("auto" if cfg.device_map else cfg.device)}
    if cfg.dtype in SWITCHABLE:
        precision["tie_guard"] = cfg.scoring.tie_guard
    return sha256_json({**study_settings, "precision": precision})


def reuse_status(store: Store, u: PlannedUnit, content: str | None) -> tuple[str, str | None]:
    """Whether the unit can be reused: ("done", None); ("todo", why or None) to compute it;
    ("verify", None) when it is complete but the bytes it ran on can only be checked by loading.

    `content`: the checkpoint's content fingerprint (known from the memo, or just loaded)."""
    attrs = store.attrs(u.identity)
    if attrs is None or u.recompute:
        return "todo", None
    recorded = attrs.get(CONTENT_ATTR)
    path = store.path_for(u.identity).relative_to(store.root)
    if not recorded:
        return "todo", f"{path}: written before units recorded their weights' content hash; recomputing it once"
    if content is None:
        return "verify", None
    if recorded != content:
        return "todo", (
            f"{path}: computed from other weight bytes than {u.identity.checkpoint} holds now (content "
            f"{str(recorded)[:12]} -> {content[:12]}, same sampled fingerprint); recomputing it"
        )
    return "done", None


def describe_plan(units: Sequence[PlannedUnit], store: Store) -> list[dict]:
    return [
        {
            "checkpoint": u.identity.checkpoint,
            "study": u.study,
            "bank": u.bank.name,
            "items": len(u.bank),
            "layer": u.identity.layer,
            "unit": u.identity.hash[:16],
            "status": reuse_status(store, u, u.content)[0],
        }
        for u in units
    ]
