"""Tokenizer fertility: exact numbers with a character tokenizer, real BPE behaviour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyses.fertility import (
    default_words,
    fertility_table,
    item_fertility,
    language_from_filename,
    read_parallel_files,
)


class CharTokenizer:
    """One token per non-whitespace character; a BOS id when special tokens are asked
    for, so a caller that forgets ``add_special_tokens=False`` gets different counts."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [ord(c) for c in text if not c.isspace()]
        return ([0] if add_special_tokens else []) + ids


TEXTS = {
    "en": ["The cat sat.", "A dog, ran!"],
    "hi": ["मैं घर गया।", "राम आया"],
}


def test_default_words() -> None:
    assert default_words("The cat sat.") == ["The", "cat", "sat"]
    assert default_words("A dog, ran!") == ["A", "dog", "ran"]
    assert default_words("मैं घर गया।") == ["मैं", "घर", "गया"]  # danda stripped, matras kept
    assert default_words('don\'t — "well-known" ...') == ["don't", "well-known"]
    assert default_words("  ") == []


def test_fertility_table_exact_with_char_tokenizer() -> None:
    t = fertility_table(CharTokenizer(), TEXTS, tokenizer_name="chars")
    assert list(t.columns) == [
        "tokenizer",
        "language",
        "fertility",
        "fertility_in_context",
        "continued_share",
        "parity",
        "n_sentences",
        "n_words",
    ]
    en = t.set_index("language").loc["en"]
    hi = t.set_index("language").loc["hi"]
    # en words: The cat sat | A dog ran -> 3+3+3+1+3+3 = 16 chars over 6 words
    assert en.fertility == pytest.approx(16 / 6, abs=1e-12)
    # in context punctuation counts: "The cat sat." = 10, "A dog, ran!" = 9
    assert en.fertility_in_context == pytest.approx(19 / 6, abs=1e-12)
    assert en.continued_share == pytest.approx(5 / 6, abs=1e-12)  # only "A" is 1 token
    assert en.parity == pytest.approx(1.0, abs=1e-12)
    assert (en.n_sentences, en.n_words) == (2, 6)
    # hi words: मैं(3) घर(2) गया(3) | राम(3) आया(3) code points
    assert hi.fertility == pytest.approx(14 / 5, abs=1e-12)
    assert hi.fertility_in_context == pytest.approx(15 / 5, abs=1e-12)  # 9 + 6 incl. danda
    assert hi.continued_share == pytest.approx(1.0, abs=1e-12)
    assert hi.parity == pytest.approx((9 / 10 + 6 / 9) / 2, abs=1e-12)
    assert (hi.n_sentences, hi.n_words) == (2, 5)
    assert set(t.tokenizer) == {"chars"}


def test_fertility_table_parity_rules_and_custom_splitter() -> None:
    no_ref = fertility_table(CharTokenizer(), {"hi": TEXTS["hi"]}, tokenizer_name="c")
    assert np.isnan(no_ref.parity.item())
    with pytest.raises(ValueError, match="parallel"):
        fertility_table(CharTokenizer(), {"en": TEXTS["en"], "hi": TEXTS["hi"][:1]}, tokenizer_name="c")
    # a splitter that keeps punctuation: "sat." becomes a 4-token word
    t = fertility_table(CharTokenizer(), {"en": TEXTS["en"]}, tokenizer_name="c", word_splitter=str.split)
    assert t.fertility.item() == pytest.approx(19 / 6, abs=1e-12)


def test_item_fertility() -> None:
    tok = CharTokenizer()
    assert item_fertility(tok, "The cat sat.") == pytest.approx(10 / 3, abs=1e-12)
    assert item_fertility(tok, "The cat sat.", mode="isolated") == pytest.approx(3.0)
    assert np.isnan(item_fertility(tok, " ... "))
    with pytest.raises(ValueError):
        item_fertility(tok, "x", mode="bogus")  # type: ignore[arg-type]


CORPUS = {
    "en": [
        "the village school opened early today",
        "my mother cooks rice every evening",
        "the teacher spoke to the students",
        "people in the city work very hard",
    ],
    "hi": [
        "आज गाँव का स्कूल जल्दी खुला",
        "मेरी माँ हर शाम चावल बनाती है",
        "शिक्षक ने छात्रों से बात की",
        "शहर के लोग बहुत मेहनत करते हैं",
    ],
    "bn": [
        "আজ গ্রামের স্কুল তাড়াতাড়ি খুলেছে",
        "আমার মা প্রতি সন্ধ্যায় ভাত রান্না করেন",
        "শিক্ষক ছাত্রদের সাথে কথা বললেন",
        "শহরের মানুষ খুব পরিশ্রম করে",
    ],
    "ta": [
        "இன்று கிராமப் பள்ளி சீக்கிரம் திறந்தது",
        "என் அம்மா ஒவ்வொரு மாலையும் சோறு சமைக்கிறார்",
        "ஆசிரியர் மாணவர்களிடம் பேசினார்",
        "நகர மக்கள் மிகவும் கடினமாக உழைக்கிறார்கள்",
    ],
}


@pytest.fixture(scope="module")
def bpe():
    """Byte-level BPE trained offline, almost only on English, wrapped for Hugging Face
    with a BOS post-processor (so special tokens are observable)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<bos>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS["en"] * 20 + CORPUS["hi"][:1], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", tok.token_to_id("<bos>"))]
    )
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", pad_token="<pad>")
    return tok, hf


def test_fertility_with_trained_byte_level_bpe(bpe) -> None:
    raw, hf = bpe
    assert len(hf.encode("the")) == len(hf.encode("the", add_special_tokens=False)) + 1
    t = fertility_table(hf, CORPUS, tokenizer_name="bpe").set_index("language")
    # independent count with the raw tokenizers object
    for lang, sents in CORPUS.items():
        words = [w for s in sents for w in default_words(s)]
        iso = [len(raw.encode(w, add_special_tokens=False).ids) for w in words]
        ctx = [len(raw.encode(s, add_special_tokens=False).ids) for s in sents]
        ref = [len(raw.encode(s, add_special_tokens=False).ids) for s in CORPUS["en"]]
        assert t.loc[lang, "fertility"] == pytest.approx(sum(iso) / len(words), abs=1e-12)
        assert t.loc[lang, "fertility_in_context"] == pytest.approx(sum(ctx) / len(words))
        assert t.loc[lang, "continued_share"] == pytest.approx(np.mean(np.array(iso) >= 2))
        assert t.loc[lang, "parity"] == pytest.approx(np.mean(np.array(ctx) / np.array(ref)))
        assert t.loc[lang, "n_words"] == len(words)
    # an English-trained byte-level BPE fragments Indic scripts (3 UTF-8 bytes a char);
    # its merges include the leading space, so bare English words split more
    spaced = fertility_table(hf, CORPUS, tokenizer_name="bpe", word_prefix=" ")
    spaced = spaced.set_index("language")
    assert spaced.loc["en", "fertility"] < 1.2 < t.loc["en", "fertility"]
    assert t.loc["en", "fertility_in_context"] < 1.2
    for lang in ("hi", "bn", "ta"):
        assert spaced.loc[lang, "fertility"] > 4 * spaced.loc["en", "fertility"]
        assert t.loc[lang, "fertility"] > 2 * t.loc["en", "fertility"]
        assert t.loc[lang, "parity"] > 2.0
        assert t.loc[lang, "continued_share"] > 0.9
    # the raw tokenizers.Tokenizer works too (Encoding.ids)
    raw_table = fertility_table(raw, CORPUS, tokenizer_name="raw").set_index("language")
    np.testing.assert_allclose(raw_table.fertility, t.fertility, atol=1e-12)
    assert item_fertility(hf, CORPUS["bn"][0]) == pytest.approx(
        len(raw.encode(CORPUS["bn"][0], add_special_tokens=False).ids) / 5
    )


def test_language_from_filename() -> None:
    assert language_from_filename("flores/hin_Deva.devtest") == "hi"
    assert language_from_filename("dev.ben_Beng") == "bn"
    assert language_from_filename("eng_Latn.dev") == "en"
    assert language_from_filename("devtest.tam_Taml") == "ta"
    assert language_from_filename("mar_Deva.devtest") == "mr"
    assert language_from_filename("guj_Gujr.devtest") == "guj_Gujr"  # unknown kept
    assert language_from_filename("hing.txt") == "hing"
    with pytest.raises(ValueError):
        language_from_filename("dev.devtest")


def test_read_parallel_files(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.devtest").write_text("Hello.\nThe cat\u2028sat.\n", encoding="utf-8")
    (tmp_path / "hin_Deva.devtest").write_text("नमस्ते।\r\nबिल्ली बैठी।\r\n", encoding="utf-8")
    (tmp_path / "dev.guj_Gujr").write_text("a\nb", encoding="utf-8")  # no final newline
    got = read_parallel_files(sorted(tmp_path.iterdir()))
    assert got == {"guj_Gujr": ["a", "b"], "en": ["Hello.", "The cat\u2028sat."], "hi": ["नमस्ते।", "बिल्ली बैठी।"]}
    (tmp_path / "ben_Beng.devtest").write_text("এক\nদুই\nতিন\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ben_Beng\.devtest has 3 lines but .* has 2"):
        read_parallel_files(sorted(tmp_path.iterdir()))
    dup = tmp_path / "dup"
    dup.mkdir()
    (dup / "hin_Deva.dev").write_text("x\n", encoding="utf-8")
    (dup / "dev.hin_Deva").write_text("y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="both"):
        read_parallel_files(sorted(dup.iterdir()))
