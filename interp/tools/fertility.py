"""`interp fertility` (moved from analyses/fertility_run.py: it loads tokenizers): tokenizer fertility per language for tokenizers or checkpoints.

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

from analyses.fertility import FERTILITY_COLUMNS, language_order, read_parallel_files, tokenizer_fertility
from analyses.io import write_table


def load_any_tokenizer(path: str | Path):
    """A tokenizer from a checkpoint directory, a tokenizer directory or a tokenizer.json file."""
    from interp.core.errors import CheckpointError
    from interp.model.loading import load_tokenizer

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
    from analyses.cloze_figures import plot_fertility_bars
    from interp.core.errors import ConfigError

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
        from interp.studies import get_study

        cloze = get_study("cloze")  # the cloze bank's translations are the parallel corpus
        b = cloze.load_bank(bank)
        texts, is_parallel = cloze.parallel_texts(b.items)
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
