"""Readings and trials of the sycophancy-eval sets, in the pressure study's trial layout
(analyses.pressure_metrics): what is read where, and which trial each reading is.

A reading is a prompt ending inside the assistant's reply and the option strings that may follow
it; its numbers are the options' probabilities normalised over them. Trials carry the pressure
columns (item_id, gold, planted, turn_kind, turn_side, turn_variant, p_planted).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from interp.studies.base import Template, render_chat

if TYPE_CHECKING:
    from interp.model.loading import LoadedModel
    from interp.studies.base import RunConfig

# the turn kind of a user statement and the label it speaks for (answer: two answers, so doubting
# the correct one speaks for the incorrect one)
STATED = {
    "think_correct": ("opinion", "correct"),
    "think_incorrect": ("opinion", "incorrect"),
    "doubt_correct": ("opinion", "incorrect"),
    "like": ("opinion", "positive"),
    "dislike": ("opinion", "negative"),
    "wrote": ("authorship", "positive"),
    "did_not_write": ("authorship", "negative"),
}
# answer / feedback: the label whose probability p_planted is (nothing is planted; the user's
# statement agrees with it or opposes it)
REFERENCE = {"answer": "correct", "feedback": "positive"}


def is_letters(labels: Sequence[str], options: Sequence[str]) -> bool:
    return list(labels) == list(options) and all(len(x) == 1 and x.isupper() for x in labels)


def options_of(item, template: Template) -> tuple[list[str], list[str], str, str]:
    """(labels, option strings as scored, reply prefix, style "letters" | "free") of one item row."""
    t = template.data
    if item.domain == "feedback":
        f = t["feedback"]
        return ["positive", "negative"], [" " + f["positive"], " " + f["negative"]], f["prefix"], "free"
    labels, options = json.loads(item.labels), json.loads(item.options)
    style = "letters" if is_letters(labels, options) else "free"
    prefix = item.prefix or t["answer_prefix"][style]
    if style == "letters":
        return labels, options, prefix, style
    space = "" if prefix[-1:].isspace() else " "
    return labels, [space + o for o in options], prefix, style


def planted_reply(template: Template, style: str, prefix: str, option: str) -> str:
    return template.data["planted_reply"][style].format(prefix=prefix, option=option.strip())


def user_turns(template: Template) -> list[tuple[str, str, str]]:
    """(turn_kind, turn_variant, text) of every second user turn: challenges, then neutral fillers."""
    t = template.data
    return [("challenge", k, v) for k, v in t["challenges"].items()] + [
        ("neutral", k, v) for k, v in t["neutral"].items()
    ]


def read(
    lm: LoadedModel,
    prompts: Sequence[str],
    options: Sequence[Sequence[str]],
    layers: Sequence[int],
    cfg: RunConfig,
    names: Sequence[str],
) -> tuple[list[np.ndarray], dict[int, np.ndarray], np.ndarray, np.ndarray]:
    """Probabilities of each prompt's options (normalised over them), the residual at its last
    token per layer, prompt lengths, tie-guarded rows. Prompts sharing their option strings (the
    letters) are scored together by option scoring, with the strings as written (no surface-form
    pooling); each string after its prompt is the summed log-probability of its tokens."""
    from interp.runner.scoring import score_options

    scoring = replace(cfg.scoring, variants="exact")
    probs: list[np.ndarray] = [np.empty(0)] * len(prompts)
    resid: dict[int, np.ndarray] = {}
    n_tokens = np.zeros(len(prompts), dtype=np.int64)
    guarded = np.zeros(len(prompts), dtype=bool)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, opts in enumerate(options):
        groups.setdefault(tuple(opts), []).append(i)
    for opts, idx in groups.items():
        s = score_options(
            lm, [prompts[i] for i in idx], list(opts), layers=list(layers), cfg=scoring, names=[names[i] for i in idx]
        )
        for j, i in enumerate(idx):
            probs[i] = np.exp(s.logp[j] - logsumexp(s.logp[j]))
        n_tokens[idx] = s.n_tokens
        guarded[idx] = s.guarded_rows()
        for layer, arr in s.resid.items():
            resid.setdefault(layer, np.zeros((len(prompts), arr.shape[1]), dtype=arr.dtype))[idx] = arr
    return probs, resid, n_tokens, guarded


def first_table(items: pd.DataFrame, labels: list[list[str]], probs: list[np.ndarray]) -> pd.DataFrame:
    """The unpressured readings against gold: p_gold and the best other option (comprehension)."""
    rows = []
    for it, lab, p in zip(items.itertuples(index=False), labels, probs):
        g = lab.index(it.gold)
        rows.append(
            {
                "item_id": it.item_id,
                "dataset": it.dataset,
                "gold": it.gold,
                "p_gold": float(p[g]),
                "p_best_other": float(np.delete(p, g).max()),
                "top": lab[int(np.argmax(p))],
                "n_options": len(lab),
            }
        )
    return pd.DataFrame(rows)


def conversation_trials(
    items: pd.DataFrame, template: Template, tokenizer, *, use_chat: bool, planted: list[list[str]]
) -> tuple[pd.DataFrame, list[list[str]]]:
    """are_you_sure: per item and planted first answer, every second user turn; the prompt ends
    where the second answer starts. Returns (trials with a prompt column, option strings per trial)."""
    rows, strings = [], []
    for it, plants in zip(items.itertuples(index=False), planted):
        labels, opts, prefix, style = options_of(it, template)
        messages = json.loads(it.messages)
        for p in plants:
            reply = planted_reply(template, style, prefix, opts[labels.index(p)])
            for kind, variant, text in user_turns(template):
                convo = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": text}]
                rows.append(
                    {
                        "item_id": it.item_id,
                        "dataset": it.dataset,
                        "gold": it.gold,
                        "planted": p,
                        "turn_kind": kind,
                        "turn_side": "",
                        "turn_variant": variant,
                        "labels": labels,
                        "prompt": render_chat(tokenizer, convo, prefix, use_chat=use_chat),
                    }
                )
                strings.append(opts)
    return pd.DataFrame(rows), strings


def stated_trials(items: pd.DataFrame, labels: list[list[str]], probs: list[np.ndarray]) -> pd.DataFrame:
    """answer / feedback: each line read once, one trial whose p_planted is the probability of the
    reference label (the correct answer, a positive verdict); turn_side says whether the user's
    statement speaks for it (agree) or against it (oppose)."""
    rows = []
    for it, lab, p in zip(items.itertuples(index=False), labels, probs):
        kind, favoured = STATED.get(it.condition, ("neutral", None))
        ref = REFERENCE[it.domain]
        rows.append(
            {
                "item_id": it.item_id,
                "dataset": it.dataset,
                "gold": it.gold,
                "planted": ref,
                "turn_kind": kind,
                "turn_side": "" if favoured is None else ("agree" if favoured == ref else "oppose"),
                "turn_variant": "plain" if it.condition == "neutral" else it.condition,
                "p_planted": float(p[lab.index(ref)]),
                "top": lab[int(np.argmax(p))],
                "n_options": len(lab),
            }
        )
    return pd.DataFrame(rows)
