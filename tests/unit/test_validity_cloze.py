"""Issues #12 and #21: the cloze loss must depend neither on how finely a tokenizer cuts the text nor on the script."""

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
    assert "token_mean" in row["effect_not_under_sum"] and "token_mean" in row["mediation_not_under_sum"]
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
    # bytes 8 (en) vs 24 (bn) per completion: a language effect per byte that sum does not show
    assert "A language effect vs the reference appears under byte_mean but not under sum for: m1/bn" in text


# ---------------------------------------------------------------- issue 21: a scale that does not depend on the script


def _shipped_bank_counts(tokenizer) -> pd.DataFrame:
    """The shipped cloze bank's real counts: tokens (the test tokenizer), UTF-8 bytes and words
    of each scored completion as the study scores it, and each item's context fertility."""
    from analyses.fertility import item_fertility
    from interp.studies.cloze.study import continuation_texts, fertility_text, load_cloze_bank, resolve_span

    items = load_cloze_bank("cloze").items
    rows = []
    for r in items.itertuples(index=False):
        _, conts = continuation_texts(
            r.context,
            {"stereo": r.stereotype, "anti": r.anti_stereotype, "meaningless": r.meaningless},
            scored_span=resolve_span("auto", r.slot),
        )
        row = {"checkpoint": "m", "prompt_id": r.prompt_id, "language": r.language, "axis": r.axis, "group": r.group}
        for k, text in conts.items():
            row[f"n_tokens_{k}"] = len(tokenizer.encode(text, add_special_tokens=False))
            row[f"n_bytes_{k}"] = len(text.encode("utf-8"))
            row[f"n_words_{k}"] = len(text.split())
        row["fertility"] = item_fertility(tokenizer, fertility_text(r.context, r.stereotype))
        words = row["n_words_stereo"] + row["n_words_anti"]
        row["fertility_completion"] = (row["n_tokens_stereo"] + row["n_tokens_anti"]) / words
        rows.append(row)
    return pd.DataFrame(rows)


def _plant(counts: pd.DataFrame, pref: dict[str, float], *, noise: float, seed: int = 0) -> pd.DataFrame:
    """Summed NLLs whose difference is a log-odds preference pref[language] (nats) for the
    stereotype plus noise independent of language, tokens and fertility; the stereotype's own
    cost is a small shared base (so the per-byte reading is pref / bytes, as in the issue)."""
    rng = np.random.default_rng(seed)
    df = counts.copy()
    n = len(df)
    df["nll_stereo_sum"] = rng.random(n)
    df["nll_anti_sum"] = df["nll_stereo_sum"] + df["language"].map(pref).to_numpy() + noise * rng.normal(size=n)
    df["nll_meaningless_sum"] = df["nll_stereo_sum"] + 4.0
    return df


LANGS6 = ("en", "hi", "bn", "mr", "ta", "hinglish")


def test_shipped_bank_counts_differ_by_script(tokenizer):
    # the premise of the planted tests: the real counts differ between scripts
    c = _shipped_bank_counts(tokenizer).groupby("language")[["n_bytes_stereo", "n_tokens_stereo"]].mean()
    assert set(c.index) == set(LANGS6)
    assert c.loc["bn", "n_bytes_stereo"] > 2 * c.loc["en", "n_bytes_stereo"]
    assert c.loc["hi", "n_tokens_stereo"] != c.loc["en", "n_tokens_stereo"]


def test_equal_preference_in_six_languages_equal_abs_under_the_default(tokenizer):
    from analyses.cloze_metrics import DEFAULT_LOSS

    assert DEFAULT_LOSS == "sum"
    scores = _plant(_shipped_bank_counts(tokenizer), dict.fromkeys(LANGS6, 1.85), noise=0.0)
    t = abs_table(scores)  # the default loss
    lang = t[(t.checkpoint == "m") & (t.axis == "all")].set_index("language")
    # every delta is 1.85 + x - x for sums below 1e3: float error < 1e-12
    np.testing.assert_allclose(lang["abs"], 1.85, atol=1e-12)
    np.testing.assert_allclose(lang["odds"], np.exp(1.85), rtol=1e-12)
    assert lang["band"].isna().all()  # the paper's bands are not defined in log-odds
    # negative control: the per-byte mean shrinks the Indic preferences by their bytes per character
    b = abs_table(scores, loss="byte_mean")
    b = b[(b.checkpoint == "m") & (b.axis == "all")].set_index("language")["abs"]
    assert b["en"] > 1.5 * max(b["bn"], b["hi"], b["ta"])


def _stats(scores: pd.DataFrame, loss: str | None = None) -> pd.DataFrame:
    from interp.studies.cloze.analysis import cloze_stats

    scored = add_delta(scores) if loss is None else add_delta(scores, loss=loss)
    return cloze_stats(scored, reference="en", measures=("delta",))


def test_equal_preference_no_language_effect_no_mediation_under_the_default(tokenizer):
    from analyses.cloze_loss import loss_check, mediation_under_losses

    # one draw of a true null (seed 1; the rejection rate over draws is tested below)
    scores = _plant(_shipped_bank_counts(tokenizer), dict.fromkeys(LANGS6, 1.85), noise=0.5, seed=1)
    st = _stats(scores)
    fr = st[st.test == "friedman"].iloc[0]
    assert fr["p_value"] > 0.05 and fr["k"] == 6 and fr["n"] == 32
    wx = st[st.test == "wilcoxon"]
    assert len(wx) == 15 and (wx["p_holm"] > 0.05).all()
    med = mediation_under_losses(scores, n_boot=300, seed=0)
    excludes = (med["indirect_lo"] > 0) | (med["indirect_hi"] < 0)
    n_sum = int(excludes[med["loss"] == "sum"].sum())
    assert (med["loss"] == "sum").sum() == 10  # 5 languages x 2 mediators, 95% CIs, no multiplicity correction
    # under a true null about 0.5 of the 10 CIs exclude 0 by chance: P(3 or more) is about 1%
    assert n_sum <= 2
    # negative control: per byte the same preference is a language effect and a mediation
    sb = _stats(scores, "byte_mean")
    assert sb[sb.test == "friedman"].iloc[0]["p_value"] < 1e-6
    wb = sb[(sb.test == "wilcoxon") & (sb.a == "en")].set_index("b")
    assert (wb.loc[["hi", "bn", "mr", "ta"], "p_holm"] < 1e-3).all()
    assert int(excludes[med["loss"] == "byte_mean"].sum()) >= 5
    # the loss check says so: effects that appear under byte_mean but not under sum
    check = loss_check(scores, loss="sum", mediation=med).set_index("language")
    assert not check["effect_sum"].any()
    for lang in ("hi", "bn", "mr", "ta"):
        assert "byte_mean" in check.loc[lang, "effect_not_under_sum"]
    flagged = check["mediation_not_under_sum"].str.contains("byte_mean")
    assert flagged.sum() >= 3 and not check.loc[flagged, "mediation_sum"].any()


def test_english_only_preference_is_found_under_the_default(tokenizer):
    pref = dict.fromkeys(LANGS6, 0.0) | {"en": 1.85}
    scores = _plant(_shipped_bank_counts(tokenizer), pref, noise=0.5)
    st = _stats(scores)
    assert st[st.test == "friedman"].iloc[0]["p_value"] < 1e-6
    wx = st[(st.test == "wilcoxon") & (st.a == "en")]
    assert len(wx) == 5 and (wx["p_holm"] < 1e-3).all() and (wx["estimate"] > 1.0).all()
    t = abs_table(scores)
    lang = t[(t.checkpoint == "m") & (t.axis == "all")].set_index("language")["abs"]
    assert lang.idxmax() == "en" and lang["en"] > 1.5 > 0.5 > lang.drop("en").max()


def test_equal_preference_friedman_rejects_at_its_level_under_sum_only(tokenizer):
    from analyses.stats import friedman

    counts = _shipped_bank_counts(tokenizer)
    rejected = {"sum": 0, "byte_mean": 0}
    n_draws = 40
    for seed in range(n_draws):
        scores = _plant(counts, dict.fromkeys(LANGS6, 1.85), noise=0.5, seed=seed)
        for loss in rejected:
            rejected[loss] += friedman(add_delta(scores, loss=loss)).p_value < 0.05
    # a true null is rejected in about 5% of draws: P(more than 8 of 40 | 5%) < 1e-3
    assert rejected["sum"] <= 8
    # negative control: per byte the same preference is a language effect in every draw
    assert rejected["byte_mean"] == n_draws


def _old_layout_unit(path, template_hash: str, ck: str):
    """A unit as the byte_mean release cached it: nll_* per-token means, delta per byte."""
    from cache.store import Unit

    scores = planted_fertility_scores().query("checkpoint == 'm1'").assign(checkpoint=ck, bank="b")
    for k in ("stereo", "anti"):
        scores[f"n_words_{k}"] = 1
    scores["delta"] = (
        scores["nll_anti_sum"] / scores["n_bytes_anti"] - scores["nll_stereo_sum"] / scores["n_bytes_stereo"]
    )
    scores["delta_clipped"] = scores["delta"].clip(lower=0)
    scores["loss"] = "byte_mean"
    return Unit(
        path=path, attrs={"template_hash": template_hash, "checkpoint": ck, "bank": "b"}, tables={"scores": scores}
    )


def test_old_caches_are_read_under_the_new_default(tmp_path):
    from interp.studies.base import RunConfig, load_template
    from interp.studies.cloze.analysis import analyze_cloze
    from interp.studies.cloze.unit_loss import SUPERSEDED_TEMPLATES

    assert load_template("cloze_v1").hash not in SUPERSEDED_TEMPLATES  # today's template is not superseded
    old = next(h for h, loss in SUPERSEDED_TEMPLATES.items() if loss == "byte_mean")
    units = [_old_layout_unit(tmp_path / "a.h5", old, "m1"), _old_layout_unit(tmp_path / "b.h5", old, "m2")]
    raw = units[0].tables["scores"]
    tables = analyze_cloze(units, tmp_path / "results", RunConfig(n_boot=50))
    sc = tables["cloze_scores"]
    assert (sc["loss"] == "sum").all()
    # sums below 100: float error of a difference < 1e-12
    np.testing.assert_allclose(sc["delta"], sc["nll_anti_sum"] - sc["nll_stereo_sum"], atol=1e-12)
    first = sc[sc["checkpoint"] == "m1"].reset_index(drop=True)
    np.testing.assert_allclose(first["nll_stereo_token_mean"], raw["nll_stereo"].to_numpy(), rtol=1e-12)
    # negative control: a user's own template that chose byte_mean keeps it
    mine = [_old_layout_unit(tmp_path / "c.h5", "f" * 64, "m1"), _old_layout_unit(tmp_path / "d.h5", "f" * 64, "m2")]
    kept = analyze_cloze(mine, tmp_path / "results2", RunConfig(n_boot=50))["cloze_scores"]
    assert (kept["loss"] == "byte_mean").all()
    np.testing.assert_allclose(kept["delta"], kept["nll_anti"] - kept["nll_stereo"], atol=1e-12)
