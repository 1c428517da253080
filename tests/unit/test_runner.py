"""Runner: backends agree with a plain HF forward; prefix reuse and joins are exact."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import interp
from _tolerance import bounds_for, continuation_tokens
from interp.runner.scoring import ScoringConfig, score_continuations, score_options, split_continuation

PROMPTS = [
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Are you sure? FINAL:",
    "User: I kept the wallet I found. Is that wrong? Assistant: It is wrong. User: Okay, thanks. FINAL:",
    "User: I kept the wallet I found. Is that wrong? Assistant: It is acceptable. User: I think it was wrong. FINAL:",
    "আমি বাংলায় কথা বলি। উত্তর:",
    "मैं हिंदी बोलता हूँ। उत्तर:",
]
OPTIONS = ["wrong", "acceptable"]


def plain_logprob(model, tok, context, continuation):
    """Reference: one full forward of context+continuation, batch 1, sum of token log-probs."""
    ids, split = split_continuation(tok, context, continuation)
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(x).logits.float()
    lp = torch.log_softmax(logits[0], -1)
    return sum(lp[i - 1, ids[i]].item() for i in range(split, len(ids)))


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {arch: interp.load(path) for arch, path in tiny_models.items()}


# every (context, continuation) these tests score, for the derived tolerances (tests/_tolerance.py)
PAIRS = (
    [(p, v + o) for p in PROMPTS for o in OPTIONS for v in ("", " ")]
    + [("The people of this town are", c) for c in (" hardworking", " lazy", " triangular")]
    + [("The quick brown fox jumps over the lazy dog and then", c) for c in (" runs", " sleeps quietly", " x")]
    + [("ये लोग बहुत ", c) for c in ("मेहनती होते हैं।", "आलसी होते हैं।", "तिकोने होते हैं।")]
    + [
        (f"Read the post and label it carefully with one word. Post {i}: আমি বাংলায় কথা বলি। Label:", " " + o)
        for i in range(3)
        for o in ("Invalidation", "Escalation", "Support")
    ]
    + [("উত্তর:", o) for o in ("অবৈধ কাজ", "ঠিক আছে")]
)


@pytest.fixture(scope="module")
def tol(tiny_models, tokenizer):
    """Per architecture: float32 bounds for one token's log-prob, a residual entry, and sums."""
    texts = [c + o for c, o in PAIRS]
    return {
        arch: bounds_for(path, texts, tokens=continuation_tokens(tokenizer, PAIRS))
        for arch, path in tiny_models.items()
    }


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_option_scores_match_plain_forward(arch, loaded, tiny_models, tol):
    lm = loaded[arch]
    ref_model = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    scores = score_options(lm, PROMPTS, OPTIONS, cfg=ScoringConfig(variants="space", min_shared_prefix=4))
    for n, prompt in enumerate(PROMPTS):
        ref = [
            np.logaddexp(
                plain_logprob(ref_model, lm.tokenizer, prompt, o),
                plain_logprob(ref_model, lm.tokenizer, prompt, " " + o),
            )
            for o in OPTIONS
        ]
        np.testing.assert_allclose(scores.logp[n], ref, atol=tol[arch].sum_logp)
        np.testing.assert_allclose(scores.probs[n].sum(), 1.0, atol=1e-9)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_residual_equals_hidden_states(arch, loaded, tiny_models, tol):
    lm = loaded[arch]
    layer = lm.default_layer
    assert layer == (3 * lm.n_layers) // 4
    ref_model = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    scores = score_options(lm, PROMPTS, OPTIONS, layers=[layer, 0], cfg=ScoringConfig(min_shared_prefix=4))
    for n, prompt in enumerate(PROMPTS):
        ids = lm.tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            hs = ref_model(torch.tensor([ids]), output_hidden_states=True).hidden_states
        torch.testing.assert_close(
            torch.from_numpy(scores.resid[layer][n]), hs[layer][0, -1], atol=tol[arch].resid, rtol=0
        )
        torch.testing.assert_close(torch.from_numpy(scores.resid[0][n]), hs[0][0, -1], atol=tol[arch].resid, rtol=0)


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
@pytest.mark.parametrize("backend", ["transformer_lens", "nnsight"])
def test_backends_agree(arch, backend, loaded, tiny_models, tol):
    ref = loaded[arch]
    other = interp.load(tiny_models[arch], backend=backend)
    layer = ref.default_layer
    cfg = ScoringConfig(batch_size=3)
    a = score_options(ref, PROMPTS, OPTIONS, layers=[layer], cfg=cfg)
    b = score_options(other, PROMPTS, OPTIONS, layers=[layer], cfg=cfg)
    np.testing.assert_allclose(a.logp, b.logp, atol=tol[arch].sum_logp)
    np.testing.assert_allclose(a.resid[layer], b.resid[layer], atol=tol[arch].resid)
    items = [("The people of this town are", [" hardworking", " lazy", " triangular"])]
    ca = score_continuations(ref, items, layers=[layer])
    cb = score_continuations(other, items, layers=[layer])
    np.testing.assert_allclose(ca.sum_logp, cb.sum_logp, atol=tol[arch].sum_logp)
    np.testing.assert_allclose(ca.resid[layer], cb.resid[layer], atol=tol[arch].resid)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_prefix_reuse_equals_no_reuse(arch, loaded, tol):
    lm = loaded[arch]
    layer = lm.default_layer
    on = ScoringConfig(prefix_reuse=True, min_shared_prefix=4, batch_size=2)
    off = ScoringConfig(prefix_reuse=False, batch_size=5)
    a = score_options(lm, PROMPTS, OPTIONS, layers=[layer], cfg=on)
    b = score_options(lm, PROMPTS, OPTIONS, layers=[layer], cfg=off)
    np.testing.assert_allclose(a.logp, b.logp, atol=tol[arch].sum_logp)
    np.testing.assert_allclose(a.resid[layer], b.resid[layer], atol=tol[arch].resid)
    items = [
        ("The quick brown fox jumps over the lazy dog and then", [" runs", " sleeps quietly", " x"]),
        ("ये लोग बहुत ", ["मेहनती होते हैं।", "आलसी होते हैं।", "तिकोने होते हैं।"]),
    ]
    ca = score_continuations(lm, items, layers=[layer], cfg=on)
    cb = score_continuations(lm, items, layers=[layer], cfg=off)
    np.testing.assert_allclose(ca.sum_logp, cb.sum_logp, atol=tol[arch].sum_logp)
    np.testing.assert_allclose(ca.resid[layer], cb.resid[layer], atol=tol[arch].resid)


def test_prefix_tree_is_formed(loaded):
    from interp.runner.engine import EngineConfig, plan_tree
    from interp.runner.scoring import encode, Seq

    tok = loaded["llama"].tokenizer
    seqs = [Seq(ids=tuple(encode(tok, p)[0]), reads=[(len(encode(tok, p)[0]) - 1, (1,))]) for p in PROMPTS]
    roots = plan_tree(seqs, EngineConfig(min_shared_prefix=4))
    assert len(roots) == 3  # the English prompts share a root; Bengali and Hindi stand alone
    top = next(r for r in roots if len(r.children) > 0)
    assert top.start == 0 and not top.ends
    # prompts 0 and 1 share "... It is wrong. User:" beyond what prompt 2 shares: a child node
    inner = [c for c in top.children if c.children]
    assert len(inner) == 1 and sorted(i for c in inner[0].children for i in c.ends) == [0, 1]
    assert [i for c in top.children if not c.children for i in c.ends] == [2]
    assert inner[0].start == top.end < inner[0].end
    # each read lands in the node that computes its position, once
    for node in (top, *top.children, *inner[0].children):
        assert all(node.start <= p < node.end for p in node.read_pos)
    # without reuse every sequence is its own root
    assert len(plan_tree(seqs, EngineConfig(prefix_reuse=False))) == len(seqs)


def test_nested_prefix_reuse_with_multi_token_options(loaded, tol):
    """Shared instruction -> each prompt -> its multi-token option forms: equal to no reuse."""
    lm = loaded["llama"]
    prompts = [
        f"Read the post and label it carefully with one word. Post {i}: আমি বাংলায় কথা বলি। Label:" for i in range(3)
    ]
    opts = ["Invalidation", "Escalation", "Support"]
    layer = lm.default_layer
    a = score_options(lm, prompts, opts, layers=[layer], cfg=ScoringConfig(min_shared_prefix=4, batch_size=4))
    b = score_options(lm, prompts, opts, layers=[layer], cfg=ScoringConfig(prefix_reuse=False))
    np.testing.assert_allclose(a.logp, b.logp, atol=tol["llama"].sum_logp)
    np.testing.assert_allclose(a.resid[layer], b.resid[layer], atol=tol["llama"].resid)


def test_capture_all_positions_through_the_tree(loaded, tiny_models, tol):
    lm = loaded["gpt2"]
    ref_model = AutoModelForCausalLM.from_pretrained(tiny_models["gpt2"]).eval()
    s = score_options(
        lm, PROMPTS[:3], OPTIONS, layers=[1], cfg=ScoringConfig(min_shared_prefix=4, capture_all_positions=True)
    )
    for n, prompt in enumerate(PROMPTS[:3]):
        ids = lm.tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            hs = ref_model(torch.tensor([ids]), output_hidden_states=True).hidden_states[1][0]
        torch.testing.assert_close(torch.from_numpy(s.resid[1][n]), hs, atol=tol["gpt2"].resid, rtol=0)


@pytest.mark.parametrize(
    "context,cont",
    [
        ("The answer is", " wrong"),
        ("The answer is ", "wrong"),
        ("আমি বাংলায়", " কথা বলি"),
        ("मैं हिंदी", " बोलता हूँ"),
        ("நான் தமிழ்", " பேசுகிறேன்"),
        ("আমি বাংলায় কথা ব", "লি"),  # split inside a word: tokens may straddle the boundary
    ],
)
def test_joins_cover_every_continuation_character(loaded, context, cont):
    tok = loaded["llama"].tokenizer
    ids, split = split_continuation(tok, context, cont)
    assert 0 < split < len(ids)
    assert tok.decode(ids) == context + cont
    # the continuation tokens decode to a suffix that contains all of the continuation
    tail = tok.decode(ids[split:])
    assert tail.endswith(cont.strip()) and len(tail) >= len(cont.strip())
    assert (context + cont).endswith(tail)


def test_multi_token_options_scored_as_continuations(loaded, tiny_models, tol):
    lm = loaded["qwen2"]
    ref_model = AutoModelForCausalLM.from_pretrained(tiny_models["qwen2"]).eval()
    opts = ["অবৈধ কাজ", "ঠিক আছে"]  # several tokens each under the tiny tokenizer
    prompt = "উত্তর:"
    s = score_options(lm, [prompt], opts, cfg=ScoringConfig(variants="exact"))
    for k, o in enumerate(opts):
        assert len(split_continuation(lm.tokenizer, prompt, o)[0]) - split_continuation(lm.tokenizer, prompt, o)[1] > 1
        np.testing.assert_allclose(
            s.logp[0, k], plain_logprob(ref_model, lm.tokenizer, prompt, o), atol=tol["qwen2"].sum_logp
        )


def test_empty_option_refused(loaded):
    with pytest.raises(interp.core.errors.ConfigError):
        score_options(loaded["llama"], ["x"], ["wrong", " "])


def test_prompt_longer_than_context_window_is_refused(tmp_path, tokenizer):
    from interp.testing import build_tiny_model

    path = build_tiny_model(tmp_path / "short", "llama", n_layers=2, d_model=32, tokenizer=tokenizer)
    import json

    cfg = json.loads((path / "config.json").read_text())
    cfg["max_position_embeddings"] = 16  # rotary: the window is a config number, not a weight shape
    (path / "config.json").write_text(json.dumps(cfg))
    lm = interp.load(path)
    with pytest.raises(interp.core.errors.ConfigError, match=r"item-7: \d+ tokens exceed the context window .*\(16"):
        score_options(lm, ["word " * 40], ["yes", "no"], names=["item-7"])
