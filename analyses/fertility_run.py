"""`interp fertility`: tokenizer fertility per language for tokenizers or checkpoints.

Only tokenizers are loaded (never weights). Texts are the cloze bank's items - each context
with the stereotype completion in its blank - matched by prompt_id across languages (the
bank's translations are the parallel corpus), or line-aligned FLORES-layout files
(``hin_Deva.devtest``, ``dev.ben_Beng``, ``hi.txt``) given with ``parallel``.

Writes OUT/results/fertility.csv (tokenizer, language, fertility, continued_share, parity,
then fertility_in_context, n_sentences, n_words, source) and OUT/figures/fertility_bars.png.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from analyses.fertility import fertility_table, read_parallel_files
from analyses.io import write_table

FERTILITY_COLUMNS = ("tokenizer", "language", "fertility", "continued_share", "parity")
LANGUAGE_ORDER = ("en", "hi", "bn", "mr", "ta", "hinglish", "banglish")
_NO_REFERENCE = "\x00no-reference"  # a language code no table has: parity left NaN


def language_order(langs) -> list[str]:
    """The study's languages first in their usual order, then any others sorted."""
    langs = list(dict.fromkeys(map(str, langs)))
    return [lang for lang in LANGUAGE_ORDER if lang in langs] + sorted(set(langs) - set(LANGUAGE_ORDER))


def word_prefix_for(tokenizer) -> str:
    """" " for byte-level BPE tokenizers (GPT-2 style, which learn merges for " word"), else "".

    Detected by the byte-level space marker "Ġ" on the second word of "a b"; SentencePiece
    tokenizers add their own "▁" prefix to an isolated word and get "".
    """
    try:
        ids = tokenizer.encode("a b", add_special_tokens=False)
        pieces = tokenizer.convert_ids_to_tokens(list(getattr(ids, "ids", ids)))
    except Exception:  # a tokenizer without convert_ids_to_tokens: no prefix
        return ""
    return " " if any(str(p).startswith("Ġ") for p in pieces) else ""


def bank_parallel_texts(items: pd.DataFrame) -> tuple[dict[str, list[str]], bool]:
    """({language: texts}, parallel) from cloze items: contexts with the stereotype filled in.

    Texts are aligned by prompt_id over the prompts present in every language (parallel=True);
    when no prompt is, each language keeps all its texts and parity cannot be computed.
    """
    from interp.studies.cloze import fertility_text

    df = items.drop_duplicates(["prompt_id", "language"]).copy()
    df["_text"] = [fertility_text(c, s, "context_filled") for c, s in zip(df["context"], df["stereotype"])]
    langs = language_order(df["language"].unique())
    per = {lang: df[df["language"] == lang].set_index("prompt_id")["_text"] for lang in langs}
    common = set.intersection(*(set(s.index) for s in per.values())) if per else set()
    if common:
        order = sorted(common)
        return {lang: [str(per[lang][p]) for p in order] for lang in langs}, True
    return {lang: [str(t) for t in per[lang].sort_index()] for lang in langs}, False


def tokenizer_fertility(tokenizer, texts: dict[str, list[str]], *, name: str, parallel: bool = True,
                        reference: str = "en") -> pd.DataFrame:
    """fertility_table with the word prefix chosen for this tokenizer (see word_prefix_for)."""
    return fertility_table(tokenizer, texts, tokenizer_name=name,
                           reference=reference if parallel else _NO_REFERENCE,
                           word_prefix=word_prefix_for(tokenizer))


def load_any_tokenizer(path: str | Path):
    """A tokenizer from a checkpoint directory, a tokenizer directory or a tokenizer.json file."""
    from interp.errors import CheckpointError
    from interp.loading import load_tokenizer

    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        from transformers import PreTrainedTokenizerFast

        try:
            return PreTrainedTokenizerFast(tokenizer_file=str(p))
        except Exception as exc:
            raise CheckpointError(f"{p}: tokenizer cannot be loaded ({type(exc).__name__}: {exc})") from None
    if not p.exists():
        raise CheckpointError(f"{p}: no such tokenizer or checkpoint directory")
    return load_tokenizer(p)


def _names(paths: Sequence[Path]) -> list[str]:
    """Directory names, with parent components added until they are unique."""
    parts = [p.resolve().parts for p in paths]
    for depth in range(1, max(len(x) for x in parts) + 1):
        names = ["/".join(x[-depth:]) for x in parts]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in paths]


def run_fertility(
    tokenizers_or_checkpoints: Sequence[str | Path],
    *,
    parallel: Sequence[Path] = (),
    out: Path,
    bank: str | Path = "cloze",
    reference: str = "en",
) -> pd.DataFrame:
    """Fertility of each tokenizer per language; writes OUT/results/fertility.csv and
    OUT/figures/fertility_bars.png and returns the table.

    ``parallel``: FLORES-layout files (one sentence per line, line-aligned, language from the
    file name); without them the cloze ``bank`` (shipped ``cloze`` by default) is used.
    """
    from analyses.cloze_report import plot_fertility_bars
    from interp.errors import ConfigError

    if not tokenizers_or_checkpoints:
        raise ConfigError("fertility: give at least one tokenizer or checkpoint directory")
    out = Path(out)
    if parallel:
        try:
            texts = read_parallel_files(parallel)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"fertility: {exc}") from None
        texts = {lang: texts[lang] for lang in language_order(texts)}
        is_parallel, source = True, ",".join(Path(p).name for p in parallel)
    else:
        from interp.studies.cloze import load_cloze_bank

        b = load_cloze_bank(bank)
        texts, is_parallel = bank_parallel_texts(b.items)
        source = b.name
    paths = [Path(p) for p in tokenizers_or_checkpoints]
    frames = []
    for path, name in zip(paths, _names(paths)):
        tok = load_any_tokenizer(path)
        frames.append(tokenizer_fertility(tok, texts, name=name, parallel=is_parallel, reference=reference))
    table = pd.concat(frames, ignore_index=True)
    table["source"] = source
    table = table[list(FERTILITY_COLUMNS) + [c for c in table.columns if c not in FERTILITY_COLUMNS]]
    write_table(table, out / "results" / "fertility.csv", columns=FERTILITY_COLUMNS)
    plot_fertility_bars(table, out / "figures" / "fertility_bars.png")
    return table
