"""The overview page: each study's headline table along the lineage, precision, probes, provenance."""

from __future__ import annotations

from interp.view.encode import records
from interp.view.field_set_pages import summary_payload
from interp.view.sweep_files import SweepFiles

CLASSIFY_COLUMNS = [
    "checkpoint",
    "bank",
    "task",
    "order",
    "accuracy",
    "accuracy_lo",
    "accuracy_hi",
    "macro_f1",
    "macro_f1_lo",
    "macro_f1_hi",
    "mcc",
    "n",
]
CLOZE_COLUMNS = ["checkpoint", "bank", "language", "abs_sum", "abs_token_mean", "band_token_mean", "abs_byte_mean"]
# what a unit's attributes say of where its numbers come from (docs/cache.md)
PROVENANCE = [
    "study",
    "checkpoint",
    "bank",
    "checkpoint_path",
    "checkpoint_fingerprint",
    "content_fingerprint",
    "fingerprint_mode",
    "backend",
    "device",
    "dtype",
    "layer",
    "template",
    "template_hash",
    "bank_hash",
    "bank_source",
    "settings_hash",
    "identity_hash",
    "package_version",
    "schema_version",
]


def provenance(sw: SweepFiles) -> list[dict]:
    rows = []
    for study in ("pressure", "classify", "cloze", "ab_sycophancy", "sycophancy_eval"):
        units = sw.unit_headers(study)
        if not units.empty:
            rows += records(units, PROVENANCE)
    return rows


def overview_payload(sw: SweepFiles) -> dict:
    """Rows of the sweep's tables as written; the page draws them and computes nothing."""
    cloze_abs = sw.table("cloze_abs.csv")
    return {
        "pressure": records(sw.table("pressure_summary.csv")),
        "classify": records(sw.table("classify_summary.csv"), CLASSIFY_COLUMNS),
        "judge": records(sw.table("judge_agreement.csv")),
        "generation": records(sw.table("generation_summary.csv")),
        "cloze": records(sw.table("cloze_abs_by_loss.csv"), CLOZE_COLUMNS),
        "cloze_loss": sorted(cloze_abs["loss"].astype(str).unique()) if cloze_abs is not None else [],
        "precision": records(sw.table("precision.csv")),
        "probes": records(sw.table("probes.csv")),
        "predictive": records(sw.table("predictive.csv")),
        "field_sets": summary_payload(sw),
        "files": sw.result_files(),
    }
