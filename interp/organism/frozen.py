"""The frozen check file (`known_answers.toml`): which checks count, their groups, controls,
rules and thresholds, read once per validation; its sha256 goes into the record."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from interp.core.errors import ConfigError

CHECK_FILE = Path(__file__).with_name("known_answers.toml")
CONTROLS = ("location", "amount", "spike-in")
RULES = ("rises", "p", "most")
FROZEN_FILE = "frozen_before.csv"  # results/: per seed, was this check file committed before its first sweep


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
    # version 3's scale spike-ins (`checks.scale_spike_rows`); absent from older files (NaN: not computed)
    spike_nats: float = math.nan  # nats planted per prompt (cloze) or per item (item map)
    min_spike_share: float = math.nan  # share of the planted nats the metric must recover
    # version 4's order and readout spike-ins (`checks.order_readout_spike_rows`); 0: not computed
    noise_draws: int = 0  # noise targets of the readout spike-in
    # version 5's family-wise spike-in (`checks.holm_spike_rows`); 0: not computed
    holm_spike_k: int = 0  # planted p-values of alpha / 2 added to the counted family
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
    required = {f.name for f in fields(Settings) if f.default is MISSING}
    given = data.get("settings", {})
    missing, unknown = sorted(required - set(given)), sorted(set(given) - names)
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
        if spec.threshold in names and spec.threshold not in given:
            raise ConfigError(f"{path}: check {spec.id}: its threshold {spec.threshold} is not in [settings]")
        checks.append(spec)
    ids = [c.id for c in checks]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: duplicate check ids")
    return CheckFile(path, hashlib.sha256(raw).hexdigest(), Settings(**given), tuple(checks))


def listed_settings(settings: Settings) -> dict:
    """The settings a record lists: all but the optional ones its check file leaves out (left at
    their "not computed" default: version 3's and 4's spike-in sizes under older files)."""
    out = {}
    for f in fields(Settings):
        v = getattr(settings, f.name)
        absent = f.default is not MISSING and f.name != "seed" and (v == f.default or v != v)
        if not absent:
            out[f.name] = v
    return out


def with_seed(settings: Settings, seed: int) -> Settings:
    return replace(settings, seed=int(seed))


def committed_at(cf: CheckFile) -> tuple[str, datetime] | None:
    """The earliest commit holding the check file with this exact content (sha256), and its time:
    when these checks were frozen. None outside a git checkout or when this content was never
    committed (then nothing shows it was frozen before a run)."""
    path = cf.path.resolve()

    def git(*args: str, cwd: Path | str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=30)

    try:
        top = git("rev-parse", "--show-toplevel", cwd=path.parent)
        if top.returncode:
            return None
        root = top.stdout.decode().strip()
        rel = path.relative_to(root).as_posix()
        log = git("log", "--reverse", "--format=%H %cI", "--", rel, cwd=root).stdout.decode().split("\n")
        for line in filter(None, log):
            commit, when = line.split()
            blob = git("show", f"{commit}:{rel}", cwd=root)
            if blob.returncode == 0 and hashlib.sha256(blob.stdout).hexdigest() == cf.sha256:
                return commit, datetime.fromisoformat(when)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return None


def first_sweep(out: Path) -> datetime | None:
    """When a validation OUT's sweeps first ran: the first line of OUT/sweep.log, which a rerun
    with --no-run or a resumed sweep appends to and never rewrites (local time, as logged)."""
    try:
        with open(Path(out) / "sweep.log", encoding="utf-8") as f:
            stamp = " ".join(f.readline().split()[:2])
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").astimezone()
    except (OSError, ValueError):
        return None


def recorded_first_sweep(out: Path) -> datetime | None:
    """A seed's first sweep as its own validation recorded it: the row of OUT/results/frozen_before.csv
    (FROZEN_FILE) for the seed of OUT/results/validation_checks.csv. For a seed whose sweeps are gone
    and whose committed record is all that is left (docs/organism/, `scripts/organism_seed_records.sh`)."""
    import pandas as pd

    res = Path(out) / "results"
    try:
        checks = pd.read_csv(res / "validation_checks.csv")
        seed = int(checks.loc[checks["kind"] == "check", "seed"].iloc[0])
        rows = pd.read_csv(res / FROZEN_FILE, dtype={"first_sweep": str}).fillna("")
        stamp = rows.loc[rows["seed"] == seed, "first_sweep"].iloc[0]
        return datetime.fromisoformat(stamp) if stamp else None
    except (OSError, ValueError, KeyError, IndexError, pd.errors.EmptyDataError):
        return None


_UNSET = object()


def frozen_order(cf: CheckFile, out: Path, committed=_UNSET) -> dict:
    """Whether the check file was committed before OUT's sweeps first ran: "blind" (so its results
    could not have shaped the checks), "post hoc", or "unknown" (no commit, and neither a sweep log
    nor a recorded first sweep).
    `committed`: `committed_at(cf)` when the caller already has it (one git walk for all seeds)."""
    c = committed_at(cf) if committed is _UNSET else committed
    t = first_sweep(out) or recorded_first_sweep(out)
    order = "unknown" if c is None or t is None else ("blind" if c[1] < t else "post hoc")
    return {
        "first_sweep": t.isoformat(timespec="seconds") if t else "",
        "check_file_commit": c[0] if c else "",
        "check_file_committed": c[1].isoformat(timespec="seconds") if c else "",
        "order": order,
    }
