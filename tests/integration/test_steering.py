"""Steering at resid_pre: alpha 0 changes nothing, a known direction moves the read the known way,
prefix reuse / batching / backend do not change steered numbers."""

import numpy as np
import pandas as pd
import pytest

import interp
from interp.core.errors import ConfigError
from interp.runner.scoring import ScoringConfig, score_options
from interp.runner.steering import Steering, direction_from_file, steering

from _tolerance import bounds_for, option_bounds

PROMPTS = [
    "User: Is this wrong? I think that was wrong. Are you sure? Assistant: FINAL:",
    "The account says I returned the wallet I found. Okay, thanks. FINAL:",
    "User: Is this wrong? I think that was acceptable. Assistant: FINAL:",
]
OPTIONS = [" wrong", " acceptable"]
EXACT = ScoringConfig(variants="exact", min_shared_prefix=4, min_saved_tokens=1)


@pytest.fixture(scope="module")
def lm(tiny_models):
    return interp.load(tiny_models["llama"])


def verdict_direction(lm):
    """Unembedding difference of the two verdict tokens: adding it raises wrong over acceptable."""
    tok = lm.tokenizer
    ids = [tok.encode(o, add_special_tokens=False) for o in OPTIONS]
    assert all(len(i) == 1 for i in ids), ids
    W = lm.backend.lm_head.weight.detach().double().numpy()
    return W[ids[0][0]] - W[ids[1][0]]


def margin(lm, steer=None, cfg=EXACT, layers=None):
    if steer is None:
        s = score_options(lm, PROMPTS, OPTIONS, cfg=cfg, layers=layers)
    else:
        with steering(lm, steer):
            s = score_options(lm, PROMPTS, OPTIONS, cfg=cfg, layers=layers)
    return s.logp[:, 0] - s.logp[:, 1], s


@pytest.mark.parametrize("positions", ["all", "read"])
def test_alpha_zero_is_exactly_unsteered(lm, positions):
    base, s0 = margin(lm, layers=[2])
    v = np.random.default_rng(0).normal(size=lm.d_model)
    got, s1 = margin(lm, Steering(layer=2, direction=v, alpha=0.0, positions=positions), layers=[2])
    np.testing.assert_array_equal(s1.logp, s0.logp)
    np.testing.assert_array_equal(s1.resid[2], s0.resid[2])


@pytest.mark.parametrize("positions", ["all", "read"])
def test_known_direction_moves_the_read(lm, positions):
    v = verdict_direction(lm)
    v = v / np.linalg.norm(v)
    last = lm.n_layers - 1
    base, _ = margin(lm)
    up, _ = margin(lm, Steering(layer=last, direction=v, alpha=8.0, positions=positions))
    down, _ = margin(lm, Steering(layer=last, direction=v, alpha=-8.0, positions=positions))
    assert (up > base).all() and (down < base).all(), (down, base, up)
    # and the hook is gone afterwards
    np.testing.assert_array_equal(margin(lm)[0], base)


@pytest.mark.parametrize("positions", ["all", "read"])
def test_steered_numbers_do_not_depend_on_prefix_reuse_or_batch(tiny_models, lm, positions):
    v = np.random.default_rng(1).normal(size=lm.d_model)
    steer = Steering(layer=1, direction=v, alpha=3.0, positions=positions)
    a, _ = margin(lm, steer, cfg=EXACT)
    b, _ = margin(lm, steer, cfg=ScoringConfig(variants="exact", prefix_reuse=False, batch_size=1))
    # a margin is a difference of two option log-probs: twice the one-option bound, measured steered
    tol = 2 * option_bounds(tiny_models["llama"], lm.tokenizer, PROMPTS, OPTIONS, steer=(1, 3.0 * v)).sum_logp
    np.testing.assert_allclose(a, b, rtol=0, atol=tol)
    base, _ = margin(lm)
    assert np.abs(a - base).max() > 10 * tol  # it did something, far beyond float error


@pytest.mark.parametrize("positions", ["all", "read"])
def test_steering_through_packed_forwards_equals_padded_ones(tiny_models, lm, positions):
    """Packed forwards (interp.runner.packed) hand the block [1, N, d]: the read position of each
    row must still be found there. Steered scores equal the padded engine's, and differ from the
    unsteered ones (the steering acted)."""
    from interp.runner.engine import Engine, EngineConfig, Seq

    ids = [tuple(lm.tokenizer(p)["input_ids"]) for p in PROMPTS]
    seqs = [Seq(ids=x, reads=[(len(x) - 1, (5, 6))]) for x in ids]
    v = np.random.default_rng(4).normal(size=lm.d_model)
    out, stats = {}, {}
    for mode in (True, False, "plain"):
        eng = Engine(lm.backend, [], EngineConfig(packed=mode is True), lm.tokenizer.pad_token_id)
        if mode == "plain":
            out[mode] = eng.run(seqs)
            continue
        with steering(lm, Steering(layer=1, direction=v, alpha=3.0, positions=positions)):
            out[mode] = eng.run(seqs)
        stats[mode] = eng.stats.packed_forwards
    assert stats[True] > 0 and stats[False] == 0
    a, b, plain = ([r.logp[0] for r in out[k]] for k in (True, False, "plain"))
    tol = bounds_for(tiny_models["llama"], PROMPTS, steer=(1, 3.0 * v)).logp  # one token's log-prob
    np.testing.assert_allclose(a, b, rtol=0, atol=tol)
    assert np.abs(np.array(a) - np.array(plain)).max() > 10 * tol


def test_read_positions_steer_less_than_all(lm):
    v = np.random.default_rng(2).normal(size=lm.d_model)
    base, _ = margin(lm)
    read, _ = margin(lm, Steering(layer=0, direction=v, alpha=5.0, positions="read"))
    every, _ = margin(lm, Steering(layer=0, direction=v, alpha=5.0, positions="all"))
    assert not np.allclose(read, every) and not np.allclose(read, base)


@pytest.mark.parametrize("backend", ["transformer_lens", "nnsight"])
def test_other_backends_steer_the_same(tiny_models, lm, backend):
    v = np.random.default_rng(3).normal(size=lm.d_model)
    other = interp.load(tiny_models["llama"], backend=backend)
    tol = 2 * option_bounds(tiny_models["llama"], lm.tokenizer, PROMPTS, OPTIONS, steer=(2, 4.0 * v)).sum_logp
    for positions in ("all", "read"):
        steer = Steering(layer=2, direction=v, alpha=4.0, positions=positions)
        np.testing.assert_allclose(margin(other, steer)[0], margin(lm, steer)[0], rtol=0, atol=tol)


def test_bad_directions_are_one_line_errors(lm, tmp_path):
    with pytest.raises(ConfigError, match="d_model is 64"):
        with steering(lm, Steering(layer=1, direction=np.ones(3), alpha=1.0)):
            pass
    with pytest.raises(ConfigError, match="outside 0..3"):
        with steering(lm, Steering(layer=9, direction=np.ones(64), alpha=1.0)):
            pass
    with pytest.raises(ConfigError, match="does not exist"):
        direction_from_file(tmp_path / "none.npy")
    np.save(tmp_path / "d.npy", np.full(64, 2.0))
    np.testing.assert_allclose(np.linalg.norm(direction_from_file(tmp_path / "d.npy")), 1.0)


def test_sweep_option_alpha_zero_reproduces_tables_and_changes_identity(tiny_models, tmp_path):
    from cache import Store, read_unit
    from interp.studies.base import RunConfig
    from sweeps.api import run_sweep

    kw = dict(studies=["pressure"], banks=["factual"], progress=False, report=False)
    cfg = RunConfig(max_items=2, n_boot=10)
    run_sweep([tiny_models["llama"]], out=tmp_path / "plain", cfg=cfg, **kw)
    v = np.random.default_rng(4).normal(size=64)
    steer = Steering(layer=2, direction=v, alpha=0.0, positions="read", source="test")
    run_sweep(
        [tiny_models["llama"]],
        out=tmp_path / "s0",
        cfg=RunConfig(max_items=2, n_boot=10, steering=steer.to_options()),
        **kw,
    )
    for table in ("pressure_trials.csv", "pressure_summary.csv"):
        a = pd.read_csv(tmp_path / "plain" / "results" / table)
        b = pd.read_csv(tmp_path / "s0" / "results" / table)
        pd.testing.assert_frame_equal(a, b)
    u0 = read_unit(Store(tmp_path / "plain" / "cache").units()[0])
    u1 = read_unit(Store(tmp_path / "s0" / "cache").units()[0])
    assert u0.attrs["settings_hash"] != u1.attrs["settings_hash"] and '"alpha": 0.0' in u1.attrs["steering"]
    np.testing.assert_array_equal(u0.arrays["resid"], u1.arrays["resid"])


def _cli(monkeypatch, *argv):
    import sys

    from interp.cli import main

    monkeypatch.setattr(sys, "argv", ["interp", *map(str, argv)])
    try:
        main()
    except SystemExit as e:
        return e.code
    return 0


def test_interp_steer_from_probe_direction(tiny_models, tmp_path, monkeypatch):
    """sweep -> probe (saves weights) -> steer: delta / S_op against alpha; alpha 0 equals the sweep."""
    out = tmp_path / "out"
    assert (
        _cli(
            monkeypatch,
            "sweep",
            tiny_models["llama"],
            "--study",
            "pressure",
            "--bank",
            "factual",
            "--max-items",
            "4",
            "--out",
            out,
            "--quiet",
        )
        == 0
    )
    assert (
        _cli(monkeypatch, "probe", out, "--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "0")
        == 0
    )
    assert (
        _cli(
            monkeypatch,
            "steer",
            out,
            "--study",
            "pressure",
            "--direction",
            "probe:planted",
            "--layer",
            "3",
            "--alpha",
            "-2..2:2",
            "--n-boot",
            "50",
            "--quiet",
        )
        == 0
    )
    table = pd.read_csv(out / "results" / "steer_pressure.csv")
    slot = table[table["readout"] == "slot"].sort_values("alpha")
    assert list(slot["alpha"]) == [-2.0, 0.0, 2.0] and (slot["units"] == "sd").all() and (slot["scale"] > 0).all()
    plain = pd.read_csv(out / "results" / "pressure_summary.csv")
    np.testing.assert_array_equal(slot.loc[slot["alpha"] == 0, "delta"].to_numpy(), plain["delta"].to_numpy())
    assert slot["delta"].nunique() == 3  # steering changed the pressure metrics
    assert (out / "figures" / "steer_pressure.png").is_file()
    # the sweep's own results were not touched by the steered reruns
    pd.testing.assert_frame_equal(pd.read_csv(out / "results" / "pressure_summary.csv"), plain)
    assert _cli(monkeypatch, "steer", out, "--direction", "probe:flipped", "--layer", "3") == 2  # no such weights
