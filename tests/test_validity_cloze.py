"""Issue #12, item 3: the cloze loss must not depend on how finely a tokenizer cuts the text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses.cloze_metrics import abs_table, add_delta


def _row(ck, lang, pid, stereo_sum, anti_sum, n_tok, n_bytes, **extra):
    return {
        "checkpoint": ck,
        "language": lang,
        "prompt_id": pid,
        "axis": "caste",
        "group": "g",
        "nll_stereo_sum": stereo_sum,
        "nll_anti_sum": anti_sum,
        "nll_meaningless_sum": stereo_sum + 5,
        "nll_stereo": stereo_sum / n_tok,
        "nll_anti": anti_sum / n_tok,
        "nll_meaningless": (stereo_sum + 5) / n_tok,
        "n_tokens_stereo": n_tok,
        "n_tokens_anti": n_tok,
        "n_tokens_meaningless": n_tok,
        "n_bytes_stereo": n_bytes,
        "n_bytes_anti": n_bytes,
        "n_bytes_meaningless": n_bytes,
        **extra,
    }


def test_equal_preference_over_1_vs_12_tokens_gives_equal_delta_under_sum_and_byte_mean():
    # the same text (24 bytes) under two tokenizers: one token vs twelve; the same
    # log-likelihood preference of 3 nats for the stereotype
    rows = [_row("coarse", "bn", f"p{i}", 10.0 + i, 13.0 + i, 1, 24) for i in range(4)]
    rows += [_row("fine", "bn", f"p{i}", 10.0 + i, 13.0 + i, 12, 24) for i in range(4)]
    scores = pd.DataFrame(rows)
    by = {
        loss: add_delta(scores, loss=loss).groupby("checkpoint")["delta"].mean()
        for loss in ("sum", "byte_mean", "token_mean")
    }
    assert by["sum"]["coarse"] == pytest.approx(by["sum"]["fine"]) == pytest.approx(3.0)
    assert by["byte_mean"]["coarse"] == pytest.approx(by["byte_mean"]["fine"]) == pytest.approx(3.0 / 24)
    assert by["token_mean"]["coarse"] == pytest.approx(12 * by["token_mean"]["fine"])
    t = abs_table(scores, loss="byte_mean").set_index(["checkpoint", "language", "axis"])["abs"]
    assert t[("coarse", "bn", "all")] == pytest.approx(t[("fine", "bn", "all")])


def planted_fertility_scores(seed: int = 0, n: int = 60) -> pd.DataFrame:
    """English completions are 1 token, Bengali ones as many tokens as the item's fertility
    (about 12 per word, varying by item); the summed preference has the same distribution in
    both languages and does not depend on fertility."""
    rng = np.random.default_rng(seed)
    rows = []
    for ck, scale in (("m1", 1.0), ("m2", 0.8)):
        for i in range(n):
            for lang in ("en", "bn"):
                fert = 1.2 + 0.2 * rng.random() if lang == "en" else 8 + 8 * rng.random()
                n_tok = 1 if lang == "en" else round(fert)
                pref = scale * (2.0 + 0.3 * rng.normal())
                base = 5 + rng.random()
                rows.append(
                    _row(
                        ck,
                        lang,
                        f"p{i:02d}",
                        base,
                        base + pref,
                        n_tok,
                        8 if lang == "en" else 24,
                        fertility=fert,
                        fertility_completion=float(n_tok),
                    )
                )
    return pd.DataFrame(rows)


def test_mediation_through_fertility_vanishes_under_sum_and_byte_mean_not_token_mean():
    from analyses.cloze_loss import mediation_under_losses

    med = mediation_under_losses(
        planted_fertility_scores(),
        losses=("sum", "byte_mean", "token_mean"),
        mediators=("fertility", "fertility_completion"),
        n_boot=300,
        seed=0,
    )
    assert {"loss", "mediator"} <= set(med.columns)
    assert set(med["mediator"]) == {"context_fertility", "completion_fertility"}
    pooled = med[med["checkpoint"] == "pooled"].set_index(["loss", "mediator"])
    for loss in ("sum", "byte_mean"):
        for mediator in ("context_fertility", "completion_fertility"):
            r = pooled.loc[(loss, mediator)]
            scale = 1.0 if loss == "sum" else 1 / 8
            assert abs(r["indirect"]) < 0.15 * scale, (loss, mediator)
            assert r["indirect_lo"] <= 0 <= r["indirect_hi"], (loss, mediator)
    for mediator in ("context_fertility", "completion_fertility"):
        r = pooled.loc[("token_mean", mediator)]
        assert r["indirect"] < -0.1 and r["indirect_hi"] < 0, mediator


def test_loss_check_flags_what_appears_under_token_mean_only():
    from analyses.cloze_loss import loss_check

    scores = planted_fertility_scores()
    check = loss_check(scores, loss="sum", reference="en", n_boot=200, seed=0)
    row = check[(check["checkpoint"] == "pooled") & (check["language"] == "bn")].iloc[0]
    assert row["loss"] == "sum"
    assert row["abs_token_mean"] < 0.5 < row["abs_sum"]
    assert row["effect_token_mean_only"] and row["mediation_token_mean_only"]
    # under the default the Bengali/English effect is real (bytes differ by script), but the
    # mediation is not
    check_b = loss_check(scores, loss="byte_mean", reference="en", n_boot=200, seed=0)
    row_b = check_b[(check_b["checkpoint"] == "pooled") & (check_b["language"] == "bn")].iloc[0]
    assert row_b["mediation_token_mean_only"] and not row_b["mediation_byte_mean"]


def test_report_says_what_appears_under_token_mean_only(tmp_path):
    from analyses.cloze_loss import loss_check
    from sweeps.report import write_report

    (tmp_path / "results").mkdir()
    loss_check(planted_fertility_scores(), loss="sum", n_boot=100).to_csv(
        tmp_path / "results" / "cloze_loss_check.csv", index=False
    )
    text = write_report(tmp_path).read_text()
    assert "appears under token_mean but not under sum for: " in text and "pooled/bn" in text
