"""Tokenizer fertility: how finely a tokenizer cuts each language.

Fertility (Rust et al., 2021) is tokens per word; parity (Petrov et al., 2023) is the
ratio of a sentence's token count to its English translation's. A tokenizer that needs
4-7x more tokens for Bengali than for English gives the model a very different input
for "the same" prompt - the candidate mediator of the language effect on bias.

Tokenizers are duck-typed: anything with ``encode(text, add_special_tokens=False)``
returning a list of ids (Hugging Face tokenizers) or an object with ``.ids`` (a raw
``tokenizers.Tokenizer``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

import numpy as np
import pandas as pd

from interp.core.errors import InterpError
from interp.core.files import decode_utf8, regular_file

__all__ = [
    "FERTILITY_COLUMNS",
    "FLORES_TO_SHORT",
    "LANGUAGE_ORDER",
    "default_words",
    "fertility_table",
    "item_fertility",
    "language_from_filename",
    "language_order",
    "read_parallel_files",
    "tokenizer_fertility",
    "word_prefix_for",
]

# FLORES-200 codes of the INCLUDE languages -> the short codes used in score tables
FLORES_TO_SHORT: Mapping[str, str] = MappingProxyType(
    {"eng_Latn": "en", "hin_Deva": "hi", "ben_Beng": "bn", "mar_Deva": "mr", "tam_Taml": "ta"}
)
_FLORES_CODE = re.compile(r"^[a-z]{2,3}_[A-Z][a-z]{3}$")
_SPLIT_NAMES = frozenset({"dev", "devtest", "test", "train", "valid", "txt"})


class Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> object: ...


WordSplitter = Callable[[str], Sequence[str]]


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def default_words(text: str) -> list[str]:
    """Whitespace split, then strip leading/trailing Unicode punctuation (category P*).

    Inner punctuation stays ("don't", "well-known"); tokens that were only punctuation
    (e.g. the Devanagari danda "।", a dash) are not words. Combining marks (Mn/Mc) are
    not punctuation, so Indic words stay intact.
    """
    words = []
    for raw in text.split():
        start, end = 0, len(raw)
        while start < end and _is_punct(raw[start]):
            start += 1
        while end > start and _is_punct(raw[end - 1]):
            end -= 1
        if start < end:
            words.append(raw[start:end])
    return words


def _n_tokens(tokenizer: Encoder, text: str) -> int:
    out = tokenizer.encode(text, add_special_tokens=False)
    ids = getattr(out, "ids", out)  # tokenizers.Encoding vs list of ids
    return len(ids)  # type: ignore[arg-type]


def item_fertility(
    tokenizer: Encoder,
    text: str,
    *,
    mode: Literal["context", "isolated"] = "context",
    word_splitter: WordSplitter | None = None,
    word_prefix: str = "",
) -> float:
    """Tokens per word of one item's text, the per-item mediator value.

    ``mode="context"`` (default) counts the tokens of the whole text without special
    tokens - what the model actually reads; ``"isolated"`` sums the tokens of each word
    encoded alone as ``word_prefix + word`` (the definition of ``fertility`` in
    :func:`fertility_table`). NaN when the text has no words.
    """
    words = (word_splitter or default_words)(text)
    if not words:
        return float("nan")
    if mode == "context":
        return _n_tokens(tokenizer, text) / len(words)
    if mode == "isolated":
        return sum(_n_tokens(tokenizer, word_prefix + w) for w in words) / len(words)
    raise ValueError(f"mode must be 'context' or 'isolated', got {mode!r}")


def fertility_table(
    tokenizer: Encoder,
    texts_by_language: Mapping[str, Sequence[str]],
    *,
    tokenizer_name: str,
    reference: str = "en",
    word_splitter: WordSplitter | None = None,
    word_prefix: str = "",
) -> pd.DataFrame:
    """Per-language fertility statistics of one tokenizer.

    Words come from ``word_splitter`` (default :func:`default_words`: whitespace split,
    edge punctuation stripped). All counts exclude special tokens. Ratios are pooled
    over the corpus (total tokens / total words), not means of per-sentence ratios.

    - ``fertility``: tokens per word with each word encoded alone ("isolated") as
      ``word_prefix + word``. Byte-level BPE (GPT-2 style) learns merges for
      " word" with its leading space, so a bare word is cut finer than it is
      mid-sentence; pass ``word_prefix=" "`` for such tokenizers (SentencePiece
      tokenizers usually add their own "▁" prefix). ``fertility_in_context`` needs
      no such choice.
    - ``fertility_in_context``: tokens of each whole sentence / number of words.
    - ``continued_share``: share of words that take >= 2 tokens when encoded alone.
    - ``parity``: mean over sentences i of tokens(sentence_i) / tokens(reference
      sentence_i). The texts must be parallel (same index = same sentence) and as many
      as the reference's, else ValueError. Pairs whose reference sentence has no
      tokens are skipped. NaN for every language when ``reference`` is absent.
    - ``n_sentences``, ``n_words``.

    Columns: tokenizer, language, fertility, fertility_in_context, continued_share,
    parity, n_sentences, n_words (one row per language, in mapping order).
    """
    split = word_splitter or default_words
    cache: dict[str, int] = {}  # words repeat a lot; encode each distinct word once

    def isolated(word: str) -> int:
        if word not in cache:
            cache[word] = _n_tokens(tokenizer, word_prefix + word)
        return cache[word]

    sent_tokens = {
        lang: np.array([_n_tokens(tokenizer, s) for s in sents], dtype=float)
        for lang, sents in texts_by_language.items()
    }
    ref_tokens = sent_tokens.get(reference)
    rows = []
    for lang, sents in texts_by_language.items():
        word_counts = [isolated(w) for s in sents for w in split(s)]
        n_words = len(word_counts)
        parity = float("nan")
        if ref_tokens is not None:
            if len(sents) != len(ref_tokens):
                raise ValueError(
                    f"parity needs parallel texts: {lang!r} has {len(sents)} sentences, "
                    f"reference {reference!r} has {len(ref_tokens)}"
                )
            ok = ref_tokens > 0
            if ok.any():
                parity = float(np.mean(sent_tokens[lang][ok] / ref_tokens[ok]))
        rows.append(
            {
                "tokenizer": tokenizer_name,
                "language": lang,
                "fertility": sum(word_counts) / n_words if n_words else float("nan"),
                "fertility_in_context": (float(sent_tokens[lang].sum()) / n_words if n_words else float("nan")),
                "continued_share": (sum(c >= 2 for c in word_counts) / n_words if n_words else float("nan")),
                "parity": parity,
                "n_sentences": len(sents),
                "n_words": n_words,
            }
        )
    columns = [
        "tokenizer",
        "language",
        "fertility",
        "fertility_in_context",
        "continued_share",
        "parity",
        "n_sentences",
        "n_words",
    ]
    return pd.DataFrame(rows, columns=columns)


def language_from_filename(path: str | Path, codes: Mapping[str, str] = FLORES_TO_SHORT) -> str:
    """Language code of a FLORES-layout file: ``hin_Deva.devtest`` or ``dev.hin_Deva``.

    A dot-separated part shaped like a FLORES code (``xxx_Scrp``) wins; otherwise the
    single part that is not a split name (dev, devtest, test, train, valid, txt), so
    ``hi.txt`` -> ``hi``. Known FLORES codes map through ``codes``; others are kept.
    """
    parts = Path(path).name.split(".")
    flores = [p for p in parts if _FLORES_CODE.match(p)]
    if len(flores) == 1:
        return codes.get(flores[0], flores[0])
    rest = [p for p in parts if p and p.lower() not in _SPLIT_NAMES]
    if len(flores) == 0 and len(rest) == 1:
        return codes.get(rest[0], rest[0])
    raise ValueError(f"cannot tell the language code from file name {Path(path).name!r}")


def _read_lines(path: Path) -> list[str]:
    # split on "\n" only: str.splitlines also breaks on U+2028 etc. inside a sentence
    regular_file(path, limit=1 << 30, error=InterpError)  # a FIFO would hang the read
    text = decode_utf8(Path(path).read_bytes(), path, error=InterpError)  # names the file, line and byte
    if text.endswith("\n"):
        text = text[:-1]
    lines = [line.rstrip("\r") for line in text.split("\n")] if text else []
    if not any(line.strip() for line in lines):
        raise InterpError(f"{path}: no text (empty, or blank lines only): nothing to count tokens per word on")
    return lines


def read_parallel_files(paths: Iterable[str | Path]) -> dict[str, list[str]]:
    """Read line-aligned parallel files (one sentence per line, UTF-8) keyed by language.

    Language codes come from the file names (:func:`language_from_filename`). All files
    must have the same number of lines (line i is the same sentence in every file), else
    ValueError naming the offending file and both counts; two files of one language are
    also an error.
    """
    out: dict[str, list[str]] = {}
    origin: dict[str, Path] = {}
    for p in map(Path, paths):
        lang = language_from_filename(p)
        if lang in out:
            raise ValueError(f"language {lang!r} from both {origin[lang]} and {p}")
        out[lang], origin[lang] = _read_lines(p), p
    if out:
        # blame the file that disagrees with most others, not whichever came first
        counts = Counter(len(lines) for lines in out.values())
        expected = max(counts, key=lambda c: (counts[c], c == len(next(iter(out.values())))))
        agree = next(origin[lang] for lang, lines in out.items() if len(lines) == expected)
        for lang, lines in out.items():
            if len(lines) != expected:
                raise ValueError(
                    f"{origin[lang]} has {len(lines)} lines but {agree} has {expected}; "
                    "parallel files must be line-aligned"
                )
    return out


# ---------------------------------------------------------------- per-tokenizer tables
# (moved here from analyses/fertility_run.py: pure functions of a duck-typed tokenizer)

FERTILITY_COLUMNS = ("tokenizer", "language", "fertility", "continued_share", "parity")
LANGUAGE_ORDER = ("en", "hi", "bn", "mr", "ta", "hinglish", "banglish")
NO_REFERENCE = "\x00no-reference"  # a language code no table has: parity left NaN


def language_order(langs) -> list[str]:
    """The study's languages first in their usual order, then any others sorted."""
    langs = list(dict.fromkeys(map(str, langs)))
    return [lang for lang in LANGUAGE_ORDER if lang in langs] + sorted(set(langs) - set(LANGUAGE_ORDER))


def word_prefix_for(tokenizer) -> str:
    """ " " for byte-level BPE tokenizers (GPT-2 style, which learn merges for " word"), else "".

    Detected by the byte-level space marker "Ġ" on the second word of "a b"; SentencePiece
    tokenizers add their own "▁" prefix to an isolated word and get "".
    """
    try:
        ids = tokenizer.encode("a b", add_special_tokens=False)
        pieces = tokenizer.convert_ids_to_tokens(list(getattr(ids, "ids", ids)))
    except Exception:  # a tokenizer without convert_ids_to_tokens: no prefix
        return ""
    return " " if any(str(p).startswith("Ġ") for p in pieces) else ""


def tokenizer_fertility(
    tokenizer, texts: dict[str, list[str]], *, name: str, parallel: bool = True, reference: str = "en"
) -> pd.DataFrame:
    """fertility_table with the word prefix chosen for this tokenizer (see word_prefix_for)."""
    return fertility_table(
        tokenizer,
        texts,
        tokenizer_name=name,
        reference=reference if parallel else NO_REFERENCE,
        word_prefix=word_prefix_for(tokenizer),
    )
