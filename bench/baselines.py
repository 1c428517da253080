"""The references the runner is timed against, as a plain script would write them.

* `naive_scores`: one Hugging Face forward per prompt x option surface form, batch 1, full logits
  at every position, log-softmax, the sum of the option's token log-probs (the tokenization a
  plain script uses: encode `prompt + option`, the option's tokens are those past
  `len(encode(prompt))`).
* `cloze_requests`: the cloze bank as lm-eval loglikelihood requests (context, continuations).
"""

from __future__ import annotations


def naive_encode(tok, text: str) -> list[int]:
    """What a plain script does: the tokenizer's own special tokens, unless the text (a rendered
    chat template) already starts with BOS."""
    bos = getattr(tok, "bos_token", None)
    return tok(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"]


def naive_scores(model, tok, prompts, option_forms):
    """[N, K] log-probs: per prompt and option, logsumexp over its forms of sum log p(form tokens)."""
    import numpy as np
    import torch
    from scipy.special import logsumexp

    out = np.zeros((len(prompts), len(option_forms)))
    with torch.inference_mode():
        for n, prompt in enumerate(prompts):
            n_ctx = len(naive_encode(tok, prompt))
            for k, forms in enumerate(option_forms):
                vals = []
                for form in forms:
                    ids = naive_encode(tok, prompt + form)
                    logits = model(input_ids=torch.tensor([ids])).logits[0].float()
                    logp = torch.log_softmax(logits, dim=-1)
                    cont = ids[n_ctx:]
                    vals.append(sum(float(logp[n_ctx - 1 + j, t]) for j, t in enumerate(cont)))
                out[n, k] = logsumexp(vals)
    return out


def cloze_requests(n_prompts: int | None):
    """[(context, [continuations])] and the flat request list, for a subset of the cloze bank."""
    from interp.studies.base import load_template
    from interp.studies.cloze import COMPLETIONS, check_template, continuation_texts, load_cloze_bank, resolve_span

    bank = load_cloze_bank("cloze")
    if n_prompts:
        bank = bank.subsample(n_prompts, seed=0, by="prompt_id", stratify="axis")
    span = check_template(load_template("cloze_v1"))["scored_span"]
    items = []
    for row in bank.items.itertuples(index=False):
        stem, conts = continuation_texts(
            row.context, {c: getattr(row, c) for c in COMPLETIONS}, scored_span=resolve_span(span, row.slot)
        )
        items.append((stem, list(conts.values())))
    return bank, items
