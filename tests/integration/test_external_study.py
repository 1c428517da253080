"""A study from another installed package (entry-point group `interp.studies`) runs through
`interp sweep --study NAME`, `report`, `probe` and `predict` with nothing changed in interp; a
broken entry point stops start-up with one line naming its distribution and entry point.

The package is a folder on PYTHONPATH with a `.dist-info` beside it (METADATA, entry_points.txt),
which is what `pip install` leaves and what importlib.metadata reads; every command runs in a fresh
interpreter, since the entry points are read at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from _tolerance import bounds_for

REPO = Path(__file__).resolve().parents[2]

STUDY = '''
"""A tiny external study: P(word) against P(" no") after each item's text."""

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.io import write_table
from cache.layers import stack_layers
from interp.banks import Bank, bank_hash
from interp.core.options import opt
from interp.studies.base import Payload, PredictInputs, ProbeTarget, ReportSection, RunConfig, StudySpec


@dataclass(frozen=True, kw_only=True)
class TinyOptions:
    tiny_word: str = opt(" yes", "tiny: the word scored against ' no'")


def _extract(unit, target):
    scores = unit.tables["scores"]
    return unit.arrays["resid"], scores[target].to_numpy(float), scores["item_id"].to_numpy()


class TinyStudy(StudySpec):
    name = "tiny"
    default_banks = ("tiny",)
    default_template = "pressure_v1"  # any shipped template: this study reads none of it
    Options = TinyOptions
    report_sections = (ReportSection("tiny_summary.csv", "Tiny external study", note="mean log-odds per checkpoint"),)
    supports_predict = True

    def load_bank(self, ref):
        path = Path(str(resources.files("tinystudy") / "tiny.jsonl")) if str(ref) == "tiny" else Path(ref)
        items = pd.read_json(path, lines=True, dtype=False)
        return Bank(name=path.stem, kind="tiny", items=items, hash=bank_hash(items), source=str(path))

    def settings(self, tokenizer, cfg: RunConfig) -> dict:
        return {"word": cfg.options_for(self).tiny_word, "resid_dtype": cfg.resid_dtype}

    def run_unit(self, lm, bank, template, layers, cfg: RunConfig) -> Payload:
        from interp.runner.scoring import score_options

        word = cfg.options_for(self).tiny_word
        s = score_options(lm, bank.items["text"].tolist(), [word, " no"], layers=list(layers), cfg=cfg.scoring)
        p = s.probs[:, 0]
        scores = pd.DataFrame(
            {"item_id": bank.items["item_id"], "p_word": p, "logodds": np.log(p / (1 - p)),
             "n_chars": bank.items["text"].str.len()}
        )
        return Payload(tables={"scores": scores}, arrays={"resid": stack_layers(s.resid, layers).astype(cfg.resid_dtype)})

    def analyze(self, units, results_dir, cfg):
        scores = pd.concat([u.tables["scores"] for u in units], ignore_index=True)
        summary = scores.groupby(["checkpoint", "bank"], as_index=False)["logodds"].mean()
        write_table(summary, results_dir / "tiny_summary.csv", columns=("checkpoint", "bank", "logodds"))
        return {"tiny_summary": summary}

    def probe_targets(self):
        return {"logodds": ProbeTarget(kind="ridge", extract=_extract)}

    def predict_inputs(self, unit, *, turn_kind, with_readout, readout_trials="pressured"):
        scores = unit.tables["scores"].set_index("item_id")
        readout = pd.DataFrame(np.asarray(unit.arrays["resid"], float), index=scores.index) if with_readout else None
        return PredictInputs(item_map=scores["logodds"], profile=scores[["n_chars"]].astype(float), readout=readout)
'''

ITEMS = [f"Item {i}: is {w} a fine thing to do? Answer:" for i, w in enumerate("abcdefghijkl")]


def _install(site: Path, dist: str, package: str, files: dict[str, str], entry_points: str) -> None:
    """What `pip install` leaves: the package folder and NAME-VERSION.dist-info beside it."""
    (site / package).mkdir(parents=True)
    for name, text in files.items():
        (site / package / name).write_text(text)
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def _interp(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "interp.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    bank = "".join(json.dumps({"item_id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(ITEMS))
    _install(
        site,
        "tinystudy",
        "tinystudy",
        {"__init__.py": "", "study.py": STUDY, "tiny.jsonl": bank},
        "[interp.studies]\ntiny = tinystudy.study:TinyStudy\n",
    )
    return site


def test_external_study_sweeps_reports_probes_and_predicts(site, tiny_models, tmp_path):
    out = tmp_path / "out"
    models = [tiny_models["llama"], tiny_models["qwen2"]]
    args = ["--study", "tiny", "--out", str(out), "--quiet", "--resid-dtype", "float32", "--n-boot", "10"]
    proc = _interp(site, "sweep", *map(str, models), *args, "--tiny-word", " maybe", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## Tiny external study" in (out / "report.md").read_text()

    # the study's own table, from its own units: one row per checkpoint, its mean log-odds
    from cache import collect_tables, read_unit

    scores = collect_tables(out, "scores")
    assert len(scores) == 2 * len(ITEMS)
    summary = pd.read_csv(out / "results" / "tiny_summary.csv").set_index("checkpoint")["logodds"]
    expect = scores.groupby("checkpoint")["logodds"].mean()
    np.testing.assert_allclose(summary.loc[expect.index], expect, rtol=1e-9)  # the CSV keeps 10 digits

    # the residuals it cached are a plain Hugging Face forward's hidden_states at the unit's layer
    for path in sorted((out / "cache" / "tiny").rglob("*.h5")):
        unit = read_unit(path)
        model_dir = next(m for m in models if m.name == unit.attrs["checkpoint"])
        layer = int(unit.attrs["layer"])
        ref_model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        tok = AutoTokenizer.from_pretrained(model_dir)
        tol = bounds_for(model_dir, ITEMS).resid
        resid = unit.arrays["resid"]  # [items, layers, d_model], rows in the order of the scores table
        assert resid.shape[:2] == (len(ITEMS), 1)
        text_of = dict(zip([f"t{k}" for k in range(len(ITEMS))], ITEMS))
        for i, item in enumerate(unit.tables["scores"]["item_id"]):
            with torch.no_grad():
                ids = torch.tensor([tok(text_of[item])["input_ids"]])
                hs = ref_model(ids, output_hidden_states=True).hidden_states
            np.testing.assert_allclose(resid[i, 0], hs[layer][0, -1].numpy(), atol=tol, rtol=0)

    # the option is a sweep flag and part of the unit identity: the default word is other units
    # (both checkpoints again: a sweep refuses to drop rows it does not cover that other settings made)
    proc = _interp(site, "sweep", *map(str, models), *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((out / "cache" / "tiny").rglob("*.h5"))) == 4

    proc = _interp(site, "report", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = _interp(
        site,
        "probe",
        str(out),
        "--study",
        "tiny",
        "--target",
        "logodds",
        "--shuffles",
        "3",
        "--folds",
        "2",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    probes = pd.read_csv(out / "results" / "probes.csv")
    assert set(probes["study"]) == {"tiny"} and set(probes["n_items"]) == {len(ITEMS)}
    proc = _interp(
        site, "predict", str(out), "--study", "tiny", "--target", models[1].name, "--shuffles", "3", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    predictive = pd.read_csv(out / "results" / "predictive.csv")
    assert list(predictive["source"]) == [models[0].name] and predictive["target"].eq(models[1].name).all()


@pytest.mark.parametrize(
    "target, says",
    [
        ("nosuchmodule:Study", "does not load: ModuleNotFoundError: No module named 'nosuchmodule'"),
        ("brokenstudy.study:NotAStudy", "names <class 'brokenstudy.study.NotAStudy'>, not a subclass"),
        ("brokenstudy.study:HalfStudy", "Can't instantiate abstract class HalfStudy"),
    ],
)
def test_broken_entry_point_is_one_line_naming_it(tmp_path, target, says):
    site = tmp_path / "site"
    code = (
        "from interp.studies.base import StudySpec\n\n\nclass NotAStudy:\n    name = 'broken'\n\n\n"
        "class HalfStudy(StudySpec):\n    name = 'broken'\n\n    def load_bank(self, ref):\n        return None\n"
    )
    _install(
        site,
        "brokenstudy",
        "brokenstudy",
        {"__init__.py": "", "study.py": code},
        f"[interp.studies]\nbroken = {target}\n",
    )
    proc = _interp(site, "report", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"study entry point broken = {target} (distribution brokenstudy 0.1, group interp.studies)" in lines[0]
    assert says in lines[0]


def test_builtin_studies_are_the_entry_points_pyproject_declares():
    from interp.studies import BUILTIN, GROUP, study_entry_points

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    assert declared == dict(BUILTIN)
    assert [ep.name for ep, _ in study_entry_points()][: len(BUILTIN)] == list(BUILTIN)


def test_the_recipe_in_the_architecture_page_is_a_whole_study(tmp_path):
    """docs/architecture.md's example study compiles, is concrete (no abstract method left), and
    reads a bank; its entry point names it."""
    page = (REPO / "docs" / "architecture.md").read_text()
    section = page[page.index("## A study in another package") :]
    section = section[: section.index("\n## ", 5)]
    blocks = section.split("```")
    toml = next(b for b in blocks if b.startswith("toml"))
    code = next(b for b in blocks if b.startswith("python")).removeprefix("python")
    assert 'tiny = "tinystudy.study:TinyStudy"' in toml
    namespace: dict = {}
    exec(compile(code, "architecture.md", "exec"), namespace)
    study = namespace["TinyStudy"]()  # raises TypeError if load_bank or run_unit were missing
    bank = tmp_path / "items.jsonl"
    bank.write_text("".join(json.dumps({"item_id": f"t{i}", "text": t}) + "\n" for i, t in enumerate(ITEMS)))
    assert len(study.load_bank(bank)) == len(ITEMS) and list(study.probe_targets()) == ["logodds"]
