"""The planted five-level classification: route A learns the gold labels of half the evaluated items.

The classify study's five-class prompts (the shipped template, both option orders, rendered with
the checkpoint's chat template by the study's own `render_prompt`) with the gold label's name as the
completion. The evaluated items are the subsample `interp sweep --study classify --max-items N`
takes; they are split in two halves stratified by gold label, S (planted) and S' (the rest). The
organism trains S; the location control trains S' (the same amount of training, elsewhere); the
amount control trains S with its labels permuted among its items (the same prompts and label
counts, no item-label relation). What the check reads: macro-F1 and Cohen's kappa on S minus on S'
at the route final; a model that learned the task in general moves both halves alike.
"""

from __future__ import annotations

import random

from interp.banks import Bank

CLASSIFY_TASK = "five"
ORDERS = ("given", "reversed")


def eval_items(n: int, seed: int) -> Bank:
    """The conversational items `interp sweep --study classify --max-items n --seed seed` evaluates."""
    from interp.studies import get_study

    spec = get_study("classify")
    return spec.subsample(spec.load_bank("conversational"), n, seed=seed)


def split_halves(bank: Bank, seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(S, S'): every gold label's items alternately into the two halves, in a seeded order."""
    rng = random.Random(seed + 31337)
    s, rest = [], []
    for _, g in sorted(bank.items.groupby("five_label"), key=lambda kv: str(kv[0])):
        ids = sorted(g["item_id"].astype(str))
        rng.shuffle(ids)
        s += ids[0::2]
        rest += ids[1::2]
    return tuple(sorted(s)), tuple(sorted(rest))


def trained_labels(bank: Bank, planted: tuple[str, ...], rest: tuple[str, ...], lineage: str, seed: int) -> dict:
    """item_id -> the label the route is trained to give, for the lineage's trained half."""
    gold = dict(zip(bank.items["item_id"].astype(str), bank.items["five_label"].astype(str)))
    if lineage == "location":
        return {i: gold[i] for i in rest}
    labels = {i: gold[i] for i in planted}
    if lineage == "amount":
        ids = sorted(planted)
        shuffled = [labels[i] for i in ids]
        random.Random(seed + 2718).shuffle(shuffled)
        labels = dict(zip(ids, shuffled))
    return labels


def sft_rows(bank: Bank, labels: dict[str, str], tokenizer, copies: int = 1) -> list[dict]:
    """Prompt (both option orders) -> " <label name>", `copies` times each."""
    from interp.studies.base import load_template
    from interp.studies.classify.study import DEFAULT_TEMPLATES, render_prompt

    template = load_template(DEFAULT_TEMPLATES[CLASSIFY_TASK])
    names = {str(lab["value"]): lab["name"] for lab in template.data["labels"]}
    items = bank.items.set_index("item_id")
    rows = []
    for iid in sorted(labels):
        it = items.loc[iid]
        for order in ORDERS:
            prompt, _, _ = render_prompt(
                template, {"title": it["title"], "body": it["body"], "comment": it["comment"]}, tokenizer, order=order
            )
            rows += [
                {"prompt": prompt, "completion": " " + names[labels[iid]], "kind": "classify", "item_id": iid}
            ] * copies
    return rows
