"""Run configuration: CLI > config file (TOML or JSON) > defaults. One merge, no globals.

Keys (flat, all optional): RunConfig fields (backend, layer, max_items, seed, threads, n_boot,
resid_dtype, allow_pickle), ScoringConfig fields (batch_size, variants, ...), any study
option (set on every study that declares it, e.g. temperature, use_chat), a table per study
(`[cloze] reference_language = "hi"`) and, for old files, an `options` table (same as flat).
The command line builds the same mapping from its flags, so every key is settable both ways.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Mapping

from interp.core.errors import ConfigError
from interp.core.options import build, option_fields
from interp.runner.options import ScoringConfig
from interp.studies import all_studies
from interp.studies.base import RunConfig, option_names, options_from

SCORING_KEYS = {f.name for f in option_fields(ScoringConfig)}
RUN_KEYS = {f.name for f in option_fields(RunConfig)} - {"scoring", "studies", "options"}


def _read(path: Path) -> dict:
    from interp.core.files import regular_file

    if path.exists():
        regular_file(path, limit=16 << 20, error=ConfigError)  # a FIFO would hang the read
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
    try:
        return json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: invalid config ({exc})") from None


def merge_run_config(*layers: Mapping[str, Any]) -> RunConfig:
    """Later layers win, key by key."""
    specs = {s.name: s for s in all_studies()}
    declared = {name: option_names(s) for name, s in specs.items()}
    run: dict[str, Any] = {}
    scoring: dict[str, Any] = {}
    per_study: dict[str, dict[str, Any]] = {name: {} for name in specs}
    for layer in layers:
        flat: dict[str, Any] = {}
        for key, value in layer.items():
            if key == "options":
                flat.update(value or {})
            elif key in specs:
                if not isinstance(value, Mapping):
                    raise ConfigError(f"config field {key!r} must be a table of {key} options")
                unknown = [k for k in value if k not in declared[key]]
                if unknown:
                    raise ConfigError(f"config field {key}.{unknown[0]} unknown (known: {', '.join(declared[key])})")
                per_study[key].update(value)
            elif key in SCORING_KEYS:
                scoring[key] = value
            elif key in RUN_KEYS:
                run[key] = value
            else:
                flat[key] = value
        if "allow_pickle" in flat:
            run["allow_pickle"] = flat.pop("allow_pickle")
        for key, value in flat.items():
            owners = [name for name, keys in declared.items() if key in keys]
            if not owners:
                raise ConfigError(f"config field {key!r} unknown")
            for name in owners:
                per_study[name][key] = value
    studies = {name: options_from(specs[name], values) for name, values in per_study.items() if values}
    return build(
        RunConfig,
        {**run, "scoring": build(ScoringConfig, scoring, where="config: "), "studies": studies},
        where="config: ",
    )


def load_run_config(path: Path | None, cli: Mapping[str, Any]) -> RunConfig:
    file_layer = _read(path) if path else {}
    return merge_run_config(file_layer, cli)
