"""The report a newcomer reads: rows stay distinguishable, steps are blank, only lineages are
joined by lines, every section says what its numbers mean."""

import json

import pandas as pd

from analyses.figures import trajectory_groups
from sweeps.report import _keep_distinguishing, report_sections, write_report


def test_classification_rows_keep_their_order(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    rows = [
        {
            "checkpoint": "ck",
            "bank": "conversational",
            "task": "five",
            "order": o,
            "accuracy": 0.2,
            "precision": 0.1,
            "recall": 0.1,
            "macro_f1": 0.1,
            "macro_f1_lo": 0.0,
            "macro_f1_hi": 0.2,
            "mcc": 0.0,
        }
        for o in ("given", "reversed", "averaged")
    ]
    pd.DataFrame(rows).to_csv(res / "classify_summary.csv", index=False)
    text = (write_report(tmp_path)).read_text()
    section = text.split("## Conversational sycophancy classification")[1]
    for order in ("given", "reversed", "averaged"):
        assert f"| {order}" in section
    note = next(sec.note for sec in report_sections() if sec.file == "classify_summary.csv")
    assert note and note in section


def test_dropped_label_columns_come_back_when_rows_would_look_alike():
    full = pd.DataFrame({"checkpoint": ["a", "a"], "variant": ["x", "y"], "const": ["k", "k"], "v": [1.0, 1.0]})
    shown = _keep_distinguishing(full, full[["checkpoint", "v"]].copy())
    assert list(shown.columns) == ["checkpoint", "variant", "v"]
    already = _keep_distinguishing(full, full[["checkpoint", "variant", "v"]].copy())
    assert list(already.columns) == ["checkpoint", "variant", "v"]


def test_steps_are_blank_not_nan(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    pd.DataFrame({"source": ["a", "b"], "target": "t", "step": [float("nan"), 200.0], "I": [0.1, 0.2]}).to_csv(
        res / "predictive.csv", index=False
    )
    (tmp_path / "lineage.json").write_text(
        json.dumps(
            {
                "checkpoints": [
                    {"name": "smollm2", "path": "/x", "step": None},
                    {"name": "sft/step200", "path": "/y", "step": 200},
                ],
                "lineage": None,
            }
        )
    )
    text = write_report(tmp_path).read_text()
    assert "| nan" not in text and "nan |" not in text  # no `nan` cell anywhere
    assert "| smollm2 |  |" in text and "| sft/step200 | 200 |" in text


def test_trajectory_lines_join_only_one_lineage():
    unrelated = trajectory_groups(["smollm2", "gemma3"], None)
    assert unrelated == [("checkpoints", ["smollm2", "gemma3"], False)]
    lineage = {"base": ["base"], "routes": {"sft": ["sft/step1", "sft/final"]}}
    groups = trajectory_groups(["base", "sft/step1", "sft/final", "other-model"], lineage)
    assert ("base→sft", ["base", "sft/step1", "sft/final"], True) in groups
    assert ("other", ["other-model"], False) in groups


def test_every_section_has_a_note():
    missing = [sec.file for sec in report_sections() if not sec.note.strip()]
    assert not missing
