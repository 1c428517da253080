"""How much of a cloze finding depends on the loss? ABS, language effects and fertility
mediation under the three losses of analyses.cloze_metrics, side by side.

Why: under the per-token mean (``token_mean``, the INCLUDE reading) a preference that sits in a
few tokens is divided by the token count, so a language a tokenizer cuts finely shows a small
delta for the same log-likelihood preference, and "fertility mediates the language effect"
follows from the arithmetic alone. A language effect or a mediation that appears under
``token_mean`` only is flagged.

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
    abs_<loss>, band_<loss> for every loss (checkpoint "all": mean over checkpoints)."""
    wide = None
    for loss in dict.fromkeys(canonical_loss(x) for x in losses):
        t = abs_table(scores, loss=loss)
        t = t[t["axis"] == "all"].set_index(["checkpoint", "language"])[["abs", "band"]]
        t.columns = [f"abs_{loss}", f"band_{loss}"]
        wide = t if wide is None else wide.join(t, how="outer")
    return wide.reset_index()


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


def loss_check(
    scores: pd.DataFrame,
    *,
    loss: str,
    reference: str = "en",
    alpha: float = 0.05,
    mediation: pd.DataFrame | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (checkpoint or "pooled", language != reference): ABS and band under every
    loss; ``effect_<loss>`` (Wilcoxon-Holm p < alpha for the language's delta vs the
    reference's, matched prompts; pooled: subjects = (checkpoint, prompt)); ``mediation_<loss>``
    (the indirect effect's CI excludes 0 for either mediator); and the flags
    ``effect_token_mean_only`` / ``mediation_token_mean_only``: seen under token_mean but not
    under ``loss``, the chosen one. ``mediation`` (from :func:`mediation_under_losses` over all
    losses) is computed when not given. Columns: :data:`LOSS_CHECK_COLUMNS`.
    """
    loss = canonical_loss(loss)
    if mediation is None:
        mediation = mediation_under_losses(scores, reference=reference, n_boot=n_boot, seed=seed)
    abs_w = abs_by_loss(scores)
    abs_w["checkpoint"] = abs_w["checkpoint"].replace({"all": "pooled"})
    abs_w = abs_w.set_index(["checkpoint", "language"])
    effects = {x: _effects(scores, x, reference, alpha) for x in LOSSES}
    med = mediation.dropna(subset=["indirect_lo", "indirect_hi"]) if len(mediation) else mediation
    excl = {}
    for r in med.itertuples(index=False):
        key = (str(r.loss), str(r.checkpoint), str(r.language))
        excl[key] = excl.get(key, False) or bool(r.indirect_lo > 0 or r.indirect_hi < 0)
    rows = []
    for ck, lang in sorted(set(effects["token_mean"]) | set(effects[loss])):
        row = {"checkpoint": ck, "language": lang, "reference": reference, "loss": loss}
        for x in LOSSES:
            a = abs_w.loc[(ck, lang)] if (ck, lang) in abs_w.index else None
            row[f"abs_{x}"] = float(a[f"abs_{x}"]) if a is not None else np.nan
            row[f"band_{x}"] = a[f"band_{x}"] if a is not None else None
            row[f"effect_{x}"] = effects[x].get((ck, lang), False)
            row[f"mediation_{x}"] = excl.get((x, ck, lang), False)
        row["effect_token_mean_only"] = row["effect_token_mean"] and not row[f"effect_{loss}"]
        row["mediation_token_mean_only"] = row["mediation_token_mean"] and not row[f"mediation_{loss}"]
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LOSS_CHECK_COLUMNS))
