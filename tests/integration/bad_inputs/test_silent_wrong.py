"""The five ways a sweep used to give different numbers with no warning (issue 13):
an edited tokenizer kept the old unit, weights changed between fingerprint and load, stale
units were read by probe/predict, two banks with one stem were merged, and a damaged unit
body was read as numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from ._util import PRESSURE, assert_one_line_error, jsonl

SMALL = dict(studies=["pressure"], banks=["moral"])


@pytest.fixture(autouse=True)
def _private_fingerprint_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_FINGERPRINT_CACHE", str(tmp_path / "fp-memo"))


@pytest.fixture
def ckpt(bi_model, tmp_path):
    """A private copy of the tiny llama checkpoint (tests edit it)."""
    return Path(shutil.copytree(bi_model, tmp_path / "ck"))


def _cfg():
    from interp.studies.base import RunConfig

    return RunConfig(max_items=2, threads=1)


def _sweep(cks, out, **kw):
    from sweeps.api import run_sweep

    return run_sweep(list(cks), out=out, cfg=kw.pop("cfg", _cfg()), progress=False, report=False, **{**SMALL, **kw})


def _status(cks, out) -> list[str]:
    return _sweep(cks, out, dry_run=True)["plan"]["status"].tolist()


# ---------------------------------------------------------------- 1. every input-shaping file is identity


def _cut_merges(ck: Path) -> None:
    tok = json.loads((ck / "tokenizer.json").read_text())
    tok["model"]["merges"] = tok["model"]["merges"][: len(tok["model"]["merges"]) // 2]
    (ck / "tokenizer.json").write_text(json.dumps(tok))


def _edit_json(name: str, **changes):
    def edit(ck: Path) -> None:
        path = ck / name
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(changes)
        path.write_text(json.dumps(data))

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _cut_merges,
        _edit_json("special_tokens_map.json", eos_token="<|im_end|>"),
        _edit_json("generation_config.json", temperature=0.3),
        _edit_json("tokenizer_config.json", chat_template="{{ messages[0]['content'] }}"),
        lambda ck: (ck / "chat_template.jinja").write_text("{{ messages[0]['content'] }}"),
    ],
    ids=["tokenizer-merges", "special-tokens", "generation-config", "chat-template-in-config", "chat-template-file"],
)
def test_input_shaping_files_are_in_the_fingerprint(ckpt, edit):
    from interp.model.checkpoint import fingerprint, inspect_checkpoint

    before = fingerprint(inspect_checkpoint(ckpt))
    edit(ckpt)
    assert fingerprint(inspect_checkpoint(ckpt)) != before


def test_edited_tokenizer_is_recomputed_not_served(ckpt, tmp_path):
    out = tmp_path / "OUT"
    first = _sweep([ckpt], out)["pressure_trials"]
    assert _status([ckpt], out) == ["done"]
    _cut_merges(ckpt)
    assert _status([ckpt], out) == ["todo"], "an edited tokenizer kept the old unit id"
    second = _sweep([ckpt], out)["pressure_trials"]
    # the same tables from a fresh OUT: what the edited checkpoint really gives
    fresh = _sweep([ckpt], tmp_path / "FRESH")["pressure_trials"]
    pd.testing.assert_frame_equal(second, fresh)
    assert not np.allclose(first["p_planted"], second["p_planted"]), "planted test: the edit changes numbers"


# ---------------------------------------------------------------- 2. what was loaded is what was fingerprinted


def _bump_weights(ck: Path, scale: float = 1.5) -> None:
    from safetensors.torch import load_file, save_file

    (f,) = sorted(ck.glob("*.safetensors"))
    tensors = load_file(f)
    name = next(k for k in tensors if k.endswith("q_proj.weight"))
    tensors[name] = tensors[name] * scale
    save_file(tensors, f, metadata={"format": "pt"})


def test_weights_changed_after_planning_are_refused(ckpt, tmp_path):
    from cache.store import Store
    from interp.core.errors import CheckpointError
    from sweeps.execute import run_checkpoint_units
    from sweeps.plan import plan_units

    units = plan_units([ckpt], ["pressure"], banks=["moral"], cfg=_cfg())
    _bump_weights(ckpt)  # a live training directory writes a new step in place
    with pytest.raises(CheckpointError, match="changed since the sweep was planned"):
        run_checkpoint_units(ckpt, units, tmp_path / "cache", _cfg())
    assert not Store(tmp_path / "cache").units(), "a unit was written under the old fingerprint"


def test_weights_changed_during_load_are_refused(ckpt, monkeypatch):
    import interp.model.loading as loading
    from interp.core.errors import CheckpointError

    real = loading.load_hf_model

    def load_then_change(info, dtype="float32", **kw):
        model = real(info, dtype, **kw)
        _bump_weights(ckpt)  # the writer finishes while we were reading
        return model

    monkeypatch.setattr(loading, "load_hf_model", load_then_change)
    with pytest.raises(CheckpointError, match="changed while loading"):
        loading.load(ckpt, threads=1)


# ---------------------------------------------------------------- 3. stale units are kept out of the readers


def test_stale_units_are_reported_not_read_and_pruned(bi_model, tmp_path):
    from cache.store import Store
    from sweeps.probe import run_predict
    from sweeps.probe_data import probe_datasets

    tree = tmp_path / "tree"
    a = Path(shutil.copytree(bi_model, tree / "step1"))
    b = Path(shutil.copytree(bi_model, tree / "step2"))
    _bump_weights(a, 0.5)
    out = tmp_path / "OUT"
    _sweep([tree], out, cfg=_cfg8())
    before = run_predict(out, target="step2", n_shuffles=2, with_readout=False)
    _bump_weights(b, 2.0)  # the target changes: its old unit is now stale
    _sweep([tree], out, cfg=_cfg8())
    after_fresh = run_predict(
        _sweep_and_return(tree, tmp_path / "FRESH"), target="step2", n_shuffles=2, with_readout=False
    )
    assert len(Store(out / "cache").units("pressure")) == 3
    with pytest.warns(UserWarning, match="1 stale unit"):
        data = probe_datasets(out, "pressure", "planted")
    assert sorted(d.checkpoint for d in data) == ["step1", "step2"], "one row per stale unit"
    with pytest.warns(UserWarning, match="stale"):
        got = run_predict(out, target="step2", n_shuffles=2, with_readout=False)
    pd.testing.assert_series_equal(got["I"], after_fresh["I"])
    assert not np.allclose(got["I"], before["I"]), "planted test: the target's change moves I"
    _sweep([tree], out, prune=True, cfg=_cfg8())
    assert len(Store(out / "cache").units("pressure")) == 2
    assert Store(out / "cache").current_units("pressure")[1] == []


def test_another_subsample_of_the_same_bank_replaces_the_unit(bi_model, tmp_path):
    """--max-items 6 then 8 into one OUT: the 6-item unit is stale, probe reads the 8-item one only."""
    from interp.studies.base import RunConfig
    from sweeps.probe_data import probe_datasets

    out = tmp_path / "OUT"
    _sweep([bi_model], out, cfg=RunConfig(max_items=6, threads=1))
    _sweep([bi_model], out, cfg=_cfg8())
    with pytest.warns(UserWarning, match="1 stale unit"):
        data = probe_datasets(out, "pressure", "planted")
    assert len(data) == 1 and len(np.unique(data[0].groups)) == 8


def _sweep_and_return(tree, out):
    _sweep([tree], out, cfg=_cfg8())
    return out


def _cfg8():
    from interp.studies.base import RunConfig

    return RunConfig(max_items=8, threads=1)


def test_without_manifest_the_newest_unit_per_slot_is_used(bi_model, tmp_path):
    """An OUT written before current.json existed: newest file per slot, and the rule is stated."""
    from cache.store import Store

    ck = Path(shutil.copytree(bi_model, tmp_path / "ck"))
    out = tmp_path / "OUT"
    _sweep([ck], out)
    _bump_weights(ck)
    _sweep([ck], out)
    store = Store(out / "cache")
    store.manifest_path.unlink()
    newest = max(store.units("pressure"), key=lambda p: p.stat().st_mtime_ns)
    with pytest.warns(UserWarning, match="newest file per slot"):
        current, stale = store.current_units("pressure")
    assert current == [newest] and len(stale) == 1


# ---------------------------------------------------------------- 4. bank identity is content


def _bank_files(tmp_path: Path) -> tuple[Path, Path]:
    other = [dict(r, item_id=f"x{i}", text=r["text"].replace("I ", "We ")) for i, r in enumerate(PRESSURE)]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "mybank.jsonl", tmp_path / "b" / "mybank.jsonl"
    a.write_bytes(jsonl(PRESSURE))
    b.write_bytes(jsonl(other))
    return a, b


def test_two_banks_with_one_stem_stay_apart(bi_model, tmp_path):
    from interp.studies.base import RunConfig

    a, b = _bank_files(tmp_path)
    tables = _sweep([bi_model], tmp_path / "OUT", banks=[str(a), str(b)], cfg=RunConfig(threads=1))
    summary = tables["pressure_summary"]
    slot = summary[summary["readout"] == "slot"]
    assert slot["bank"].nunique() == 2, slot["bank"].tolist()
    assert slot["n_items"].tolist() == [3, 3]
    trials = tables["pressure_trials"]
    assert trials.groupby("bank")["item_id"].nunique().tolist() == [3, 3]
    assert len(trials) == 2 * len(trials[trials["bank"] == trials["bank"].iloc[0]])


def test_same_bank_twice_is_used_once(bi_model, tmp_path):
    from sweeps.plan import plan_units

    a, _ = _bank_files(tmp_path)
    with pytest.warns(UserWarning, match="used once"):
        units = plan_units([bi_model], ["pressure"], banks=[str(a), str(a)], cfg=_cfg())
    assert len(units) == 1


def test_analyze_refuses_two_units_on_one_merge_key(bi_model, tmp_path):
    from dataclasses import replace

    from interp.core.errors import ConfigError
    from sweeps.api import check_unit_keys
    from sweeps.plan import plan_units

    a, b = _bank_files(tmp_path)
    units = plan_units([bi_model], ["pressure"], banks=[str(a), str(b)], cfg=_cfg())
    clash = [units[0], replace(units[1], identity=replace(units[1].identity, bank=units[0].identity.bank))]
    with pytest.raises(ConfigError, match="share checkpoint"):
        check_unit_keys(clash)


# ---------------------------------------------------------------- 5. checksums on unit bodies


def _damage_dataset(unit: Path, name: str) -> None:
    with h5py.File(unit, "r") as f:
        ds = f[name]
        offset, nbytes = ds.id.get_offset(), ds.id.get_storage_size()
    assert offset is not None and nbytes > 8
    with open(unit, "r+b") as fh:
        fh.seek(offset + nbytes // 2)
        fh.write(b"\x7b\x7c\x7d\x7e")


def test_damaged_body_is_reported_and_recomputed(earlier_out, tmp_path, cli):
    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    reference = pd.read_csv(out / "results" / "pressure_trials.csv")
    (unit,) = sorted((out / "cache").rglob("*.h5"))
    _damage_dataset(unit, "arrays/resid")
    res = cli("probe", out, "--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "2")
    assert_one_line_error(res, unit.name, "arrays/resid", "checksum")
    with pytest.warns(UserWarning, match="checksum mismatch"):
        _sweep([_model_of(out)], out)
    pd.testing.assert_frame_equal(pd.read_csv(out / "results" / "pressure_trials.csv"), reference)
    assert len(list((out / "cache").rglob(".*.damaged-*"))) == 1, "the damaged file is kept aside"
    assert cli("probe", out, "--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "2").code == 0


def _model_of(out: Path) -> Path:
    return Path(json.loads((out / "lineage.json").read_text())["checkpoints"][0]["path"])


def test_damaged_table_column_is_refused(earlier_out, tmp_path):
    from cache.store import DamagedUnit, read_unit

    out = Path(shutil.copytree(earlier_out, tmp_path / "OUT"))
    (unit,) = sorted((out / "cache").rglob("*.h5"))
    _damage_dataset(unit, "tables/trials/p_planted")
    with pytest.raises(DamagedUnit, match="tables/trials/p_planted"):
        read_unit(unit)
