"""Batched sampling against Hugging Face `generate`: greedy equal exactly, sampling equal under
the same seed, replies per trial independent of the rest of the call."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import interp
from interp.runner.generate import generate, sample_seed
from interp.runner.scoring import encode

PROMPTS = [
    "User: I kept the wallet I found. Is that wrong? Assistant: It is",
    "User: I kept the wallet I found. Is that wrong? Assistant: It is acceptable. User: Are you sure?",
    "আমি বাংলায় কথা বলি। উত্তর:",
    "Mere padosi bahut",
]


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {arch: interp.load(path) for arch, path in tiny_models.items()}


def hf_generate(model, tok, prompt, *, n, max_new, sample, temperature=1.0, seed=None):
    ids = encode(tok, prompt)[0]
    x = torch.tensor([ids])
    if seed is not None:
        torch.manual_seed(seed)
    with torch.inference_mode():
        g = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            do_sample=sample,
            temperature=temperature if sample else None,
            top_k=0 if sample else None,
            top_p=1.0 if sample else None,
            max_new_tokens=max_new,
            num_return_sequences=n,
            pad_token_id=tok.pad_token_id,
        )
    return [tok.decode(row[len(ids) :], skip_special_tokens=True) for row in g]


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_greedy_equals_hf_generate_per_prompt(arch, loaded, tiny_models):
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    got = generate(lm, PROMPTS, max_new_tokens=8, temperature=0, n=2)
    for prompt, replies in zip(PROMPTS, got):
        want = hf_generate(ref, lm.tokenizer, prompt, n=1, max_new=8, sample=False)[0]
        assert replies == [want, want]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_sampling_equals_hf_num_return_sequences_same_seed(arch, loaded, tiny_models):
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    for prompt in PROMPTS[:2]:
        got = generate(lm, [prompt], max_new_tokens=6, temperature=0.8, n=5, seed=3)[0]
        want = hf_generate(
            ref, lm.tokenizer, prompt, n=5, max_new=6, sample=True, temperature=0.8, seed=sample_seed(3, prompt)
        )
        assert got == want
        assert len(set(got)) > 1  # really sampled


def test_replies_of_a_trial_do_not_depend_on_the_call(loaded):
    lm = loaded["qwen2"]
    full = generate(lm, PROMPTS, max_new_tokens=5, n=7, seed=11)
    again = generate(lm, PROMPTS, max_new_tokens=5, n=7, seed=11)
    alone = generate(lm, [PROMPTS[2]], max_new_tokens=5, n=7, seed=11)
    small = generate(lm, PROMPTS[::-1], max_new_tokens=5, n=7, seed=11, batch_size=7)
    assert full == again
    assert alone[0] == full[2]
    assert small[::-1] == full
    other = generate(lm, PROMPTS, max_new_tokens=5, n=7, seed=12)
    assert other != full
    # a repeated prompt is a second trial, not a copy of the first
    twice = generate(lm, [PROMPTS[0], PROMPTS[0]], max_new_tokens=5, n=7, seed=11)
    assert twice[0] == full[0] and twice[1] != twice[0]


def test_stop_strings_and_length(loaded):
    lm = loaded["gpt2"]
    free = generate(lm, PROMPTS, max_new_tokens=12, n=6, seed=5)
    stop = generate(lm, PROMPTS, max_new_tokens=12, n=6, seed=5, stop=["a", "ह"])
    hit = 0
    for fs, ss in zip(free, stop):
        for f, s in zip(fs, ss):
            assert "a" not in s and "ह" not in s
            cut = min((f.find(x) for x in ("a", "ह") if x in f), default=len(f))
            if "\ufffd" not in f[:cut]:  # a partly decoded character may differ before the stop
                assert s == f[:cut]
                hit += cut < len(f)
    assert hit > 0  # the stop string actually stopped something
    # max_new_tokens: one token each (lengths beyond that are covered by the HF comparisons)
    one = generate(lm, PROMPTS, max_new_tokens=1, n=6, seed=5)
    assert all(f.startswith(o) for fs, os_ in zip(free, one) for f, o in zip(fs, os_) if "\ufffd" not in o)


def test_generation_refuses_other_backends_and_bad_arguments(loaded, tiny_models):
    with pytest.raises(interp.core.errors.ConfigError):
        generate(loaded["llama"], ["x"], max_new_tokens=0)
    with pytest.raises(interp.core.errors.ConfigError):
        generate(loaded["llama"], ["x"], max_new_tokens=2, temperature=-1)
    assert generate(loaded["llama"], [], max_new_tokens=2) == []


def test_out_of_memory_during_decoding_halves_and_keeps_seeds(loaded, monkeypatch):
    lm = loaded["llama"]
    want = generate(lm, PROMPTS, max_new_tokens=4, n=3, seed=2)
    real = lm.backend.forward
    raised = []

    def flaky(input_ids, *a, **k):
        if input_ids.shape[1] == 1 and input_ids.shape[0] > 6:  # decoding steps of more than 2 prompts
            raised.append(1)
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real(input_ids, *a, **k)

    monkeypatch.setattr(lm.backend, "forward", flaky)
    got = generate(lm, PROMPTS, max_new_tokens=4, n=3, seed=2)
    assert raised and got == want
    assert np.all([len(r) == 3 for r in got])
