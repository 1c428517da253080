"""Every reduced-precision sweep measures its own precision (precision.csv, the report's warning).

Planted: a sample table whose deviations are known gives exactly those statistics; noise
planted into the float32 re-scores of a sweep produces the warning in the log and the report,
while the clean mixed-bf16 sweep of the same model produces none, and a float32 sweep writes
no precision.csv at all."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from cache import Store, read_unit

from _tolerance import option_bounds
from analyses.precision import BOUNDS, summarize_sample, within_bounds
from interp.runner.options import ScoringConfig
from interp.studies.base import RunConfig
from sweeps.api import run_sweep


def test_summary_of_a_planted_sample():
    # two prompts x two choices; prompt 1's float32 ranking is reversed (one flip)
    sample = pd.DataFrame(
        {
            "call": [0, 0, 0, 0],
            "kind": ["options"] * 4,
            "index": [0, 0, 1, 1],
            "choice": [0, 1, 0, 1],
            "logp": np.log([0.6, 0.4, 0.55, 0.45]),
            "logp_fp32": np.log([0.6, 0.4, 0.45, 0.55]),
        }
    )
    row = summarize_sample(sample)
    assert row["n"] == 2 and row["n_choices"] == 4 and row["argmax_flips"] == 1
    np.testing.assert_allclose(row["max_abs_dp"], 0.10, atol=1e-12)
    np.testing.assert_allclose(row["mean_abs_dp"], 0.05, atol=1e-12)
    np.testing.assert_allclose(row["max_abs_dlogp"], abs(np.log(0.55) - np.log(0.45)), atol=1e-12)
    assert not within_bounds(row)
    same = sample.assign(logp_fp32=sample["logp"])
    clean = summarize_sample(same)
    assert clean["argmax_flips"] == 0 and clean["max_abs_dp"] == 0 and within_bounds(clean)
    # just inside / just outside the max bound
    assert within_bounds({**clean, "max_abs_dp": BOUNDS["max_abs_dp"]})
    assert not within_bounds({**clean, "max_abs_dp": BOUNDS["max_abs_dp"] * 1.01})


def _sweep(model, out, dtype, tie_guard=0.0):
    # the audit's own tests run unguarded: on a tiny random model nearly every verdict is a near-tie,
    # which the tie guard (default 0.1) would re-score in float32, leaving nothing to measure
    cfg = RunConfig(max_items=2, dtype=dtype, scoring=ScoringConfig(tie_guard=tie_guard))
    return run_sweep([model], studies=["pressure"], out=out, banks=["moral"], cfg=cfg, progress=False)


def test_clean_mixed_sweep_measures_itself_without_warning(tiny_models, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="interp.sweep")
    tables = _sweep(tiny_models["llama"], tmp_path / "mixed", "mixed-bf16")
    prec = pd.read_csv(tmp_path / "mixed" / "results" / "precision.csv")
    assert (
        len(prec) == 1
        and prec["dtype"].item() == "mixed-bf16"
        and tables["precision"]["n"].tolist() == prec["n"].tolist()
    )
    assert prec["n"].item() >= 32  # 2 items: 60 trials (32 sampled) + 2 first turns (both)
    assert 0 < prec["max_abs_dlogp"].item() < 0.1 and bool(prec["within_bounds"].item())
    assert prec["tie_guard"].item() == 0 and prec["tie_guarded"].item() == 0  # this sweep ran unguarded
    assert np.isnan(prec["medium_operand_error"].item())  # no "medium" matmul in mixed-bf16
    unit = read_unit(Store(tmp_path / "mixed" / "cache").units("pressure")[0])
    assert not unit.tables["trials"]["tie_guarded"].any() and not unit.tables["first_turn"]["tie_guarded"].any()
    assert "precision:" not in caplog.text
    report = (tmp_path / "mixed" / "report.md").read_text()
    assert "Precision of this run against float32" in report and "Warning" not in report
    # float32: no sample, no precision.csv
    _sweep(tiny_models["llama"], tmp_path / "fp32", "float32")
    assert not (tmp_path / "fp32" / "results" / "precision.csv").exists()


def test_guarded_sweep_reports_its_guard(tiny_models, tmp_path):
    _sweep(tiny_models["llama"], tmp_path / "g", "mixed-bf16", tie_guard=0.5)
    prec = pd.read_csv(tmp_path / "g" / "results" / "precision.csv")
    # 2 items: 60 trials + 2 first turns scored; this random model's verdicts lie within 0.5 of a tie
    assert prec["tie_guard"].item() == 0.5 and 0 < prec["tie_guarded"].item() <= 62
    # the tables flag the same prompts row by row (the unit's count and the rows come by separate paths)
    unit = read_unit(Store(tmp_path / "g" / "cache").units("pressure")[0])
    flagged = sum(int(unit.tables[t]["tie_guarded"].sum()) for t in ("trials", "first_turn"))
    assert flagged == prec["tie_guarded"].item()  # (control: test_clean_mixed_sweep_... flags no row)


def test_precision_csv_records_what_medium_did_on_the_scoring_machine(tiny_models, tmp_path, monkeypatch):
    """mixed-bf16-medium computes differently where "medium" rounds operands to bf16
    (interp.runner.mixed.make_mixed_medium), so each unit records the probe of the machine that
    scored it: a sweep under an emulated rounding kernel records bf16's 1e-3; the same sweep on
    this machine's own kernel (the control) records this machine's probe."""
    from interp.runner import mixed
    from interp.runner.rounding_kernels import bf16_operand_kernels

    monkeypatch.setattr(mixed, "_warned", set())
    with bf16_operand_kernels(), pytest.warns(UserWarning, match="but the MLP's gate / up projections stay float32"):
        _sweep(tiny_models["llama"], tmp_path / "rounding", "mixed-bf16-medium")
    rounding = pd.read_csv(tmp_path / "rounding" / "results" / "precision.csv")["medium_operand_error"].item()
    np.testing.assert_allclose(rounding, 1e-3, rtol=0.01)  # 1.001 -> 1.0: (1.001 - 1) / 1.001
    _sweep(tiny_models["llama"], tmp_path / "own", "mixed-bf16-medium")
    own = pd.read_csv(tmp_path / "own" / "results" / "precision.csv")["medium_operand_error"].item()
    assert own == pytest.approx(mixed.medium_operand_error("cpu"), rel=1e-9)


def test_planted_deviation_warns_in_log_and_report(tiny_models, tmp_path, caplog, monkeypatch):
    import interp.runner.scoring as scoring

    real = scoring.score_options

    def noisy(lm, *args, **kw):  # the float32 reference (a model re-scoring) gets noise of ~0.5 nats
        out = real(lm, *args, **kw)
        from interp.runner.precision import _busy

        if _busy:
            rng = np.random.default_rng(0)
            out.logp = out.logp + rng.normal(0, 0.5, out.logp.shape)
        return out

    monkeypatch.setattr(scoring, "score_options", noisy)
    caplog.set_level(logging.WARNING, logger="interp.sweep")
    _sweep(tiny_models["llama"], tmp_path / "noisy", "mixed-bf16")
    prec = pd.read_csv(tmp_path / "noisy" / "results" / "precision.csv")
    assert not bool(prec["within_bounds"].item()) and prec["max_abs_dp"].item() > BOUNDS["max_abs_dp"]
    assert "precision:" in caplog.text and "against float32" in caplog.text
    assert "**Warning: 1 unit(s) exceed the bounds" in (tmp_path / "noisy" / "report.md").read_text()


@pytest.mark.parametrize("dtype", ["bfloat16"])
def test_plain_reduced_precision_loads_a_float32_reference(tiny_models, dtype):
    import interp
    from interp.runner.precision import precision_audit
    from interp.runner.scoring import score_options

    prompts = [f"Item {i}: is it wrong? FINAL:" for i in range(40)]
    lm = interp.load(tiny_models["llama"], dtype=dtype)
    with precision_audit(lm, seed=3) as audit:
        low = score_options(lm, prompts, ["wrong", "fine"]).logp
    table = audit.table()
    assert table["index"].nunique() == 32 and len(table) == 64  # max(32, 2% of 40) prompts x 2 options
    ref = score_options(interp.load(tiny_models["llama"]), prompts, ["wrong", "fine"]).logp
    idx = table["index"].to_numpy()
    # the sample re-scored alone (32 prompts) against all 40 scored together: other batches, other
    # matmul blockings, so float32 error apart (seen: 3.0e-07 under xdist), not bit-equal; the bound
    # is the float32 one derived from the model (tests/_tolerance.py), far below bfloat16's error
    bound = option_bounds(tiny_models["llama"], lm.tokenizer, prompts, ["wrong", "fine"])
    np.testing.assert_allclose(table["logp_fp32"], ref[idx, table["choice"].to_numpy()], rtol=0, atol=bound.sum_logp)
    assert np.abs(low - ref).max() > 10 * bound.sum_logp  # control: bfloat16's own error is far larger
    np.testing.assert_array_equal(table["logp"], low[idx, table["choice"].to_numpy()])
    with precision_audit(lm, seed=3) as again:  # seeded: the same sample
        score_options(lm, prompts, ["wrong", "fine"])
    assert again.table()["index"].tolist() == table["index"].tolist()


def test_the_sample_reaches_32_per_unit_not_per_call(tiny_models):
    """Four calls of 12 prompts (a classify unit's shape): 2% of each call (one prompt), then a
    top-up from the unsampled rest to 32 in all, not 32 per call (which re-scored all 48)."""
    import interp
    from interp.runner.precision import precision_audit
    from interp.runner.scoring import score_options

    lm = interp.load(tiny_models["llama"], dtype="mixed-bf16")
    calls = [[f"Post {c}-{i}: is the reply sycophantic? FINAL:" for i in range(12)] for c in range(4)]
    cfg = ScoringConfig(tie_guard=0.0)

    def unit(seed):
        with precision_audit(lm, seed=seed) as audit:
            logps = [score_options(lm, prompts, ["yes", "no"], cfg=cfg).logp for prompts in calls]
        return audit.table(), logps

    table, logps = unit(5)
    pairs = table[["call", "index"]].drop_duplicates()
    assert len(pairs) == 32 and len(table) == 64  # 32 prompts x 2 choices
    assert sorted(pairs["call"].unique()) == [0, 1, 2, 3] and pairs.groupby("call").size().max() <= 12
    # the reduced side of each pair is what that call returned for that prompt
    got = [logps[c][i, k] for c, i, k in table[["call", "index", "choice"]].itertuples(index=False)]
    np.testing.assert_array_equal(table["logp"], got)
    assert unit(5)[0].equals(table) and not unit(6)[0][["call", "index"]].equals(table[["call", "index"]])
    # a block with fewer than 32 prompts has all of them re-scored, each once
    with precision_audit(lm, seed=5) as small:
        for prompts in calls[:2]:
            score_options(lm, prompts[:5], ["yes", "no"], cfg=cfg)
    assert len(small.table()[["call", "index"]].drop_duplicates()) == 10 and len(small.table()) == 20
