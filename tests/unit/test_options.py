"""Typed options: every option is a CLI flag and a config key from one definition; CLI > file >
defaults; unknown backend / executor / option names are one-line errors."""

from __future__ import annotations

import dataclasses

import pytest

from interp.core.errors import ConfigError
from interp.core.options import flag_for, option_fields
from interp.runner.options import ScoringConfig
from interp.studies import all_studies
from interp.studies.base import RunConfig


def _sweep_flags() -> set[str]:
    import click
    import typer

    from interp.cli import app

    group = typer.main.get_command(app)
    cmd = group.get_command(click.Context(group), "sweep")
    return {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}


def test_every_option_is_a_flag_and_old_names_stay():
    flags = _sweep_flags()
    owners = [RunConfig, ScoringConfig] + [s.Options for s in all_studies()]
    for cls in owners:
        for f in option_fields(cls):
            if f.metadata.get("cli", True):
                for flag in flag_for(f).split("/"):
                    assert flag in flags, f"{cls.__name__}.{f.name}: no flag {flag}"
    old = {
        "--study",
        "--out",
        "--bank",
        "--template",
        "--layer",
        "--backend",
        "--max-items",
        "--batch-size",
        "--threads",
        "--readout",
        "--n-samples",
        "--generate",
        "--judge",
        "--temperature",
        "--max-new-tokens",
        "--n-replies",
        "--max-posts",
        "--executor",
        "--scheduler",
        "--workers",
        "--dry-run",
        "--wait",
        "--seed",
        "--config",
        "--allow-pickle",
        "--quiet",
    }
    assert old <= flags, old - flags
    assert {"--chat-template", "--no-chat-template", "--reference-language", "--mediation-outcome", "--n-boot"} <= flags


def test_cli_over_file_over_defaults(tmp_path, monkeypatch):
    import sweeps.api
    from interp.cli import app

    seen = {}

    def fake_run_sweep(checkpoints, **kw):
        seen.update(kw)
        return {}

    monkeypatch.setattr(sweeps.api, "run_sweep", fake_run_sweep)
    cfg_file = tmp_path / "run.toml"
    cfg_file.write_text(
        'n_boot = 77\ntemperature = 0.5\n[cloze]\nreference_language = "hi"\n[pressure]\nreadout = "sampled"\n'
    )
    app(
        [
            "sweep",
            str(tmp_path),
            "--study",
            "cloze",
            "--out",
            str(tmp_path / "o"),
            "--config",
            str(cfg_file),
            "--no-chat-template",
            "--mediation-outcome",
            "delta_clipped",
            "--temperature",
            "0.7",
            "--quiet",
        ],
        standalone_mode=False,
    )
    cfg = seen["cfg"]
    studies = {s.name: s for s in all_studies()}
    assert cfg.n_boot == 77 and cfg.seed == 0  # file, default
    cloze = cfg.options_for(studies["cloze"])
    assert cloze.reference_language == "hi" and cloze.mediation_outcome == "delta_clipped"
    pressure, classify = cfg.options_for(studies["pressure"]), cfg.options_for(studies["classify"])
    assert pressure.readout == "sampled" and pressure.temperature == 0.7 and not pressure.use_chat  # CLI wins
    assert classify.temperature == 0.7 and not classify.use_chat and classify.max_new_tokens == 350


def test_option_values_are_checked():
    from interp.config import merge_run_config

    with pytest.raises(ConfigError, match="mediation_outcome must be one of delta, delta_clipped"):
        merge_run_config({"mediation_outcome": "total"})
    with pytest.raises(ConfigError, match="n_samples: expected int"):
        merge_run_config({"pressure": {"n_samples": "many"}})
    with pytest.raises(ConfigError, match="'batch_sizes' unknown"):
        merge_run_config({"batch_sizes": 4})
    cfg = merge_run_config({"batch_size": 4, "options": {"readout": "sampled"}}, {"readout": "slot"})
    assert cfg.scoring.batch_size == 4
    assert dataclasses.replace(cfg).studies["pressure"].readout == "slot"  # later layer wins


def test_unknown_backend_and_executor(tiny_models, tmp_path):
    from cache.store import Store
    from interp.model.loading import load
    from sweeps.execute import execute

    with pytest.raises(
        ConfigError, match="unknown backend 'nnsigth' \\(choose one of hf, transformer_lens, nnsight\\)"
    ):
        load(tiny_models["llama"], backend="nnsigth")
    with pytest.raises(ConfigError, match="unknown executor 'kubernetes'"):
        execute([], Store(tmp_path), RunConfig(), executor="kubernetes", progress=False)
    with pytest.raises(ConfigError, match="--executor slurm needs --cluster-config"):
        execute([], Store(tmp_path), RunConfig(), executor="slurm", progress=False)
