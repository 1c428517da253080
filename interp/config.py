"""Run configuration: CLI > config file (TOML or JSON) > defaults. One merge, no globals."""
from __future__ import annotations

import json
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Mapping

from interp.errors import ConfigError
from interp.runner.scoring import ScoringConfig
from interp.studies.base import RunConfig

_SCORING = {f.name for f in fields(ScoringConfig)}
_RUN = {f.name for f in fields(RunConfig)} - {"scoring"}


def _read(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
    try:
        return json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: invalid config ({exc})") from None


def merge_run_config(*layers: Mapping[str, Any]) -> RunConfig:
    """Later layers win. Keys are RunConfig fields or ScoringConfig fields (flat)."""
    run: dict[str, Any] = {}
    scoring: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "options":
                options.update(value or {})
            elif key in _SCORING:
                scoring[key] = value
            elif key in _RUN:
                run[key] = value
            else:
                raise ConfigError(f"config field {key!r} unknown")
    try:
        return RunConfig(**run, scoring=ScoringConfig(**scoring), options=options)
    except TypeError as exc:
        raise ConfigError(f"config: {exc}") from None


def load_run_config(path: Path | None, cli: Mapping[str, Any]) -> RunConfig:
    file_layer = _read(path) if path else {}
    return merge_run_config(file_layer, cli)
