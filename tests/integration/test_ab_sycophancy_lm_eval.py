"""The A/B study equals lm-eval 0.4.13's `sycophancy_on_nlp_survey` task on the same file: the
task's own YAML (lm_eval/tasks/model_written_evals/sycophancy/), its dataset replaced by a local
JSON file in the model-written-evals layout (interp.integrations.lm_eval_tasks.write_sycophancy_task), run with lm-eval's HFLM on a tiny local checkpoint
(no hub). Same prompts to the character; every answer's log-likelihood within its token count
times the one-token bound derived from float error (tests/_tolerance.py); lm-eval's `acc` equal
to the study's argmax_rate, and the matching rate computed from lm-eval's log-likelihoods equal
to the study's within the bound those log-likelihoods carry."""

from __future__ import annotations

import os

import numpy as np
import pytest

from _tolerance import bounds_for

pytest.importorskip("lm_eval")

TASK = "interp_local_sycophancy_on_nlp_survey"


@pytest.fixture(scope="module")
def both(tiny_models, tmp_path_factory):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import interp
    from interp.integrations.lm_eval_tasks import write_sycophancy_task
    from interp.studies import get_study
    from interp.studies.base import RunConfig, load_template
    from interp.testing import write_sample_sets

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    root = tmp_path_factory.mktemp("mwe")
    data = write_sample_sets(root / "data")["sycophancy_on_nlp_survey"]
    assert write_sycophancy_task(root / "tasks", data) == TASK
    model = tiny_models["llama"]
    ref = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={model},dtype=float32,device=cpu",
        tasks=[TASK],
        task_manager=TaskManager(include_path=str(root / "tasks")),
        log_samples=True,
        batch_size=4,
    )
    spec = get_study("ab_sycophancy")
    bank = spec.load_bank(data)
    template = load_template(spec.default_template)
    payload = spec.run_unit(interp.load(str(model)), bank, template, (1,), RunConfig())
    return model, bank, template, ref, payload.tables["scores"].assign(checkpoint="tiny", bank=bank.name)


def _bound(model, samples) -> float:
    """The bound on one answer's summed log-likelihood: its tokens (+ 1: a token straddling the
    join) times the one-token bound of this model on these texts."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    texts = [a[0] + a[1] for s in samples for a in s["arguments"]]
    n_tok = max(len(tok(a[0] + a[1]).input_ids) - len(tok(a[0]).input_ids) for s in samples for a in s["arguments"])
    return bounds_for(model, texts, tokens=n_tok + 1).sum_logp


def _theirs(ref) -> tuple[list, np.ndarray]:
    samples = sorted(ref["samples"][TASK], key=lambda s: s["doc_id"])
    return samples, np.array([[float(r[0][0]) for r in s["resps"]] for s in samples])  # [item, (matching, other)]


def test_prompts_and_loglikelihoods_equal_lm_eval(both):
    from transformers import AutoTokenizer

    from interp.studies.ab_sycophancy.study import build_rows

    model, bank, template, ref, ours = both
    samples, theirs = _theirs(ref)
    assert len(samples) == len(bank) == len(ours) == 10
    rows = build_rows(bank, template, AutoTokenizer.from_pretrained(model), chat=False, swap=False)
    for s, row in zip(samples, rows.itertuples(index=False)):
        assert [a[0] for a in s["arguments"]] == [row.prompt] * 2  # the same prompt, to the character
        assert [a[1] for a in s["arguments"]] == list(row.answers)  # matching answer first, as written
    bound = _bound(model, samples)
    np.testing.assert_allclose(ours["logp_match"], theirs[:, 0], rtol=0, atol=bound)
    np.testing.assert_allclose(ours["logp_not"], theirs[:, 1], rtol=0, atol=bound)
    # a negative control: the other answer's log-likelihood differs from the matching one's beyond it
    assert np.abs(ours["logp_match"].to_numpy() - theirs[:, 1]).max() > bound


def test_rates_equal_lm_eval(both):
    from analyses.ab_metrics import ab_summary

    model, bank, template, ref, ours = both
    samples, theirs = _theirs(ref)
    bound = _bound(model, samples)
    (row,) = ab_summary(ours, n_boot=200).itertuples(index=False)
    assert row.n_items == 10
    # argmax: every item's two log-likelihoods lie further apart than both errors together, so the
    # choices (and lm-eval's acc, their mean) are decided the same way
    assert np.abs(theirs[:, 0] - theirs[:, 1]).min() > 2 * bound
    assert row.argmax_rate == ref["results"][TASK]["acc,none"] == np.mean([s["acc"] for s in samples])
    # the matching rate from lm-eval's log-likelihoods: the softmax over the two answers, whose
    # slope in their difference is at most 1/4, so it is off by at most 2 bounds / 4
    p = 1.0 / (1.0 + np.exp(theirs[:, 1] - theirs[:, 0]))
    np.testing.assert_allclose(row.matching_rate, p.mean(), rtol=0, atol=bound / 2)
    # a negative control: the rate of the other answer (a swapped sign) is outside that bound
    assert abs(row.matching_rate - (1 - p).mean()) > bound / 2
