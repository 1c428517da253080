"""Which loss a cached cloze unit's scores are read under.

A unit keeps the loss its template chose (column ``loss``), but every loss is recomputed
from the stored sums and counts, so old caches are read without rescoring. Units scored
under an earlier shipped ``cloze_v1`` (whose loss field was that release's default, not the
user's choice: ``mean`` first, then ``byte_mean``) are read under today's default, ``sum``.
"""

from __future__ import annotations

import pandas as pd

from analyses.cloze_metrics import DEFAULT_LOSS
from cache.store import Unit

# template_hash (sha256_json of the file) of earlier shipped cloze_v1 versions -> their loss
SUPERSEDED_TEMPLATES: dict[str, str] = {
    "316ebf21ebac0cd04ae01efe5c1366f639219e4f41583089346f2d77712b0f71": "mean",  # commit 872f9cd
    "478cdbf3904596292c7741b62159f2fd416502164e3f98e8e10a3a7b3fb66ec0": "byte_mean",  # commit 81038e9
}


def unit_scores(unit: Unit) -> pd.DataFrame:
    """The unit's ``scores`` table; its ``loss`` column set to :data:`DEFAULT_LOSS` for a unit
    scored under an earlier shipped default template (see the module docstring)."""
    scores = unit.tables["scores"]
    if str(unit.attrs.get("template_hash", "")) in SUPERSEDED_TEMPLATES:
        scores = scores.assign(loss=DEFAULT_LOSS)
    return scores
