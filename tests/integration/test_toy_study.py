"""A new study in one file: register it, and sweep, report, probe and config handle it with no
change anywhere else (the registry is the only join)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyses.io import write_table
from interp.banks import Bank, bank_hash
from interp.core.options import opt
from interp.studies import STUDIES, get_study, register_study
from interp.studies.base import Payload, ProbeTarget, ReportSection, RunConfig, StudySpec, Template


@dataclass(frozen=True, kw_only=True)
class ToyOptions:
    word: str = opt(" yes", "toy: the option word scored after each prompt")


def _extract(unit, target):
    scores = unit.tables["scores"]
    return unit.arrays["resid"], scores["logp"].to_numpy(float), scores["item_id"].to_numpy()


class ToyStudy(StudySpec):
    name = "toy"
    default_template = "pressure_v1"  # any shipped template: the toy ignores it
    Options = ToyOptions
    report_sections = (ReportSection("toy_summary.csv", "Toy study"),)

    def load_bank(self, ref: str | Path) -> Bank:
        rows = [json.loads(line) for line in Path(ref).read_text().splitlines() if line.strip()]
        items = pd.DataFrame(rows)
        return Bank(name=Path(ref).stem, kind="toy", items=items, hash=bank_hash(items), source=str(ref))

    def settings(self, tokenizer, cfg: RunConfig) -> dict:
        return {"word": cfg.options_for(self).word, "resid_dtype": cfg.resid_dtype}

    def run_unit(self, lm, bank: Bank, template: Template, layers: tuple[int, ...], cfg: RunConfig) -> Payload:
        from cache.layers import stack_layers
        from interp.runner.scoring import score_options

        word = cfg.options_for(self).word
        s = score_options(lm, bank.items["text"].tolist(), [word, " no"], layers=list(layers), cfg=cfg.scoring)
        scores = pd.DataFrame({"item_id": bank.items["item_id"], "logp": np.log(s.probs[:, 0])})
        return Payload(tables={"scores": scores}, arrays={"resid": stack_layers(s.resid, layers).astype(np.float32)})

    def analyze(self, units, results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]:
        scores = pd.concat([u.tables["scores"] for u in units], ignore_index=True)
        summary = scores.groupby(["checkpoint", "bank"], as_index=False)["logp"].mean()
        write_table(summary, results_dir / "toy_summary.csv", columns=("checkpoint", "bank", "logp"))
        return {"toy_summary": summary}

    def probe_targets(self) -> dict[str, ProbeTarget]:
        return {"logp": ProbeTarget(kind="ridge", extract=_extract)}


@pytest.fixture
def toy():
    register_study(ToyStudy)
    yield get_study("toy")
    STUDIES.remove("toy")


def test_toy_study_runs_through_sweep_report_probe(toy, tiny_models, tmp_path):
    from interp.config import merge_run_config
    from sweeps.api import run_sweep
    from sweeps.probe import run_probe

    bank = tmp_path / "toy.jsonl"
    bank.write_text(
        "".join(json.dumps({"item_id": f"t{i}", "text": f"Is item {i} fine? Answer:"}) + "\n" for i in range(8))
    )
    cfg = merge_run_config({"n_boot": 10}, {"toy": {"word": " maybe"}})
    assert cfg.options_for(toy) == ToyOptions(word=" maybe")
    out = tmp_path / "out"
    tables = run_sweep([tiny_models["llama"]], studies=["toy"], banks=[str(bank)], out=out, cfg=cfg, progress=False)
    assert list(tables) == ["toy_summary"] and np.isfinite(tables["toy_summary"]["logp"]).all()
    report = (out / "report.md").read_text()
    assert "## Toy study" in report and "results/toy_summary.csv" in report
    probe = run_probe(out, study="toy", target="logp", n_shuffles=3, n_folds=2)
    assert set(probe["study"]) == {"toy"} and probe["n_items"].iloc[0] == 8
    # the option is part of the unit identity: another word is another unit
    again = run_sweep(
        [tiny_models["llama"]],
        studies=["toy"],
        banks=[str(bank)],
        out=out,
        cfg=merge_run_config({"toy": {"word": " yes"}}),
        progress=False,
        report=False,
    )
    assert len(list((out / "cache" / "toy").rglob("*.h5"))) == 2
    assert not np.allclose(again["toy_summary"]["logp"], tables["toy_summary"]["logp"])


def test_unknown_names_are_one_line_errors(toy):
    from interp.config import merge_run_config
    from interp.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown study 'nope'"):
        get_study("nope")
    with pytest.raises(ConfigError, match="toy.colour unknown"):
        merge_run_config({"toy": {"colour": "red"}})
    with pytest.raises(ConfigError, match="'colour' unknown"):
        merge_run_config({"colour": "red"})
