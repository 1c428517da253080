"""The prefix tree run level by level: equal to a plain HF forward, every shared token computed
once, an injected out-of-memory error loses nothing, tensors live on the model's device."""

import contextlib
import sys

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from transformers import AutoModelForCausalLM

import interp
from _tolerance import bounds_for, continuation_tokens, option_bounds
from interp.runner.engine import Engine, EngineConfig, Seq
from interp.runner.scoring import (
    ScoringConfig,
    encode,
    score_continuations,
    score_options,
    split_continuation,
)

# instruction -> item -> planted verdict -> turn -> option form: a five-level tree whose nodes
# have different lengths, so one level's rows continue parents of different lengths
INSTR = "Read the account and answer with one word. "
ITEMS = ["I kept the wallet I found.", "আমি বাংলায় কথা বলি। তুমি কেমন আছ?", "Mere padosi bahut mehnati hain."]
VERDICTS = ["It is wrong.", "It is acceptable."]
TURNS = [" User: Are you sure? FINAL:", " User: Okay, thanks. FINAL:", " User: I think that was wrong. FINAL:"]
PROMPTS = [f"{INSTR}User: {it} Assistant: {v}{t}" for it in ITEMS for v in VERDICTS for t in TURNS]
OPTIONS = ["wrong", "acceptable", "অবৈধ কাজ"]  # the last has several tokens


def plain_logprob(model, tok, context, continuation):
    ids, split = split_continuation(tok, context, continuation)
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits.float()[0], -1)
    return sum(lp[i - 1, ids[i]].item() for i in range(split, len(ids)))


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {arch: interp.load(path) for arch, path in tiny_models.items()}


@pytest.fixture(scope="module")
def tol(tiny_models, tokenizer):
    """Per architecture: float32 bounds derived from the model over these texts (tests/_tolerance.py)."""
    conts = [v + o for o in OPTIONS for v in ("", " ")] + [" acceptable indeed", " তিকোনে"]
    pairs = [(p, c) for p in PROMPTS for c in conts]
    texts = [p + c for p, c in pairs] + [PROMPTS[-1] * 3]  # the longest sequence a test runs
    n = continuation_tokens(tokenizer, pairs)
    return {arch: bounds_for(path, texts, tokens=max(n, 3)) for arch, path in tiny_models.items()}


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
@pytest.mark.parametrize("batch_size", [3, 64])  # 3: a level splits over batches of mixed parents
def test_deep_tree_equals_plain_forward(arch, batch_size, loaded, tiny_models, tol):
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    layer = lm.default_layer
    s = score_options(lm, PROMPTS, OPTIONS, layers=[layer], cfg=ScoringConfig(variants="space", batch_size=batch_size))
    for n, prompt in enumerate(PROMPTS):
        want = [
            np.logaddexp(plain_logprob(ref, lm.tokenizer, prompt, o), plain_logprob(ref, lm.tokenizer, prompt, " " + o))
            for o in OPTIONS
        ]
        np.testing.assert_allclose(s.logp[n], want, atol=tol[arch].sum_logp)
        with torch.no_grad():
            hs = ref(torch.tensor([encode(lm.tokenizer, prompt)[0]]), output_hidden_states=True).hidden_states
        np.testing.assert_allclose(s.resid[layer][n], hs[layer][0, -1].numpy(), atol=tol[arch].resid)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_continuations_through_a_deep_tree(arch, loaded, tiny_models, tol):
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    items = [(p, [" wrong", " acceptable indeed", " তিকোনে"]) for p in PROMPTS[:7]]
    c = score_continuations(lm, items, cfg=ScoringConfig(batch_size=4))
    want = [plain_logprob(ref, lm.tokenizer, ctx, k) for ctx, ks in items for k in ks]
    np.testing.assert_allclose(c.sum_logp, want, atol=tol[arch].sum_logp)


def test_every_tree_token_computed_once(loaded, tol):
    lm = loaded["llama"]
    seqs = [
        Seq(ids=tuple(encode(lm.tokenizer, p)[0]), reads=[(len(encode(lm.tokenizer, p)[0]) - 1, (5, 6))])
        for p in PROMPTS
    ]
    # a forward costing more than any padding: one forward per level (everything fits one batch)
    eng = Engine(lm.backend, [], EngineConfig(forward_cost_tokens=10**6), lm.tokenizer.pad_token_id)
    eng.run(seqs)
    st = eng.stats
    assert st.tokens == st.unique_tokens < st.plain_tokens
    assert st.depth >= 4  # instruction, item, verdict, turn
    assert st.forwards == st.depth
    eng_plain = Engine(lm.backend, [], EngineConfig(prefix_reuse=False), lm.tokenizer.pad_token_id)
    a, b = eng.run(seqs), eng_plain.run(seqs)
    assert eng_plain.stats.tokens == st.plain_tokens
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.logp[0], y.logp[0], atol=tol["llama"].logp)


def test_short_segments_can_be_recomputed(loaded, tol):
    lm = loaded["llama"]
    seqs = [
        Seq(ids=tuple(encode(lm.tokenizer, p)[0]), reads=[(len(encode(lm.tokenizer, p)[0]) - 1, (5,))]) for p in PROMPTS
    ]
    fine = Engine(lm.backend, [], EngineConfig(), lm.tokenizer.pad_token_id)
    coarse = Engine(lm.backend, [], EngineConfig(min_shared_prefix=12), lm.tokenizer.pad_token_id)
    a, b = fine.run(seqs), coarse.run(seqs)
    assert coarse.stats.depth < fine.stats.depth and coarse.stats.tokens > fine.stats.tokens
    np.testing.assert_allclose([r.logp[0] for r in a], [r.logp[0] for r in b], atol=tol["llama"].logp)


class _OOMOnce:
    """Wraps a backend: a forward with more than `limit` rows raises CUDA-style OOM."""

    def __init__(self, backend, limit):
        self.inner, self.limit, self.raised = backend, limit, 0
        self.name, self.supports_prefix_cache, self.model = backend.name, backend.supports_prefix_cache, backend.model

    def forward(self, input_ids, *args, **kwargs):
        if input_ids.shape[0] > self.limit:
            self.raised += 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return self.inner.forward(input_ids, *args, **kwargs)


def test_out_of_memory_halves_the_batch_and_loses_nothing(loaded, tol):
    lm = loaded["qwen2"]
    seqs = [
        Seq(
            ids=tuple(encode(lm.tokenizer, p)[0]),
            reads=[(len(encode(lm.tokenizer, p)[0]) - 1, (5, 7))],
            capture_pos=len(encode(lm.tokenizer, p)[0]) - 1,
            ext=[(9, 10, 11)],
        )
        for p in PROMPTS
    ]
    clean = Engine(lm.backend, [1], EngineConfig(), lm.tokenizer.pad_token_id).run(seqs)
    flaky = _OOMOnce(lm.backend, limit=2)
    eng = Engine(flaky, [1], EngineConfig(), lm.tokenizer.pad_token_id)
    got = eng.run(seqs)
    assert flaky.raised > 0 and eng.stats.oom_retries == flaky.raised
    assert len(got) == len(seqs)
    for x, y in zip(got, clean):
        assert not np.isnan(x.logp[0]).any()
        np.testing.assert_allclose(x.logp[0], y.logp[0], atol=tol["qwen2"].logp)
        np.testing.assert_allclose(x.ext_logp, y.ext_logp, atol=tol["qwen2"].sum_logp)
        np.testing.assert_allclose(x.resid[1], y.resid[1], atol=tol["qwen2"].resid)
    # a single row that still does not fit is a clear error, not a silent loss
    with pytest.raises(RuntimeError, match="out of memory .* single row"):
        Engine(_OOMOnce(lm.backend, limit=0), [], EngineConfig(), lm.tokenizer.pad_token_id).run(seqs[:2])


_FACTORIES = {
    torch.tensor,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.empty,
    torch.arange,
    torch.as_tensor,
    torch.randn,
    torch.rand,
    torch.eye,
    torch.linspace,
}


class _FixedDeviceSpy(TorchFunctionMode):
    """Records tensor factories called from interp/runner/ without an explicit device."""

    def __init__(self):
        super().__init__()
        self.bad = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FACTORIES and "device" not in kwargs:
            caller = sys._getframe(1)
            if "interp/runner/" in caller.f_code.co_filename:
                self.bad.append(f"{caller.f_code.co_filename}:{caller.f_lineno} {func.__name__}")
        return func(*args, **kwargs)


def test_engine_tensors_follow_the_model_device(loaded, monkeypatch):
    """No tensor factory in interp/runner/ runs without naming a device (the model's), and
    every tensor handed to the model is on the model's device."""
    lm = loaded["llama"]
    seen = []
    real = lm.backend.forward

    def spy(input_ids, attention_mask, read_index, layers, **kw):
        seen.append(
            {
                input_ids.device,
                attention_mask.device,
                read_index.device,
                *(v.device for v in kw.values() if isinstance(v, torch.Tensor)),
            }
        )
        return real(input_ids, attention_mask, read_index, layers, **kw)

    monkeypatch.setattr(lm.backend, "forward", spy)
    with _FixedDeviceSpy() as mode:
        score_options(lm, PROMPTS[:4], OPTIONS, layers=[1])
        score_continuations(lm, [(PROMPTS[0], [" wrong", " acceptable indeed"])], layers=[1])
        from interp.runner.generate import generate

        generate(lm, PROMPTS[:3], max_new_tokens=3, n=2)
    assert mode.bad == []
    dev = next(lm.backend.model.parameters()).device
    assert seen and all(s == {dev} for s in seen)


def test_the_device_spy_catches_a_fixed_device():
    """The spy above can fail: a factory without a device in a file under interp/runner/."""
    where = "/x/interp/runner/fake.py"
    with _FixedDeviceSpy() as mode:
        exec(compile("torch.zeros(3, device='cpu')\n", where, "exec"), {"torch": torch})  # noqa: S102 (a fixed snippet)
        assert mode.bad == []
        exec(compile("torch.zeros(3)\n", where, "exec"), {"torch": torch})  # noqa: S102 (a fixed snippet)
    assert len(mode.bad) == 1 and "fake.py" in mode.bad[0]


def test_hook_context_wraps_every_forward(loaded):
    lm = loaded["gpt2"]
    entered = []

    @contextlib.contextmanager
    def hooks():
        entered.append(1)
        yield

    calls = []
    real = lm.backend.forward
    lm.backend.forward = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    try:
        score_options(lm, PROMPTS[:5], OPTIONS, hooks=hooks)
    finally:
        del lm.backend.forward
    assert len(entered) == len(calls) > 1


def test_sliding_window_is_read_from_the_config():
    from types import SimpleNamespace

    from interp.runner.memory import footprint_of

    class M(torch.nn.Module):
        def __init__(self, **cfg):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.config = SimpleNamespace(
                num_hidden_layers=2, hidden_size=8, num_attention_heads=2, vocab_size=10, **cfg
            )

    assert (
        footprint_of(SimpleNamespace(model=M(sliding_window=512, layer_types=["sliding_attention"]))).sliding_window
        == 512
    )
    assert (
        footprint_of(SimpleNamespace(model=M(sliding_window=512, layer_types=["full_attention"]))).sliding_window
        is None
    )
    assert footprint_of(SimpleNamespace(model=M(sliding_window=None))).sliding_window is None


@pytest.mark.parametrize("arch", ["gpt2", "qwen2"])
def test_all_positions_through_a_deep_tree(arch, loaded, tiny_models, tol):
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    s = score_options(lm, PROMPTS[:8], OPTIONS, layers=[1], cfg=ScoringConfig(capture_all_positions=True, batch_size=3))
    for n, prompt in enumerate(PROMPTS[:8]):
        with torch.no_grad():
            hs = ref(torch.tensor([encode(lm.tokenizer, prompt)[0]]), output_hidden_states=True).hidden_states[1][0]
        np.testing.assert_allclose(s.resid[1][n], hs.numpy(), atol=tol[arch].resid)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_steering_hook_through_the_tree_equals_a_steered_plain_forward(arch, loaded, tiny_models):
    """The `hooks` context is where interventions go: adding a vector at a block's resid_pre in
    every forward of the tree equals the same hook on one plain forward of each prompt."""
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    d = lm.d_model
    direction = torch.linspace(-1, 1, d)

    def add_at(model_blocks):
        @contextlib.contextmanager
        def ctx():
            h = model_blocks[1].register_forward_pre_hook(
                lambda m, args, kwargs: (
                    ((args[0] + 3.0 * direction,) + args[1:], kwargs)
                    if args
                    else (args, {**kwargs, "hidden_states": kwargs["hidden_states"] + 3.0 * direction})
                ),
                with_kwargs=True,
            )
            try:
                yield
            finally:
                h.remove()

        return ctx

    steered = score_options(
        lm, PROMPTS[:6], OPTIONS, cfg=ScoringConfig(variants="exact"), hooks=add_at(lm.backend.blocks)
    )
    plain = score_options(lm, PROMPTS[:6], OPTIONS, cfg=ScoringConfig(variants="exact"))
    ref_blocks = ref.transformer.h if arch == "gpt2" else ref.model.layers
    with add_at(ref_blocks)():
        want = [[plain_logprob(ref, lm.tokenizer, p, o) for o in OPTIONS] for p in PROMPTS[:6]]
    bound = option_bounds(tiny_models[arch], lm.tokenizer, PROMPTS[:6], OPTIONS, steer=(1, 3.0 * direction.numpy()))
    np.testing.assert_allclose(steered.logp, want, rtol=0, atol=bound.sum_logp)
    assert np.abs(steered.logp - plain.logp).max() > 10 * bound.sum_logp  # the hook really acted


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_argmax_reads_equal_a_plain_forward(arch, loaded, tiny_models, tol):
    """`Seq.argmax`: the top token at each read (lm-eval's is_greedy) equals a plain forward's."""
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    ids = [tuple(encode(lm.tokenizer, p)[0]) for p in PROMPTS]
    seqs = [Seq(ids=s, reads=[(p, (s[p + 1],)) for p in range(len(s) - 4, len(s) - 1)], argmax=True) for s in ids]
    seqs.append(Seq(ids=ids[0], reads=[(len(ids[0]) - 2, (7,))]))  # argmax not asked: none given
    res = Engine(lm.backend, [], EngineConfig(batch_size=4), lm.tokenizer.pad_token_id).run(seqs)
    assert res[-1].argmax == []
    for s, r in zip(seqs[:-1], res):
        with torch.no_grad():
            logits = ref(torch.tensor([s.ids])).logits[0]
        assert r.argmax == [int(logits[p].argmax()) for p, _ in s.reads]
        want = torch.log_softmax(logits.float(), -1)
        np.testing.assert_allclose(
            [lp[0] for lp in r.logp], [want[p, t[0]].item() for p, t in s.reads], atol=tol[arch].logp
        )


def test_levels_split_where_padding_costs_more_than_a_forward(loaded, tol):
    """Batches are cut by cost (a forward = `forward_cost_tokens` padded tokens): rows of very
    different widths no longer share one padded forward, and the numbers do not change."""
    lm = loaded["llama"]
    ids = [encode(lm.tokenizer, p)[0] for p in PROMPTS]
    # one long sequence among short ones (no sharing: all roots of one level); padding every
    # short row to the long one's width is the waste
    seqs = [Seq(ids=tuple(x[:6]), reads=[(5, (5,))]) for x in ids[:6]]
    seqs.append(Seq(ids=tuple(ids[-1] * 3), reads=[(3 * len(ids[-1]) - 1, (5,))]))
    cheap = Engine(lm.backend, [], EngineConfig(prefix_reuse=False, forward_cost_tokens=4), lm.tokenizer.pad_token_id)
    dear = Engine(
        lm.backend, [], EngineConfig(prefix_reuse=False, forward_cost_tokens=10**6), lm.tokenizer.pad_token_id
    )
    a, b = cheap.run(seqs), dear.run(seqs)
    assert cheap.stats.tokens == dear.stats.tokens
    assert cheap.stats.padded_tokens < dear.stats.padded_tokens
    assert cheap.stats.forwards > dear.stats.forwards
    np.testing.assert_allclose([r.logp[0] for r in a], [r.logp[0] for r in b], atol=tol["llama"].logp)


def test_workspace_never_hands_out_a_buffer_still_referenced():
    """Known answer: while a view of a buffer lives, the next request gets a fresh buffer; once
    the view is gone the same buffer comes back. Control: a workspace that keeps nothing always
    allocates (the reuse seen above is the pool's, not the allocator's)."""
    from interp.runner.engine import Workspace

    like = torch.zeros(1)
    ws = Workspace(keep=2)
    (a,) = ws.empty([(4, 8)], like)
    held = a[1:3]  # a node's cache would be such a view
    (b,) = ws.empty([(4, 8)], like)
    assert b.data_ptr() != a.data_ptr()
    ptr = a.data_ptr()
    del a, held, b
    (c,) = ws.empty([(2, 8)], like)
    assert c.data_ptr() in (ptr, ws.pool[1][0].data_ptr())  # an idle buffer, not a fresh one
    del c
    assert len(ws.pool) == 2
    plain = Workspace(keep=0)
    (x,) = plain.empty([(4, 8)], like)
    kept = x
    (y,) = plain.empty([(4, 8)], like)
    assert not plain.pool and y.data_ptr() != kept.data_ptr()


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_reused_buffers_full_of_nan_change_nothing(arch, loaded, tiny_models, tol, monkeypatch):
    """A reused KV buffer holds whatever the last forward left there. Planted: every buffer the
    workspace hands out is first filled with NaN; rows whose parents are shorter than the
    batch's longest leave a masked gap, which must be zeroed (a NaN key poisons the masked
    score too), so the scores still equal a plain forward. Control: without the zeroing the
    same run returns NaN, so this test sees the gap."""
    from interp.runner import engine as E

    orig = E.Workspace.empty

    def poisoned(self, shapes, like):
        out = orig(self, shapes, like)
        for t in out:
            t.fill_(float("nan"))
        return out

    monkeypatch.setattr(E.Workspace, "empty", poisoned)
    lm = loaded[arch]
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    cfg = ScoringConfig(variants="exact", batch_size=3)
    s = score_options(lm, PROMPTS, OPTIONS[:2], cfg=cfg)
    want = [[plain_logprob(ref, lm.tokenizer, p, o) for o in OPTIONS[:2]] for p in PROMPTS]
    np.testing.assert_allclose(s.logp, want, atol=tol[arch].sum_logp)

    real_zero = torch.Tensor.zero_
    monkeypatch.setattr(torch.Tensor, "zero_", lambda self: self)  # the gap keeps its NaN
    try:
        bad = score_options(lm, PROMPTS, OPTIONS[:2], cfg=cfg)
    finally:
        monkeypatch.setattr(torch.Tensor, "zero_", real_zero)
    assert np.isnan(bad.logp).any()


def test_a_node_cache_holds_only_its_own_tokens(loaded):
    """Each kept node stores its own segment and points at its parent's: the chain assembles to
    the cache a plain forward of the whole prefix builds."""
    from interp.runner import engine as E

    lm = loaded["llama"]
    tok = lm.tokenizer
    ids = [encode(tok, p)[0] for p in PROMPTS[:3]]
    kept = {}
    eng = E.Engine(lm.backend, [], EngineConfig(batch_size=64), pad_id=tok.pad_token_id or 0)
    eng.on_state = lambda i, kv: kept.__setitem__(i, kv)
    eng.run([Seq(ids=tuple(x), reads=[(len(x) - 1, (1,))], state=True) for x in ids])
    model = AutoModelForCausalLM.from_pretrained(lm.info.path).eval()
    for i, x in enumerate(ids):
        kv = kept[i]
        segs = kv.segments()
        assert len(segs) >= 2 and kv.length == len(x)  # shared prefix + own tokens
        assert sum(s.k[0].shape[2] for s in segs) == len(x) and kv.nbytes < sum(s.nbytes for s in segs)
        with torch.no_grad():
            cache = model(torch.tensor([x]), use_cache=True).past_key_values
        for layer, (k, v) in enumerate(zip(kv.keys, kv.values)):
            # float32, batched vs alone: summation order only (~1e-6 on these O(1) values)
            torch.testing.assert_close(k, cache.layers[layer].keys[0], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(v, cache.layers[layer].values[0], atol=1e-5, rtol=1e-4)


def _seqs(lm, prompts=PROMPTS):
    out = []
    for p in prompts:
        ids = tuple(encode(lm.tokenizer, p)[0])
        out.append(Seq(ids=ids, reads=[(len(ids) - 1, (5, 6))], capture_pos=len(ids) - 2))
    return out


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_packed_forwards_equal_padded_ones_and_a_plain_forward(arch, loaded, tiny_models, tol):
    """Packed forwards (interp.runner.packed): every level's rows as one sequence of their real
    tokens. Known answer: the log-probs and residuals a plain HF forward of each sequence gives,
    and the padded engine's. The packed run really ran packed: the first block's first Linear saw
    exactly the prefix tree's tokens, where the padded run's saw rows x width, padding included."""
    lm = loaded[arch]
    layer = lm.default_layer
    ref = AutoModelForCausalLM.from_pretrained(tiny_models[arch]).eval()
    seqs = _seqs(lm)
    assert lm.backend.enable_packed()  # its own check's forwards happen before the count
    linear = next(
        m for m in lm.backend.blocks[0].modules() if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D"
    )
    seen = []
    handle = linear.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[:-1].numel()))
    runs = {}
    try:
        for mode in (True, False):
            seen.clear()
            eng = Engine(lm.backend, [layer], EngineConfig(batch_size=3, packed=mode), lm.tokenizer.pad_token_id)
            runs[mode] = (eng.run(seqs), eng.stats, sum(seen))
    finally:
        handle.remove()
    (packed, st, rows), (padded, st_pad, rows_pad) = runs[True], runs[False]
    assert st.packed_forwards > 0 and st_pad.packed_forwards == 0
    assert rows == st.tokens == st.unique_tokens < st.padded_tokens
    assert rows_pad == st_pad.padded_tokens  # padded forwards: rows x width, padding included
    for s, a, b in zip(seqs, packed, padded):
        with torch.no_grad():
            out = ref(torch.tensor([s.ids]), output_hidden_states=True)
        want = torch.log_softmax(out.logits[0, -1].float(), -1)[[5, 6]].numpy()
        np.testing.assert_allclose(a.logp[0], want, atol=tol[arch].logp)
        np.testing.assert_allclose(a.logp[0], b.logp[0], atol=tol[arch].logp)
        np.testing.assert_allclose(a.resid[layer], out.hidden_states[layer][0, -2].numpy(), atol=tol[arch].resid)


def test_packed_check_refuses_a_model_it_does_not_reproduce(loaded, tiny_models, tol, monkeypatch):
    """The self-check at first use (`HFBackend.enable_packed`) must be able to fail. Planted: a
    packing whose mask lets each token see the tokens after it in its row. The check refuses it,
    the engine runs padded and the numbers stay right; control: forced past the check, the same
    packing gives wrong numbers, so what the check caught was real."""
    from interp.runner import packed as P
    from interp.runner.backends import HFBackend

    real_plan = P.plan

    def leaky(attention_mask, past_mask):
        p = real_plan(attention_mask, past_mask)
        m = p.mask.clone()
        m[..., m.shape[-1] - p.W :] |= attention_mask.bool()[:, None, None, :]  # no causal order
        return P.Packing(B=p.B, W=p.W, index=p.index, pads=p.pads, rows=p.rows, cols=p.cols, mask=m)

    arch = "llama"
    path = tiny_models[arch]
    lm = interp.load(path)  # its own backend: the packed check runs once per backend
    monkeypatch.setattr(P, "plan", leaky)
    seqs = _seqs(lm)
    ref = AutoModelForCausalLM.from_pretrained(path).eval()
    want = []
    for s in seqs:
        with torch.no_grad():
            want.append(torch.log_softmax(ref(torch.tensor([s.ids])).logits[0, -1].float(), -1)[[5, 6]].numpy())
    eng = Engine(lm.backend, [], EngineConfig(batch_size=3), lm.tokenizer.pad_token_id)
    got = eng.run(seqs)
    assert lm.backend.enable_packed() is False and eng.stats.packed_forwards == 0
    np.testing.assert_allclose([r.logp[0] for r in got], want, atol=tol[arch].logp)

    monkeypatch.setattr(HFBackend, "enable_packed", lambda self: P.route(self.model))
    forced = Engine(lm.backend, [], EngineConfig(batch_size=3), lm.tokenizer.pad_token_id)
    bad = forced.run(seqs)
    assert forced.stats.packed_forwards > 0
    assert np.abs(np.array([r.logp[0] for r in bad]) - np.array(want)).max() > 100 * tol[arch].logp


def test_packed_forwards_stay_off_under_hooks(loaded):
    """Hooks around the forward (steering) index rows and positions: no packing under them."""
    lm = loaded["llama"]
    eng = Engine(lm.backend, [], EngineConfig(batch_size=3), lm.tokenizer.pad_token_id, hooks=contextlib.nullcontext)
    eng.run(_seqs(lm))
    assert eng.stats.packed_forwards == 0 and eng.stats.forwards > 0


def test_attention_runs_of_rows_known_answers():
    """`packed.attention_groups` cuts rows where a separate attention call costs less than the
    padding it saves: three 1-token rows and a 40-token one are two calls; near-equal rows one."""
    from interp.runner.packed import ATTENTION_CALL_PAIRS, attention_groups

    assert ATTENTION_CALL_PAIRS == 2048  # the costs below are worked out for it
    # together: 2048 + 4 x 40 x 40 = 8448 pairs; apart: (2048 + 3) + (2048 + 1600) = 5699
    assert attention_groups([1, 1, 1, 40], 0) == ((0, 3, 1), (3, 4, 40))
    assert attention_groups([5, 5, 6], 0) == ((0, 3, 6),)
    # a long cached past makes every padded query dear: 2048 + 2 x 8 x 508 > 2 x 2048 + 1 x 501 + 8 x 508
    assert attention_groups([1, 8], 500) == ((0, 1, 1), (1, 2, 8))


def test_attention_in_runs_of_rows_changes_nothing(loaded, tiny_models, tol, monkeypatch):
    """Every row its own attention call (a call costs nothing): the same numbers as one call per
    forward and as a plain forward, and the runs were really cut."""
    from interp.runner import packed as P

    lm = loaded["llama"]
    seqs = _seqs(lm)
    whole = Engine(lm.backend, [], EngineConfig(batch_size=3), lm.tokenizer.pad_token_id).run(seqs)
    seen = []
    real_plan = P.plan

    def spy(attention_mask, past_mask):
        p = real_plan(attention_mask, past_mask)
        seen.append(len(p.groups))
        return p

    monkeypatch.setattr(P, "ATTENTION_CALL_PAIRS", 0)
    monkeypatch.setattr(P, "plan", spy)
    cut = Engine(lm.backend, [], EngineConfig(batch_size=3), lm.tokenizer.pad_token_id).run(seqs)
    assert max(seen) > 1
    np.testing.assert_allclose([r.logp[0] for r in cut], [r.logp[0] for r in whole], atol=tol["llama"].logp)
    ref = AutoModelForCausalLM.from_pretrained(tiny_models["llama"]).eval()
    for s, r in zip(seqs, cut):
        with torch.no_grad():
            want = torch.log_softmax(ref(torch.tensor([s.ids])).logits[0, -1].float(), -1)[[5, 6]].numpy()
        np.testing.assert_allclose(r.logp[0], want, atol=tol["llama"].logp)
