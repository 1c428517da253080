"""The frozen check file (`known_answers.toml`): which checks count, their groups, controls,
rules and thresholds, read once per validation; its sha256 goes into the record."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from interp.core.errors import ConfigError

CHECK_FILE = Path(__file__).with_name("known_answers.toml")
CONTROLS = ("location", "amount", "spike-in")
RULES = ("rises", "p", "most")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Thresholds and sizes of one validation (the [settings] table; `seed` is the bootstrap /
    permutation seed, the organism's own)."""

    alpha: float
    n_shuffles: int
    n_boot: int
    ci: float
    min_rise: float
    min_gap: float
    min_rho: float
    min_I_gap: float
    min_readout_gain: float
    null_mean_max_se: float
    cloze_min_diff: float
    cloze_most_margin: float
    min_class_gap: float
    spike_beta: float
    min_mediated: float
    margin: float
    seed: int = 0


@dataclass(frozen=True)
class CheckSpec:
    id: str
    group: str
    statistic: str
    rule: str
    threshold: str
    control: str


@dataclass(frozen=True)
class CheckFile:
    path: Path
    sha256: str
    settings: Settings
    checks: tuple[CheckSpec, ...]

    def by_id(self) -> dict[str, CheckSpec]:
        return {c.id: c for c in self.checks}

    def groups(self) -> list[str]:
        return list(dict.fromkeys(c.group for c in self.checks))


def load_check_file(path: str | Path = CHECK_FILE) -> CheckFile:
    """Parse and validate the check file; a bad file is a one-line ConfigError naming it."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the check file ({exc})") from None
    names = {f.name for f in fields(Settings)} - {"seed"}
    given = data.get("settings", {})
    missing, unknown = sorted(names - set(given)), sorted(set(given) - names)
    if missing or unknown:
        raise ConfigError(f"{path}: [settings] missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
    checks = []
    for i, c in enumerate(data.get("check", [])):
        try:
            spec = CheckSpec(**{k: str(c[k]) for k in ("id", "group", "statistic", "rule", "threshold", "control")})
        except KeyError as exc:
            raise ConfigError(f"{path}: check {i + 1} lacks field {exc.args[0]}") from None
        if spec.rule not in RULES or spec.control not in CONTROLS:
            raise ConfigError(f"{path}: check {spec.id}: rule must be one of {RULES}, control one of {CONTROLS}")
        checks.append(spec)
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: duplicate check ids")
    return CheckFile(path, hashlib.sha256(raw).hexdigest(), Settings(**given), tuple(checks))


def with_seed(settings: Settings, seed: int) -> Settings:
    return replace(settings, seed=int(seed))
