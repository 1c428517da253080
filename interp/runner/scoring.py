"""The three primitives every study uses: option scoring, continuation scoring, residual capture.

Joins between a context and what follows it are done on the joint encoding: the text
`context + continuation` is encoded once and split at the character boundary using the
tokenizer's offsets. A token that straddles the boundary (a BPE merge across it, or the
bytes of one character) belongs to the continuation, so every continuation character is
scored and the context is never re-tokenized differently from how the model sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from interp.core.errors import ConfigError
from interp.model.loading import LoadedModel
from interp.runner.engine import Engine, HookContext, Seq
from interp.runner.precision import active_audit, guard_ties
from interp.runner.options import ScoringConfig, VariantMode  # noqa: F401  (re-exported)


def encode(tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and character offsets, adding special tokens unless the text already has BOS."""
    bos = getattr(tokenizer, "bos_token", None)
    add_special = not (bos and text.startswith(bos))
    enc = tokenizer(text, add_special_tokens=add_special, return_offsets_mapping=True)
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def encode_many(tokenizer, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """`encode` for many texts in one tokenizer call per special-token setting (the per-call
    overhead of a Python tokenizer call dominates short texts; the encodings are the same)."""
    bos = getattr(tokenizer, "bos_token", None)
    flags = [not (bos and t.startswith(bos)) for t in texts]
    out: list = [None] * len(texts)
    for flag in (True, False):
        idx = [i for i, f in enumerate(flags) if f == flag]
        if not idx:
            continue
        enc = tokenizer([texts[i] for i in idx], add_special_tokens=flag, return_offsets_mapping=True)
        for j, i in enumerate(idx):
            out[i] = (list(enc["input_ids"][j]), [tuple(o) for o in enc["offset_mapping"][j]])
    return out


def _context_start_id(tokenizer) -> int:
    for attr in ("bos_token_id", "eos_token_id"):
        tid = getattr(tokenizer, attr, None)
        if tid is not None:
            return int(tid)
    raise ConfigError("empty context and the tokenizer has neither BOS nor EOS to condition on")


def split_continuation(tokenizer, context: str, continuation: str) -> tuple[list[int], int]:
    """Encode `context + continuation` jointly; return (ids, index of first continuation token)."""
    _check_continuation(context, continuation)
    return _split_encoded(tokenizer, context, continuation, *encode(tokenizer, context + continuation))


def _check_continuation(context: str, continuation: str) -> None:
    if not continuation or not continuation.strip():
        raise ConfigError(f"empty continuation after context {context[-40:]!r}")


def _split_encoded(
    tokenizer, context: str, continuation: str, ids: list[int], offsets: list[tuple[int, int]]
) -> tuple[list[int], int]:
    boundary = len(context)
    split = len(ids)
    for i, (start, end) in enumerate(offsets):
        if end > boundary and not (start == 0 and end == 0):
            split = i
            break
    if split == 0:  # nothing to condition on (no BOS): condition on EOS, as lm-eval does
        ids = [_context_start_id(tokenizer)] + ids
        split = 1
    if split >= len(ids):
        raise ConfigError(f"continuation {continuation!r} produced no tokens")
    return ids, split


def option_variants(word: str, mode: VariantMode) -> list[str]:
    if not word or not word.strip():
        raise ConfigError("option word is empty")
    if mode == "exact":
        return [word]
    forms = [word] if mode == "space" else list(dict.fromkeys([word, word.lower(), word.capitalize()]))
    return list(dict.fromkeys(f for w in forms for f in (w, " " + w)))


@dataclass
class OptionScores:
    """Per prompt: log-prob of each option (its surface forms pooled), renormalized probs."""

    logp: np.ndarray  # [N, K]
    probs: np.ndarray  # [N, K], sums to 1 over the options
    resid: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> [N, d] (or list of [T, d])
    n_tokens: np.ndarray | None = None  # prompt length in tokens
    # prompts whose numbers (log-probs, residuals) are float32's: a reduced precision's near-ties
    # re-scored by the tie guard (interp.runner.precision.TIE_GUARD); empty otherwise
    tie_guarded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    def guarded_rows(self) -> np.ndarray:
        """Per prompt: True where its numbers are float32's by the tie guard (a table's `tie_guarded`)."""
        rows = np.zeros(len(self.logp), dtype=bool)
        rows[self.tie_guarded] = True
        return rows


@dataclass
class ContinuationScores:
    """Per (context, continuation): token log-probs and their sum / mean."""

    token_logp: list[np.ndarray]
    sum_logp: np.ndarray
    mean_logp: np.ndarray
    n_tokens: np.ndarray
    resid: dict[int, np.ndarray] = field(default_factory=dict)


def _resolve_layers(lm: LoadedModel, layers: Sequence[int] | None) -> list[int]:
    if layers is None:
        return []
    out = []
    for layer in layers:
        if not 0 <= layer < lm.n_layers:
            raise ConfigError(f"layer {layer} outside 0..{lm.n_layers - 1} for {lm.info.path}")
        out.append(int(layer))
    return out


def _check_length(lm: LoadedModel, ids: Sequence[int], name: str) -> None:
    limit = lm.info.max_positions
    if limit is not None and len(ids) > limit:
        raise ConfigError(
            f"{name}: {len(ids)} tokens exceed the context window of {lm.info.path} "
            f"({limit}, max_position_embeddings); shorten the item or use a longer-context model"
        )


def _stack(results, layers, idx):
    return {layer: np.stack([results[i].resid[layer] for i in idx]) for layer in layers}


def score_options(
    lm: LoadedModel,
    prompts: Sequence[str],
    options: Sequence[str],
    *,
    layers: Sequence[int] | None = None,
    cfg: ScoringConfig = ScoringConfig(),
    names: Sequence[str] | None = None,
    hooks: HookContext | None = None,
) -> OptionScores:
    """Log-probs of each option as what follows each prompt, and residuals at the last prompt token.

    Single-token surface forms are read from one forward of the prompt; multi-token ones are
    scored as full continuations (sum of token log-probs), as nodes of the prefix tree below
    the prompt, batched with the other nodes of their level. The surface forms of one option
    are pooled with logsumexp after removing forms that tokenize identically.

    Parameters
    ----------
    lm : LoadedModel
        From `interp.load` or `interp.wrap`.
    prompts : sequence of str
        Texts the options follow.
    options : sequence of str
        Option words, the same for every prompt (surface forms per ``cfg.variants``).
    layers : sequence of int, optional
        resid_pre layers whose residual at the last prompt token is returned.
    cfg : ScoringConfig
        How to score (batch size, prefix reuse, surface forms, tie guard).
    names : sequence of str, optional
        One label per prompt (e.g. item ids), used only in error messages.
    hooks : callable, optional
        A context-manager factory entered around every forward (interventions such as steering).

    Returns
    -------
    OptionScores
        ``logp`` and ``probs`` (renormalized over the options) [n_prompts, n_options], ``resid``
        {layer: [n_prompts, d_model]}, token counts.
    """
    tok = lm.tokenizer
    layers = _resolve_layers(lm, layers)
    if len(options) < 2:
        raise ConfigError("option scoring needs at least two options")
    variants = [option_variants(o, cfg.variants) for o in options]
    seqs: list[Seq] = []
    base_of: list[int] = []
    # per prompt, per option: list of (seq index, read index or None) whose logps sum to a form
    plan: list[list[list[tuple[int, int | None, int]]]] = []
    n_tokens = np.zeros(len(prompts), dtype=np.int64)
    for forms in variants:
        for form in forms:
            _check_continuation(prompts[0] if prompts else "", form)
    # every prompt and every prompt + form, encoded in batched tokenizer calls
    n_forms = sum(len(f) for f in variants)
    flat_forms = [form for forms in variants for form in forms]
    encoded = encode_many(tok, [t for prompt in prompts for t in [prompt] + [prompt + f for f in flat_forms]])
    for n, prompt in enumerate(prompts):
        row = encoded[n * (1 + n_forms) : (n + 1) * (1 + n_forms)]
        joint = iter(row[1:])
        base_ids = row[0][0]
        if not base_ids:
            base_ids = [_context_start_id(tok)]
        n_tokens[n] = len(base_ids)
        base = Seq(ids=tuple(base_ids), reads=[], capture_pos=len(base_ids) - 1 if layers else None)
        base_idx = len(seqs)
        seqs.append(base)
        base_of.append(base_idx)
        single_targets: list[int] = []
        prompt_plan = []
        for forms in variants:
            seen: set[tuple[int, ...]] = set()
            form_plan = []
            for form in forms:
                ids, split = _split_encoded(tok, prompt, form, *next(joint))
                _check_length(lm, ids, names[n] if names is not None else f"prompt {n}")
                key = tuple(ids)
                if key in seen:
                    continue
                seen.add(key)
                if ids[:split] == base_ids and len(ids) - split == 1:
                    if ids[split] not in single_targets:
                        single_targets.append(ids[split])
                    form_plan.append((base_idx, 0, single_targets.index(ids[split])))
                elif ids[:split] == base_ids:  # several tokens continuing the prompt: an extension
                    base.ext.append(tuple(ids[split:]))
                    form_plan.append((base_idx, "ext", len(base.ext) - 1))
                else:  # the join re-tokenized the prompt's end: score as a sequence of its own
                    cont = ids[split:]
                    seqs.append(Seq(ids=key, reads=[(split - 1 + j, (t,)) for j, t in enumerate(cont)]))
                    form_plan.append((len(seqs) - 1, None, 0))
            prompt_plan.append(form_plan)
        if single_targets:
            base.reads.append((len(base_ids) - 1, tuple(single_targets)))
        elif layers or base.ext:
            base.reads.append((len(base_ids) - 1, (base_ids[-1],)))  # a read anchors the capture
        plan.append(prompt_plan)
    engine = Engine(lm.backend, layers, cfg.engine(), tok.pad_token_id, hooks=hooks)
    seqs_run = [s for s in seqs if s.reads]
    index = {id(s): k for k, s in enumerate(seqs_run)}
    results_run = engine.run(seqs_run)
    results = [results_run[index[id(s)]] if id(s) in index else None for s in seqs]
    logp = np.zeros((len(prompts), len(options)))
    for n, prompt_plan in enumerate(plan):
        for k, form_plan in enumerate(prompt_plan):
            vals = []
            for seq_idx, read, target_pos in form_plan:
                res = results[seq_idx]
                if read is None:
                    vals.append(float(sum(a[0] for a in res.logp)))
                elif read == "ext":
                    vals.append(res.ext_logp[target_pos])
                else:
                    vals.append(float(res.logp[read][target_pos]))
            logp[n, k] = logsumexp(vals)
    resid = _stack(results, layers, base_of) if layers and not cfg.capture_all_positions else {}
    if layers and cfg.capture_all_positions:
        resid = {layer: [results[i].resid[layer] for i in base_of] for layer in layers}
    # a switchable reduced precision: near-ties scored again in float32 (interp.runner.precision.TIE_GUARD)
    guarded = guard_ties(lm, prompts, options, logp, resid, layers, cfg, hooks, score_options)
    probs = np.exp(logp - logsumexp(logp, axis=1, keepdims=True))
    audit = active_audit(lm)
    if audit is not None:  # a reduced-precision run: re-score a sample in float32 (interp.runner.precision)
        audit.options(prompts, options, logp, cfg, hooks, score_options, guarded=len(guarded))
    return OptionScores(logp=logp, probs=probs, resid=resid, n_tokens=n_tokens, tie_guarded=guarded)


def score_continuations(
    lm: LoadedModel,
    items: Sequence[tuple[str, Sequence[str]]],
    *,
    layers: Sequence[int] | None = None,
    cfg: ScoringConfig = ScoringConfig(),
    names: Sequence[str] | None = None,
    hooks: HookContext | None = None,
) -> ContinuationScores:
    """Log-likelihood of each continuation of each context, flattened in input order.

    Parameters
    ----------
    lm : LoadedModel
        From `interp.load` or `interp.wrap`.
    items : sequence of (str, sequence of str)
        (context, continuations) pairs; context and continuation are encoded jointly and split
        at the character boundary.
    layers : sequence of int, optional
        resid_pre layers whose residual is returned, read at the position whose next token is the
        continuation's first token.
    cfg : ScoringConfig
        How to score.
    names : sequence of str, optional
        One label per item, used only in error messages.
    hooks : callable, optional
        A context-manager factory entered around every forward.

    Returns
    -------
    ContinuationScores
        ``sum_logp``, ``mean_logp``, ``token_logp`` and ``n_tokens`` per continuation, ``resid``
        {layer: [n_continuations, d_model]}.
    """
    tok = lm.tokenizer
    layers = _resolve_layers(lm, layers)
    seqs: list[Seq] = []
    for context, conts in items:
        for cont in conts:
            _check_continuation(context, cont)
    joint = iter(encode_many(tok, [context + cont for context, conts in items for cont in conts]))
    for n, (context, conts) in enumerate(items):
        for cont in conts:
            ids, split = _split_encoded(tok, context, cont, *next(joint))
            _check_length(lm, ids, names[n] if names is not None else f"item {n}")
            reads = [(split - 1 + j, (t,)) for j, t in enumerate(ids[split:])]
            seqs.append(Seq(ids=tuple(ids), reads=reads, capture_pos=split - 1 if layers else None))
    engine = Engine(lm.backend, layers, cfg.engine(), tok.pad_token_id, hooks=hooks)
    results = engine.run(seqs)
    token_logp = [np.array([a[0] for a in r.logp]) for r in results]
    sums = np.array([t.sum() for t in token_logp])
    n = np.array([len(t) for t in token_logp])
    resid: dict = {}
    if layers:
        if cfg.capture_all_positions:
            resid = {layer: [r.resid[layer] for r in results] for layer in layers}
        else:
            resid = _stack(results, layers, range(len(results)))
    audit = active_audit(lm)
    if audit is not None:
        audit.continuations(items, sums, cfg, hooks, score_continuations)
    return ContinuationScores(token_logp=token_logp, sum_logp=sums, mean_logp=sums / n, n_tokens=n, resid=resid)
