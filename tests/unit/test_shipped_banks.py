"""A shipped bank's name resolves through a study's own loader in a fresh process, before any
study was looked up (the names are registered with the studies); a name no study ships is still
the missing file it names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
from interp.core.errors import BankError
from interp.studies.classify.banks import load_conversational_bank
from interp.studies.cloze.banks import load_cloze_bank
from interp.studies.pressure.banks import load_pressure_bank

print(load_pressure_bank("moral").name, load_cloze_bank("cloze").name, load_conversational_bank("conversational").name)
try:
    load_pressure_bank("no-such-bank")
except BankError as e:
    print("refused:", e)
"""


def test_shipped_names_resolve_before_any_study_is_looked_up() -> None:
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "moral cloze conversational"
    assert lines[1] == "refused: no-such-bank: bank file does not exist"
