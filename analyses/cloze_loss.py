"""How much of a cloze finding depends on the loss? ABS, language effects, rankings and
fertility mediation under the three losses of analyses.cloze_metrics, side by side.

Why: ``sum`` (the default) compares log-odds between the completions, a property of the
strings. Under the per-token mean (``token_mean``, the INCLUDE reading) a preference that sits
in a few tokens is divided by the token count, so a language a tokenizer cuts finely shows a
small delta for the same preference, and "fertility mediates the language effect" follows from
the arithmetic alone; under the per-byte mean (``byte_mean``) a script that spends 3 UTF-8 bytes
per character shows a third of it. A language effect, a ranking or a mediation that appears
under any offered loss but not under ``sum`` is flagged (``*_not_under_sum``).

Fertility and mediation are this toolkit's additions (the INCLUDE paper has neither). Two
mediators are offered: ``context_fertility`` (tokens per word of the prompt context, column
``fertility``) and ``completion_fertility`` (tokens per word of the two scored completions,
column ``fertility_completion``, the text delta is computed from). Caveat: prompt content can
drive both fertility and delta (rarer words are cut finer and may carry weaker stereotypes),
so an indirect effect is an association along a path, not a causal effect of tokenization.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analyses.cloze_metrics import LOSSES, abs_table, add_delta, canonical_loss

__all__ = ["LOSS_CHECK_COLUMNS", "MEDIATORS", "abs_by_loss", "loss_check", "mediation_under_losses"]

# mediator label -> scores column
MEDIATORS: dict[str, str] = {"context_fertility": "fertility", "completion_fertility": "fertility_completion"}
_LABEL = {v: k for k, v in MEDIATORS.items()}
BASE_LOSS = "sum"  # the scale every other loss's findings are checked against
LOSS_CHECK_COLUMNS = (
    "checkpoint",
    "language",
    "reference",
    "loss",
    *(f"abs_{x}" for x in LOSSES),
    *(f"band_{x}" for x in LOSSES),
    *(f"effect_{x}" for x in LOSSES),
    *(f"mediation_{x}" for x in LOSSES),
    "effect_token_mean_only",
    "mediation_token_mean_only",
    *(f"rank_{x}" for x in LOSSES),
    "effect_not_under_sum",
    "ranking_not_under_sum",
    "mediation_not_under_sum",
)


def _mediator_label(m: str) -> str:
    return m if m in MEDIATORS else _LABEL.get(m, m)


def mediation_under_losses(
    scores: pd.DataFrame,
    *,
    losses: Sequence[str] = LOSSES,
    mediators: Sequence[str] = ("fertility", "fertility_completion"),
    reference: str = "en",
    outcome: str = "delta",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """analyses.mediation.mediation_by_language for every (loss, mediator); long table with
    columns ``loss`` and ``mediator`` (context_fertility / completion_fertility) appended.

    delta is recomputed from the raw per-completion scores under each loss; a mediator column
    absent from ``scores`` (units cached before it was stored) is skipped.
    """
    from analyses.mediation import mediation_by_language

    frames = []
    for loss in dict.fromkeys(canonical_loss(x) for x in losses):
        data = add_delta(scores, loss=loss)
        for med in mediators:
            col = MEDIATORS.get(med, med)
            if col not in data.columns or data[col].isna().all():
                continue
            sub = data.dropna(subset=[outcome, col])
            out = mediation_by_language(
                sub, reference=reference, outcome=outcome, mediator=col, cluster="prompt_id", n_boot=n_boot, seed=seed
            )
            frames.append(out.assign(loss=loss, mediator=_mediator_label(col), outcome=outcome, n_boot=n_boot))
    if not frames:
        return pd.DataFrame(columns=["checkpoint", "language", "loss", "mediator"])
    return pd.concat(frames, ignore_index=True)


def abs_by_loss(scores: pd.DataFrame, *, losses: Sequence[str] = LOSSES) -> pd.DataFrame:
    """Language-level ABS (axis "all") under each loss, wide: checkpoint, language,
    abs_<loss>, band_<loss> for every loss, then odds_sum (checkpoint "all": mean over
    checkpoints). band_<loss> holds the paper's band under token_mean only (the scale it is
    defined on) and is empty under the others; odds_sum = e^abs_sum (present when sum is)."""
    wide = None
    for loss in dict.fromkeys(canonical_loss(x) for x in losses):
        t = abs_table(scores, loss=loss)
        t = t[t["axis"] == "all"].set_index(["checkpoint", "language"])[["abs", "band", "odds"]]
        t.columns = [f"abs_{loss}", f"band_{loss}", f"odds_{loss}"]
        if loss != "sum":
            t = t.drop(columns=f"odds_{loss}")
        wide = t if wide is None else wide.join(t, how="outer")
    out = wide.reset_index()
    if "odds_sum" in out:
        out = out[[c for c in out.columns if c != "odds_sum"] + ["odds_sum"]]
    return out


def _effects(scores: pd.DataFrame, loss: str, reference: str, alpha: float) -> dict[tuple[str, str], bool]:
    """(checkpoint or "pooled", language) -> Wilcoxon-Holm p < alpha for delta vs reference."""
    from analyses.stats import pairwise_wilcoxon

    data = add_delta(scores, loss=loss).dropna(subset=["delta"])
    groups = [(str(ck), df, "prompt_id") for ck, df in data.groupby("checkpoint", sort=True)]
    if data["checkpoint"].nunique() > 1:
        groups.append(("pooled", data, ["checkpoint", "prompt_id"]))
    out: dict[tuple[str, str], bool] = {}
    for ck, df, subject in groups:
        langs = list(dict.fromkeys(df["language"].astype(str)))
        if reference not in langs or len(langs) < 2:
            continue
        order = [reference] + [x for x in langs if x != reference]
        pw = pairwise_wilcoxon(df, subject=subject, condition="language", value="delta", order=order)
        for r in pw.itertuples(index=False):
            if r.a == reference:
                out[(ck, str(r.b))] = bool(np.isfinite(r.p_holm) and r.p_holm < alpha)
    return out


def _ranks(abs_w: pd.DataFrame, loss: str) -> pd.Series:
    """Rank of each language's ABS within its checkpoint under ``loss`` (1 = largest; ties
    share the smallest rank)."""
    col = f"abs_{loss}"
    if col not in abs_w:
        return pd.Series(np.nan, index=abs_w.index)
    return abs_w.groupby(level="checkpoint")[col].rank(ascending=False, method="min")


def loss_check(
    scores: pd.DataFrame,
    *,
    loss: str,
    reference: str = "en",
    alpha: float = 0.05,
    mediation: pd.DataFrame | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    losses: Sequence[str] = LOSSES,
) -> pd.DataFrame:
    """One row per (checkpoint or "pooled", language != reference): ABS and band under every
    loss; ``effect_<loss>`` (Wilcoxon-Holm p < alpha for the language's delta vs the
    reference's, matched prompts; pooled: subjects = (checkpoint, prompt)); ``mediation_<loss>``
    (the indirect effect's CI excludes 0 for either mediator); ``rank_<loss>`` (the language's
    rank by ABS in its checkpoint, 1 = largest). Flags against ``sum``, the default scale:
    ``effect_not_under_sum`` / ``mediation_not_under_sum`` list the losses under which the
    finding appears while it does not under sum, ``ranking_not_under_sum`` those under which
    the language's rank differs from its rank under sum (empty: none). The older flags
    ``effect_token_mean_only`` / ``mediation_token_mean_only`` compare token_mean with
    ``loss``, the chosen one. ``mediation`` (from :func:`mediation_under_losses` over
    ``losses``) is computed when not given. Losses not in ``losses`` (a table without byte
    counts) give NaN / empty cells. Columns: :data:`LOSS_CHECK_COLUMNS`.
    """
    loss = canonical_loss(loss)
    have = list(dict.fromkeys(canonical_loss(x) for x in losses))
    if BASE_LOSS not in have:
        raise ValueError(f"loss_check needs {BASE_LOSS} among the losses, got {have}")
    if mediation is None:
        mediation = mediation_under_losses(scores, losses=have, reference=reference, n_boot=n_boot, seed=seed)
    abs_w = abs_by_loss(scores, losses=have)
    abs_w["checkpoint"] = abs_w["checkpoint"].replace({"all": "pooled"})
    abs_w = abs_w.set_index(["checkpoint", "language"])
    ranks = {x: _ranks(abs_w, x) for x in have}
    effects = {x: _effects(scores, x, reference, alpha) for x in have}
    med = mediation.dropna(subset=["indirect_lo", "indirect_hi"]) if len(mediation) else mediation
    excl = {}
    for r in med.itertuples(index=False):
        key = (str(r.loss), str(r.checkpoint), str(r.language))
        excl[key] = excl.get(key, False) or bool(r.indirect_lo > 0 or r.indirect_hi < 0)
    rows = []
    for ck, lang in sorted(set().union(*(set(e) for e in effects.values()))):
        row: dict = {"checkpoint": ck, "language": lang, "reference": reference, "loss": loss}
        a = abs_w.loc[(ck, lang)] if (ck, lang) in abs_w.index else None
        for x in LOSSES:
            known = x in have
            row[f"abs_{x}"] = float(a[f"abs_{x}"]) if a is not None and known else np.nan
            row[f"band_{x}"] = a[f"band_{x}"] if a is not None and known else None
            row[f"effect_{x}"] = effects[x].get((ck, lang), False) if known else None
            row[f"mediation_{x}"] = excl.get((x, ck, lang), False) if known else None
            row[f"rank_{x}"] = float(ranks[x].get((ck, lang), np.nan)) if known else np.nan
        row["effect_token_mean_only"] = bool(row["effect_token_mean"]) and not row[f"effect_{loss}"]
        row["mediation_token_mean_only"] = bool(row["mediation_token_mean"]) and not row[f"mediation_{loss}"]
        others = [x for x in have if x != BASE_LOSS]
        row["effect_not_under_sum"] = ", ".join(x for x in others if row[f"effect_{x}"] and not row["effect_sum"])
        row["mediation_not_under_sum"] = ", ".join(
            x for x in others if row[f"mediation_{x}"] and not row["mediation_sum"]
        )
        row["ranking_not_under_sum"] = ", ".join(
            x
            for x in others
            if np.isfinite(row[f"rank_{x}"]) and np.isfinite(row["rank_sum"]) and row[f"rank_{x}"] != row["rank_sum"]
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LOSS_CHECK_COLUMNS))
