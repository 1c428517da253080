"""Cross-lingual cloze bias (seeds/include_*): how much more natural does a model find the
stereotype completion of a culturally grounded prompt than the anti-stereotype one, in
English, Hindi, Bengali, Marathi, Tamil and Hinglish?

Scoring (template `cloze_v1`, hashed into the unit identity): the text before the blank is
the shared context; the scored continuation is the completion alone (`scored_span
"completion"`) or the completion plus the rest of the sentence after the blank
(`"completion_and_rest"`). The default `"auto"` takes the completion alone for attribute
slots - the conditional log-likelihood of the attribute given the prompt; adding the shared
right context would, with the mean loss, dilute delta by however much of the sentence
follows the blank, which differs systematically between SOV Indic word order and English -
and the completion plus the rest for group slots, where the stereotype content is in the
rest (with loss "sum" that is exactly the whole-sentence log-likelihood comparison, the
shared prefix cancelling). Scoring uses `score_continuations` (joint encoding, split at the
character boundary). Per completion the unit keeps the summed NLL (`nll_<c>_sum`), the token
count, the UTF-8 byte count and the word count, the per-token and per-byte means
(`nll_<c>_token_mean`, `nll_<c>_byte_mean`) and, in `nll_<c>`, the loss that delta uses:
delta = nll_anti - nll_stereo with loss = summed NLL by default (`sum`: delta is the log-odds
between the completions in nats, independent of tokenizer and script; also `token_mean`, the
INCLUDE paper's per-token mean, and `byte_mean`, which depends on the script; see
analyses.cloze_metrics), delta_clipped = max(delta, 0).
The residual stream (resid_pre of the unit's layer) is kept at the position whose next
token is the first continuation token: array `resid` [n_items, 3, d] (stereotype,
anti-stereotype, meaningless; NaN where a completion was not scored), rows in the order of
the unit's `scores` table.

The item table and the bank layouts it is read from: banks.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from analyses.cloze_metrics import add_delta, canonical_loss
from analyses.fertility import NO_REFERENCE, item_fertility, language_order, tokenizer_fertility, word_prefix_for
from cache.store import Unit
from interp.banks import Bank
from interp.core.errors import BankError, ConfigError
from interp.runner.options import ScoringConfig
from interp.studies.base import Payload, ProbeTarget, ReportSection, RunConfig, StudySpec, Template
from interp.studies.cloze import probe
from interp.studies.cloze.analysis import analyze_cloze
from interp.studies.cloze.banks import BLANK, COMPLETIONS, NAME, load_cloze_bank
from interp.studies.cloze.options import ClozeOptions

if TYPE_CHECKING:
    from interp.model.loading import LoadedModel

VERSION = "1"
SHORT = {"stereotype": "stereo", "anti_stereotype": "anti", "meaningless": "meaningless"}

SCORED_SPANS = ("auto", "completion", "completion_and_rest")
LOSSES = ("sum", "token_mean", "byte_mean", "mean")  # "mean": earlier spelling of token_mean
FERTILITY_TEXTS = ("context_without_blank", "context_filled")

# ---------------------------------------------------------------- template and trials


def check_template(template: Template) -> dict:
    """The scoring choices of a cloze template, validated (errors name the template)."""
    t = template.data
    choices = {
        "scored_span": t.get("scored_span", "auto"),
        "loss": t.get("loss", "sum"),
        "fertility_text": (t.get("item_fertility") or {}).get("text", "context_without_blank"),
        "fertility_mode": (t.get("item_fertility") or {}).get("mode", "context"),
    }
    allowed = {
        "scored_span": SCORED_SPANS,
        "loss": LOSSES,
        "fertility_text": FERTILITY_TEXTS,
        "fertility_mode": ("context", "isolated"),
    }
    for k, ok in allowed.items():
        if choices[k] not in ok:
            raise BankError(
                f"{template.source or template.name}: field {k} has unknown value {choices[k]!r} "
                f"(expected {', '.join(ok)})"
            )
    return choices


def resolve_span(scored_span: str, slot: str) -> str:
    """ "auto": the completion alone for attribute slots, completion plus rest for group slots."""
    if scored_span == "auto":
        return "completion_and_rest" if slot == "group" else "completion"
    return scored_span


def continuation_texts(
    context: str, completions: Mapping[str, str], *, scored_span: str = "completion_and_rest"
) -> tuple[str, dict[str, str]]:
    """(shared context, {key: scored continuation}) for one item; empty completions are left out.

    The text before the blank is the context; whitespace before the blank moves into the
    continuation. With no blank the context is a prefix and the completion follows it after
    one space (none when the context is empty or already ends in whitespace).
    """
    if BLANK in context:
        pre, post = context.split(BLANK, 1)
    else:
        pre, post = context, ""
    stem = pre.rstrip()
    sep = pre[len(stem) :]
    if BLANK not in context and stem and not sep:
        sep = " "
    tail = post if scored_span == "completion_and_rest" else ""
    return stem, {k: sep + c + tail for k, c in completions.items() if c and c.strip()}


def fertility_text(context: str, stereotype: str, how: str = "context_without_blank") -> str:
    """The item text whose tokens per word is the per-item mediator."""
    if how == "context_filled":
        stem, conts = continuation_texts(context, {"s": stereotype})
        return stem + conts["s"]
    text = re.sub(r"\s+", " ", context.replace(BLANK, " ")).strip()
    return text or fertility_text(context, stereotype, "context_filled")  # whole-sentence items


def score_items(
    lm: LoadedModel,
    items: pd.DataFrame,
    *,
    scored_span: str = "auto",
    layer: int | None = None,
    cfg: ScoringConfig = ScoringConfig(),
    where: str = "",
    layers: Sequence[int] | None = None,
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Score each item's completions: one row per item with nll_<c> (mean per-token NLL),
    nll_<c>_sum, n_tokens_<c>, n_bytes_<c> (UTF-8 bytes of the scored text) and n_words_<c>
    (whitespace words of it) for c in stereo, anti, meaningless (NaN / 0 when a completion
    is empty), the resolved scored_span, and the residual [n_items, 3, d] at `layer` (None
    without a layer), or [n_items, 3, len(layers), d] when `layers` is given."""
    want = list(layers) if layers is not None else ([layer] if layer is not None else [])
    requests, keys, spans, texts = [], [], [], []
    for row in items.itertuples(index=False):
        spans.append(resolve_span(scored_span, getattr(row, "slot", "attribute")))
        stem, conts = continuation_texts(row.context, {c: getattr(row, c) for c in COMPLETIONS}, scored_span=spans[-1])
        if "stereotype" not in conts or "anti_stereotype" not in conts:
            raise ConfigError(
                f"item {row.prompt_id}/{row.language}: stereotype and anti_stereotype completions are needed"
            )
        requests.append((stem, list(conts.values())))
        keys.append(list(conts))
        texts.append(list(conts.values()))
    from interp.runner.scoring import score_continuations

    names = [f"{where}prompt_id {r.prompt_id} language {r.language}" for r in items.itertuples(index=False)]
    scores = score_continuations(lm, requests, layers=want or None, cfg=cfg, names=names)
    n = len(items)
    out = {f"{p}_{SHORT[c]}{s}": np.full(n, np.nan) for c in COMPLETIONS for p, s in (("nll", ""), ("nll", "_sum"))}
    for c in COMPLETIONS:
        for count in ("n_tokens", "n_bytes", "n_words"):
            out[f"{count}_{SHORT[c]}"] = np.zeros(n, dtype=np.int64)
    resid = None
    if want:
        d = scores.resid[want[0]].shape[-1]
        resid = np.full((n, 3, len(want), d), np.nan, dtype=np.float32)
    k = 0
    for i, ks in enumerate(keys):
        for key, text in zip(ks, texts[i]):
            s = SHORT[key]
            # the scored text's UTF-8 bytes (byte_mean loss) and words (completion fertility)
            out[f"n_bytes_{s}"][i] = len(text.encode("utf-8"))
            out[f"n_words_{s}"][i] = len(text.split())
            out[f"nll_{s}_sum"][i] = -scores.sum_logp[k]
            out[f"nll_{s}"][i] = -scores.mean_logp[k]
            out[f"n_tokens_{s}"][i] = scores.n_tokens[k]
            if resid is not None:
                for j, lay in enumerate(want):
                    resid[i, COMPLETIONS.index(key), j] = scores.resid[lay][k]
            k += 1
    table = items[["prompt_id", "language", "axis", "group"]].reset_index(drop=True).copy()
    for c in COMPLETIONS:
        s = SHORT[c]
        table[f"nll_{s}"] = out[f"nll_{s}"]
    for c in COMPLETIONS:
        s = SHORT[c]
        table[f"nll_{s}_sum"] = out[f"nll_{s}_sum"]
        table[f"n_tokens_{s}"] = out[f"n_tokens_{s}"]
    for c in COMPLETIONS:
        table[f"n_bytes_{SHORT[c]}"] = out[f"n_bytes_{SHORT[c]}"]
        table[f"n_words_{SHORT[c]}"] = out[f"n_words_{SHORT[c]}"]
    table["scored_span"] = spans
    if resid is not None and layers is None:
        resid = resid[:, :, 0]  # the single-layer call keeps its [n_items, 3, d] shape
    return table, resid


# ---------------------------------------------------------------- fertility (computed in the unit run)


def bank_parallel_texts(items: pd.DataFrame) -> tuple[dict[str, list[str]], bool]:
    """({language: texts}, parallel) from cloze items: contexts with the stereotype filled in.

    Texts are aligned by prompt_id over the prompts present in every language (parallel=True);
    when no prompt is, each language keeps all its texts and parity cannot be computed.
    """
    df = items.drop_duplicates(["prompt_id", "language"]).copy()
    df["_text"] = [fertility_text(c, s, "context_filled") for c, s in zip(df["context"], df["stereotype"])]
    langs = language_order(df["language"].unique())
    per = {lang: df[df["language"] == lang].set_index("prompt_id")["_text"] for lang in langs}
    common = set.intersection(*(set(s.index) for s in per.values())) if per else set()
    if common:
        order = sorted(common)
        return {lang: [str(per[lang][p]) for p in order] for lang in langs}, True
    return {lang: [str(t) for t in per[lang].sort_index()] for lang in langs}, False


def unit_fertility(tokenizer, items: pd.DataFrame) -> pd.DataFrame:
    """The tokenizer's fertility over the bank's translations with every language as the
    parity reference (column ``reference``; "" = none, parity NaN), so the report can pick
    the reference language without reopening the checkpoint."""
    texts, parallel = bank_parallel_texts(items)
    refs = list(texts) if parallel else []
    frames = [
        tokenizer_fertility(tokenizer, texts, name="", parallel=parallel, reference=ref).assign(reference=ref)
        for ref in refs
    ]
    frames.append(
        tokenizer_fertility(tokenizer, texts, name="", parallel=True, reference=NO_REFERENCE).assign(reference="")
    )
    return pd.concat(frames, ignore_index=True).drop(columns=["tokenizer"])


# ---------------------------------------------------------------- study


class ClozeStudy(StudySpec):
    name = NAME
    version = VERSION
    default_banks = ("cloze",)
    shipped_banks = {"cloze": "cloze.jsonl"}
    default_template = "cloze_v1"
    Options = ClozeOptions
    sample_by = "prompt_id"
    stratify_by = "axis"
    report_sections = (
        ReportSection(
            "cloze_abs.csv",
            "Cross-lingual bias: Average Bias Score",
            ("checkpoint", "language", "axis", "loss", "abs", "odds", "abs_token_mean", "band_token_mean", "n", "bank"),
            note=(
                "Average Bias Score: mean over prompts of max(0, δ) with δ = loss(anti-stereotype) − loss(stereotype), "
                "per language and axis (axis `all`: axes weigh equally). The loss (column `loss`) is `sum` by default: "
                "δ is the log-odds between the two completions in nats, independent of tokenizer and script, and "
                "`odds` = e^ABS (stereotype : anti-stereotype); no band is given on this scale. Beside it, "
                "`abs_token_mean` is the INCLUDE paper's per-token reading and `band_token_mean` the paper's band on "
                "that scale (its bands are defined on it only). Option cloze_loss; the scored span is the toolkit's "
                "default (template cloze_v1)."
            ),
        ),
        ReportSection(
            "cloze_abs_by_loss.csv",
            "ABS by loss: sum (the default) beside token_mean (the INCLUDE reading) and byte_mean",
            (
                "checkpoint",
                "language",
                "abs_sum",
                "odds_sum",
                "abs_token_mean",
                "band_token_mean",
                "abs_byte_mean",
                "bank",
            ),
            note=(
                "Under token_mean a preference sitting in few tokens is divided by the token count, so languages a "
                "tokenizer cuts finely look unbiased; under byte_mean Indic scripts spend 3 bytes per character, so "
                "their ABS shrinks about threefold. Bands: the paper's, under token_mean only."
            ),
        ),
        ReportSection(
            "cloze_loss_check.csv",
            "Findings that appear under another loss but not under sum",
            note=(
                "Per checkpoint (and pooled) and language: effect vs the reference (Wilcoxon-Holm), rank by ABS and "
                "mediation (indirect CI excludes 0) under each loss; effect_not_under_sum / ranking_not_under_sum / "
                "mediation_not_under_sum list the losses under which a finding appears that sum, the default scale, "
                "does not show (effect_token_mean_only / mediation_token_mean_only: token_mean against the chosen loss)."
            ),
        ),
        ReportSection(
            "cloze_sanity.csv",
            "Cloze sanity: meaningless completion preferred",
            note=(
                "Share of prompts where the meaningless completion has a lower loss than both real ones: high values mean "
                "the model reads the language poorly and its bias scores there are mostly noise."
            ),
        ),
        ReportSection(
            "fertility.csv",
            "Tokenizer fertility",
            note=(
                "Tokens per word of each tokenizer on parallel text (fertility), the share of words split into several "
                "tokens, and parity (tokens relative to the reference language); how words are delimited is the toolkit's "
                "choice."
            ),
        ),
        ReportSection(
            "mediation.csv",
            "Mediation of the language effect through fertility",
            (
                "checkpoint",
                "language",
                "loss",
                "mediator",
                "total",
                "total_lo",
                "total_hi",
                "indirect",
                "indirect_lo",
                "indirect_hi",
                "bank",
            ),
            note=(
                "This toolkit's addition (INCLUDE has neither fertility nor mediation). Effect of language (vs English) "
                "on δ (nats of log-odds under the default loss sum) split into the part through tokenizer fertility "
                "(indirect) and the rest, per loss and mediator "
                "(context_fertility, completion_fertility), prompt-cluster bootstrap CIs; the linear models are the "
                "toolkit's choice, and prompt content can confound fertility and δ."
            ),
        ),
    )
    demo_probe_targets = ("delta",)

    def load_bank(self, ref: str | Path) -> Bank:
        return load_cloze_bank(ref)

    def check_template(self, template: Template) -> None:
        check_template(template)

    def settings(self, tokenizer, cfg: RunConfig) -> dict:
        return {"readout": "continuation-nll-v1", "resid_dtype": cfg.resid_dtype}

    def parallel_texts(self, items: pd.DataFrame) -> tuple[dict[str, list[str]], bool]:
        return bank_parallel_texts(items)

    def run_unit(
        self, lm: LoadedModel, bank: Bank, template: Template, layers: tuple[int, ...], cfg: RunConfig
    ) -> Payload:
        choices = check_template(template)
        prefix = word_prefix_for(lm.tokenizer) if choices["fertility_mode"] == "isolated" else ""
        items = bank.items.reset_index(drop=True)
        table, resid = score_items(
            lm, items, scored_span=choices["scored_span"], layers=layers, cfg=cfg.scoring, where=f"bank {bank.source}: "
        )
        loss = canonical_loss(choices["loss"])
        table = add_delta(table, loss=loss)
        table["fertility"] = [
            item_fertility(
                lm.tokenizer,
                fertility_text(r.context, r.stereotype, choices["fertility_text"]),
                mode=choices["fertility_mode"],
                word_prefix=prefix,
            )
            for r in items.itertuples(index=False)
        ]
        # tokens per word of the two scored completions: the mediator measured on the text
        # that delta is computed from (the context's fertility above is the other one)
        words = table["n_words_stereo"] + table["n_words_anti"]
        table["fertility_completion"] = (table["n_tokens_stereo"] + table["n_tokens_anti"]) / words.where(words > 0)
        table["loss"] = loss
        texts = items[
            ["prompt_id", "language", "context", "stereotype", "anti_stereotype", "meaningless", "slot"]
        ].copy()
        arrays = {"resid": resid.astype(cfg.resid_dtype)} if resid is not None else {}
        return Payload(
            tables={"scores": table, "texts": texts, "fertility": unit_fertility(lm.tokenizer, items)}, arrays=arrays
        )

    # -- reading the cache

    def analyze(self, units: list[Unit], results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]:
        """Scores, ABS (three losses), sanity, statistics, fertility and mediation; the ABS heatmaps,
        fertility bars and mediation forest are drawn here, from the tables just computed
        (analysis.py)."""
        return analyze_cloze(units, results_dir, cfg)

    def figures(self, out: Path, results: Path, figures: Path) -> None:
        """Nothing to redraw from results/: `analyze` draws this study's figures."""

    def probe_targets(self) -> Mapping[str, ProbeTarget]:
        """delta, stereotype_preferred (probe.py)."""
        return {name: ProbeTarget(kind=kind, extract=probe.extract) for name, kind in probe.TARGET_KINDS.items()}
