"""The test layout stays two tiers (tests/unit, tests/integration) with the helpers at tests/, and
the order hints in tests/conftest.py name files that exist."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_is_in_a_tier() -> None:
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert loose == [], f"test files outside tests/unit and tests/integration: {loose}"
    tiers = {p.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
    assert tiers == {"unit", "integration"}


def test_slowest_first_names_existing_files() -> None:
    from conftest import SLOWEST_FIRST

    missing = [name for name in SLOWEST_FIRST if not (TESTS / name).is_file()]
    assert missing == [], missing
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
