"""The record's counts: checks and independent groups by status (validate writes them, report and
the CLI print them; below both so that neither imports the other)."""

from __future__ import annotations

import pandas as pd

from interp.organism import stats as S


def group_summary(checks: pd.DataFrame) -> pd.DataFrame:
    """Per group of checks reading one quantity: how many checks, recovered, not recovered."""
    g = checks.groupby("group", sort=False)["status"]
    return pd.DataFrame(
        {
            "checks": g.size(),
            "recovered": g.apply(lambda s: int((s == S.RECOVERED).sum())),
            "not_recovered": g.apply(lambda s: int((s == S.NOT_RECOVERED).sum())),
            "undetermined": g.apply(lambda s: int((s == S.UNDETERMINED).sum())),
        }
    ).reset_index()


def headline(checks: pd.DataFrame) -> dict[str, int]:
    """The counts the record opens with: checks and groups (a group is recovered when every check
    in it is; partly when some are)."""
    grp = group_summary(checks)
    return {
        "checks": len(checks),
        "recovered": int((checks["status"] == S.RECOVERED).sum()),
        "not_recovered": int((checks["status"] == S.NOT_RECOVERED).sum()),
        "undetermined": int((checks["status"] == S.UNDETERMINED).sum()),
        "groups": len(grp),
        "groups_recovered": int((grp["recovered"] == grp["checks"]).sum()),
        "groups_partly": int(((grp["recovered"] > 0) & (grp["recovered"] < grp["checks"])).sum()),
    }
