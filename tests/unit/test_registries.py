"""Bank formats, shipped banks and studies come from registries: the users' public layouts are
entries, and an unrecognised file names every layout its study reads."""

from __future__ import annotations

import pytest

from interp.banks import BANK_FORMATS, SHIPPED, Sniffed, formats_for, read_bank
from interp.core.errors import BankError
from interp.studies import all_studies, study_names


def test_builtin_entries():
    assert study_names() == ("pressure", "classify", "cloze")
    assert {"moral", "factual", "conversational", "cloze"} <= set(SHIPPED.names())
    assert [f.name for f in formats_for("pressure")] == ["pressure", "ethics", "truthfulqa"]
    assert [f.name for f in formats_for("cloze")] == ["stereoset", "crows_pairs", "indian_bhed", "cloze"]
    assert BANK_FORMATS.get("conversational").kind == "classify"
    for spec in all_studies():
        assert set(spec.default_banks) <= set(SHIPPED.names())
        for name, target in spec.probe_targets().items():
            assert target.kind in ("ridge", "logistic"), (spec.name, name)


@pytest.mark.parametrize(
    "header, kind, found",
    [
        ("label,input,is_short,edited\n1,I took the money,False,False\n", "pressure", "ethics"),
        (
            "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
            "a,b,Is the sky green?,No,No,Yes,x\n",
            "pressure",
            "truthfulqa",
        ),
        (
            ",sent_more,sent_less,stereo_antistereo,bias_type\n0,Poor people are lazy.,Rich people are lazy.,stereo,"
            "socioeconomic\n",
            "cloze",
            "crows_pairs",
        ),
        (
            ",Target_Stereotypical,Target_Anti-Stereotypical,Sentence\n0,['x'],['y'],MASK people are poor.\n",
            "cloze",
            "indian_bhed",
        ),
    ],
)
def test_public_layouts_are_recognised(tmp_path, header, kind, found):
    path = tmp_path / "bank.csv"
    path.write_text(header, encoding="utf-8")
    chosen = [f.name for f in formats_for(kind) if f.recognise(Sniffed(path))]
    assert chosen[0] == found
    assert len(read_bank(path, kind)) == 1


def test_unknown_layout_lists_the_formats(tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text("foo,bar\n1,2\n", encoding="utf-8")
    with pytest.raises(BankError, match="unknown layout .*ETHICS label,input or TruthfulQA"):
        read_bank(path, "pressure")
