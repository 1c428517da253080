"""Blind or post hoc: was the check file committed before a seed's sweeps first ran? Read from
git (the earliest commit holding this exact content) and the seed's sweep.log."""

import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from interp.organism.frozen import CHECK_FILE, frozen_order, load_check_file
from interp.organism.report import _frozen_clause


def _git(repo: Path, *args: str, when: str = "2026-01-02T10:00:00+00:00") -> None:
    env = os.environ | {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when, "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, env=env,
                   capture_output=True)  # fmt: skip


FROZEN = datetime(2026, 1, 2, 10, 0, 0, tzinfo=timezone.utc)


def _sweep(out: Path, seconds: int) -> Path:
    """A sweep.log whose first line is `seconds` after the freeze, in local time as logging writes it."""
    stamp = (FROZEN + timedelta(seconds=seconds)).astimezone().strftime("%Y-%m-%d %H:%M:%S,000")
    out.mkdir()
    (out / "sweep.log").write_text(f"{stamp} INFO plan: 5 units\n2027-01-01 00:00:00,000 INFO later\n")
    return out


def test_blind_post_hoc_and_unknown(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    f = repo / "checks.toml"
    shutil.copyfile(CHECK_FILE, f)
    _git(repo, "add", "checks.toml")
    _git(repo, "commit", "-qm", "freeze", when="2026-01-02T10:00:00+00:00")
    # changed and committed later, then changed back: frozen at the first commit with this content
    f.write_text(CHECK_FILE.read_text() + "\n# a later edit\n")
    _git(repo, "commit", "-qam", "edit", when="2026-01-05T10:00:00+00:00")
    shutil.copyfile(CHECK_FILE, f)
    _git(repo, "commit", "-qam", "back", when="2026-01-06T10:00:00+00:00")
    cf = load_check_file(f)
    before, after = _sweep(tmp_path / "before", -1), _sweep(tmp_path / "after", 1)
    got = {o.name: frozen_order(cf, o) for o in (before, after)}
    assert got["before"]["order"] == "post hoc" and got["after"]["order"] == "blind"
    assert got["after"]["check_file_committed"] == "2026-01-02T10:00:00+00:00"
    first = datetime.fromisoformat(got["after"]["first_sweep"])
    assert first == FROZEN + timedelta(seconds=1)  # the first line, not the last
    # content never committed, or no sweep log: unknown, and the header does not claim a freeze
    f.write_text(CHECK_FILE.read_text() + "\n# uncommitted\n")
    assert frozen_order(load_check_file(f), after)["order"] == "unknown"
    assert frozen_order(cf, tmp_path)["order"] == "unknown"
    rows = [{"seed": 2, **got["after"]}, {"seed": 0, **got["before"]}]
    assert "before this seed's first sweep" in _frozen_clause(pd.DataFrame(rows))
    assert "post hoc for this seed" in _frozen_clause(pd.DataFrame(rows[::-1]))
    unknown = _frozen_clause(pd.DataFrame([{"seed": 0, **frozen_order(cf, tmp_path)}]))
    assert "not shown to be frozen" in unknown and "frozen before the run" not in unknown


def test_a_seed_known_only_from_its_committed_record_keeps_its_recorded_first_sweep(tmp_path):
    """A with-seed directory rebuilt from the committed record (scripts/organism_seed_records.sh) has
    no sweep.log: its first sweep is the one its own validation recorded in frozen_before.csv, read
    for its seed (seed 1's row, not seed 0's). Control: a record without its seed's row is unknown."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copyfile(CHECK_FILE, repo / "checks.toml")
    _git(repo, "add", "checks.toml")
    _git(repo, "commit", "-qm", "freeze", when="2026-01-02T10:00:00+00:00")
    cf = load_check_file(repo / "checks.toml")
    res = tmp_path / "seed1" / "results"
    res.mkdir(parents=True)
    pd.DataFrame([{"id": "x", "kind": "check", "seed": 1}, {"id": "t", "kind": "reported", "seed": 1}]).to_csv(
        res / "validation_checks.csv", index=False
    )
    stamp = {s: (FROZEN + timedelta(seconds=d)).isoformat() for s, d in ((0, -60), (1, 60))}
    rows = [{"seed": s, "out": f"gone/seed{s}/val", "first_sweep": stamp[s], "order": "?"} for s in (0, 1)]
    pd.DataFrame(rows).to_csv(res / "frozen_before.csv", index=False)
    got = frozen_order(cf, res.parent)
    assert got["order"] == "blind" and datetime.fromisoformat(got["first_sweep"]) == FROZEN + timedelta(seconds=60)
    pd.DataFrame(rows[:1]).to_csv(res / "frozen_before.csv", index=False)
    assert frozen_order(cf, res.parent)["order"] == "unknown"
