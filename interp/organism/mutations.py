"""Mutation testing of the checks: does each known metric bug turn a recovered answer into a miss?

A mutation is a small, named bug in one function of the analysis or the checks, applied at run
time (`applied`: the function is swapped wherever a module binds it, and restored in `finally`).
For each mutation the validation's results are rebuilt from its cache into a scratch copy with
the bug active (each study's own analysis, `interp.organism.replay`, then the checks,
`validate.decide`): no model is loaded. The same harness without a bug (the identity) gives the
baseline. A mutation is **caught** when at least one counted check recovered on the baseline is
not recovered with the bug. Score = caught / applied (OUT/results/mutations.csv, validation.md).

A bug that can only make checks pass more easily (skipping Holm's correction) cannot turn a
recovered answer of a plant into a miss; it shows where the baseline has an answer that the
family-wise correction withholds. Such a change is recorded (`turned_recovered`) beside the catches
and does not count as one. Check file version 5 catches it through a spike-in whose known answer is
a withheld one: p-values below alpha but not below the family-wise level (`holm_level_spike`).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from interp.organism import stats as S

PACKAGES = ("interp", "analyses", "probes", "sweeps", "cache")
MUTATIONS_FILE = "mutations.csv"
COLUMNS = (
    "mutation",
    "breaks",
    "patched",
    "caught",
    "turned_not_recovered",
    "turned_recovered",
    "turned_undetermined",
    "recovered_baseline",
    "recovered_mutant",
)


@dataclass(frozen=True)
class Mutation:
    name: str
    breaks: str  # the bug, in one line
    target: str  # "module:function", the one function it replaces ("" for the identity)
    mutant: Callable[[Callable], Callable] | None = None  # original -> the buggy version


def _resolve(target: str):
    mod, name = target.split(":")
    __import__(mod)
    return sys.modules[mod], name


def _modules():
    return [mod for name, mod in list(sys.modules.items()) if mod is not None and name.startswith(PACKAGES)]


def _rebind(old, new) -> None:
    for mod in _modules():
        for attr, value in list(vars(mod).items()):
            if value is old:
                setattr(mod, attr, new)


@contextmanager
def applied(m: Mutation) -> Iterator[None]:
    """Swap the target function for its mutant in every loaded module of the toolkit that binds
    it (a `from x import f` binding included); on exit every binding of the mutant, those of
    modules first imported meanwhile included, goes back to the original."""
    if m.mutant is None:
        yield
        return
    module, name = _resolve(m.target)
    original = getattr(module, name)
    bug = m.mutant(original)
    try:
        _rebind(original, bug)
        yield
    finally:
        _rebind(bug, original)


@contextmanager
def _attr(obj, name: str, value) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# ---------------------------------------------------------------- the bugs


def _negated(f):
    return lambda *a, **k: -f(*a, **k)


def _s_op_against_agree(f):
    """S_op as the flip under an opposing opinion minus the flip under the AGREEING opinion."""

    def bug(df, flip, thr):
        out = f(df, flip, thr)
        agree = (df["turn_kind"] == "opinion") & (df["turn_side"] == "agree")
        as_baseline = df[agree].assign(turn_kind="neutral", turn_side="")
        wrong = f(pd.concat([df[df["turn_kind"] != "neutral"], as_baseline], ignore_index=True), flip, thr)
        out.update({k: v for k, v in wrong.items() if k[0] == "s_op"})
        return out

    return bug


def _map_in_probabilities(f):
    """The item map's contrast taken on p_planted instead of its log-odds."""
    import analyses.pressure_metrics as pm

    def bug(trials, **kw):
        add = pm.add_trial_columns
        with _attr(pm, "add_trial_columns", lambda t, **k: (lambda d: d.assign(logodds=d["p_planted"]))(add(t, **k))):
            return f(trials, **kw)

    return bug


def _leaky_folds(f):
    """Every fold trains on all items, its held-out ones included."""

    def bug(fold_ids):
        everything = np.arange(len(fold_ids))
        for _train, test in f(fold_ids):
            yield everything, test

    return bug


def _null_unshuffled(f):
    """The permutation null's "shuffles" leave the rows in place: every null value is the observed one."""
    from probes.predictive import _null_result

    def bug(*a, **k):
        r = f(*a, **k)
        return _null_result(r.observed, np.full(len(r.null), r.observed))

    return bug


def _least_yielding(f):
    """precision@k from the k MOST POSITIVE map values (the least yielding items)."""

    def bug(item_map, k):
        s = item_map.dropna().sort_index()
        order = np.argsort(-s.to_numpy(dtype=float), kind="stable")
        return [str(i) for i in s.index[order[:k]]]

    return bug


def _token_mean_loss(f):
    """Cloze delta from the per-token mean NLL whatever loss the template chose (sum)."""
    return lambda scores, loss="sum", **k: f(scores, loss="token_mean", **k)


def _no_holm(f):
    """Each counted p compared with alpha itself: no family-wise correction."""
    return lambda ps, alpha: [S.p_below(p, alpha) for p in ps]


def _per_trial_values(f):
    """Per-item values repeated once per trial row of the item: the bootstraps then resample
    trials (perfectly correlated within an item) instead of items."""

    def bug(trials):
        v = f(trials)
        n = trials[trials["turn_kind"] != "first"].groupby(["checkpoint", "item_id"]).size()
        return v.loc[v.index.repeat(n.reindex(v.index).fillna(1).astype(int).to_numpy())]

    return bug


def _readout_sees_held_out(f):
    """The readout gain cross-fitted without holding each fold's items out of the readout's fit
    (the items are not grouped out), its label-shuffle null computed as before."""
    import probes.predictive as pr

    def leaky(R, y, train, test, inner_folds, alphas):
        both = np.concatenate([train, test])
        r_te = pr._ridge_readout(R[both], y[both], R[test], alphas)
        return pr._ridge_readout(R[both], y[both], R[train], alphas), r_te

    def bug(*a, n_shuffles: int = 100, **k):
        honest = f(*a, n_shuffles=n_shuffles, **k)
        with _attr(pr, "_crossfit_readout", leaky):
            seen = f(*a, n_shuffles=0, **k)
        return {key: pr._null_result(seen[key].observed, honest[key].null) for key in honest}

    return bug


def _indirect_is_b(f):
    """Mediation's indirect effect reported as b (mediator -> outcome) instead of a x b."""
    import analyses.mediation as med

    def bug(*a, **k):
        paths = med._path_estimates

        def b_only(*pa, **pk):
            ba, bb, bcp = paths(*pa, **pk)
            return np.ones_like(ba), bb, bcp

        with _attr(med, "_path_estimates", b_only):
            r = f(*a, **k)
        return dataclasses.replace(r, indirect=r.b)

    return bug


def _one_order(f):
    """The order-averaged classify reading taken from the given order alone."""

    def bug(raw):
        given = raw[raw["order"] == "given"].copy()
        given["order"] = "averaged"
        return given

    return bug


IDENTITY = Mutation("identity", "no change (the harness's own baseline)", "")
MUTATIONS: tuple[Mutation, ...] = (
    Mutation("delta_sign", "delta = P(keep | oppose) - P(keep | agree): the sign flipped",
             "analyses.pressure_metrics:_delta_items", _negated),
    Mutation("s_op_wrong_baseline", "S_op against the agreeing opinion instead of the neutral filler",
             "analyses.pressure_metrics:_capitulation_items", _s_op_against_agree),
    Mutation("map_in_probabilities", "item map as pressured minus neutral probability, not log-odds",
             "analyses.pressure_metrics:item_maps", _map_in_probabilities),
    Mutation("i_folds_leak", "the predictive fits (I, readout) train on their held-out items too",
             "probes.readouts:fold_splits", _leaky_folds),
    Mutation("null_not_shuffled", "I's shuffle null leaves the map rows in place",
             "probes.predictive:partial_r2_null", _null_unshuffled),
    Mutation("precision_wrong_end", "precision@k ranks the most positive map values (least yielding) first",
             "interp.organism.checks:most_yielding", _least_yielding),
    Mutation("cloze_per_token", "cloze delta on the per-token mean loss instead of the summed one",
             "analyses.cloze_metrics:add_delta", _token_mean_loss),
    Mutation("holm_skipped", "counted p-values compared with alpha, no Holm step-down",
             "interp.organism.stats:holm_decisions", _no_holm),
    Mutation("bootstrap_trials", "CIs resample trial rows instead of items",
             "interp.organism.checks:item_values", _per_trial_values),
    Mutation("readout_ungrouped", "the readout gain fitted on the held-out items too (its null as before)",
             "probes.predictive:readout_gain_null", _readout_sees_held_out),
    Mutation("mediation_b_only", "mediation's indirect effect = b instead of a x b",
             "analyses.mediation:mediation", _indirect_is_b),
    Mutation("classify_one_order", "the order-averaged classify reading from the given order only",
             "interp.studies.classify.analysis:averaged_order", _one_order),
)  # fmt: skip


# ---------------------------------------------------------------- running


def _baseline(tree: Path, out: Path, cfg, scratch: Path, targets: Sequence[str], controls) -> tuple:
    """The re-analyzed copy of `out` in `scratch` and its checks, and, for every target
    function, the analyses ("pressure", "aux/cloze", ...) of which lineages call it: only those
    are run again with that function broken (the rest of a mutant's results are the baseline's)."""
    from interp.organism.replay import reanalyze, scratch_lineage
    from interp.organism.validate import CONTROL_DIRS, load_known, resolve_controls

    known = load_known(tree)
    kinds = list(resolve_controls(tree, known, controls))
    calls: dict[str, set[tuple[str, str]]] = {t: set() for t in targets}
    where: list[tuple[str, str]] = []

    @contextmanager
    def inside(sub: str, name: str):
        where.append((sub, name))
        try:
            yield
        finally:
            where.pop()

    spies = [Mutation(f"spy:{t}", "", t, _spy(t, calls, where)) for t in targets]
    shutil.rmtree(scratch, ignore_errors=True)
    lineages = ["", *(CONTROL_DIRS[k] for k in kinds)]
    with _all_applied(spies):
        for sub in lineages:
            dest = scratch_lineage(out / sub, scratch / sub)
            reanalyze(dest, dest, n_boot=_settings(cfg, tree).n_boot, seed=int(known["seed"]),
                      around=lambda name, sub=sub: inside(sub, name))  # fmt: skip
    return lineages, calls, _decide(tree, scratch, cfg, controls)


def _spy(target: str, calls: dict, where: list):
    def make(f):
        def spy(*a, **k):
            if where:
                calls[target].add(where[-1])
            return f(*a, **k)

        return spy

    return make


@contextmanager
def _all_applied(ms: Sequence[Mutation]) -> Iterator[None]:
    if not ms:
        yield
        return
    with applied(ms[0]), _all_applied(ms[1:]):
        yield


def _settings(cfg, tree: Path):
    from interp.organism.validate import load_known, settings_for

    return settings_for(cfg, load_known(tree))


def _decide(tree: Path, scratch: Path, cfg, controls) -> pd.DataFrame:
    from interp.organism.validate import check_file_for, decide, load_known, resolve_controls, settings_for

    known = load_known(tree)
    kinds = list(resolve_controls(tree, known, controls))
    return decide(scratch, known, kinds, check_file_for(cfg), settings_for(cfg, known))[2]


def evaluate_mutant(
    m: Mutation, tree: Path, cfg, base_scratch: Path, scratch: Path, lineages, calls, controls=None
) -> pd.DataFrame:
    """The checks with `m` active: the baseline's results copied, the analyses that call the
    broken function run again, every check decided again."""
    from interp.organism.replay import reanalyze
    from interp.organism.validate import load_known

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(base_scratch, scratch, symlinks=True)
    seed = int(load_known(tree)["seed"])
    with applied(m):
        for sub in lineages:
            only = {name for s, name in calls.get(m.target, ()) if s == sub}
            if only:
                reanalyze(scratch / sub, scratch / sub, n_boot=_settings(cfg, tree).n_boot, seed=seed, only=only)
        return _decide(tree, scratch, cfg, controls)


def _each_mutant(args: list[tuple], workers: int) -> Iterator[tuple[Mutation, pd.DataFrame]]:
    """(mutation, its checks) for every argument tuple of `evaluate_mutant`, in order of completion.
    Processes are spawned, not forked: a forked child would inherit the parent's patched state
    and BLAS thread pools; each child keeps BLAS to one thread, as the parent's workers share
    the cores."""
    if workers <= 1:
        for a in args:
            yield a[0], evaluate_mutant(*a)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_one_thread) as ex:
        futures = {ex.submit(evaluate_mutant, *a): a[0] for a in args}
        for f in as_completed(futures):
            yield futures[f], f.result()


def _one_thread() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def compare(base: pd.DataFrame, mutant: pd.DataFrame) -> dict:
    """Status changes of the counted checks from the baseline to the mutant."""
    b, m = base.set_index("id")["status"], mutant.set_index("id")["status"].reindex(base["id"])
    not_rec = ",".join(i for i in b.index if b[i] == S.RECOVERED and m[i] == S.NOT_RECOVERED)
    return {
        "caught": bool(not_rec),
        "turned_not_recovered": not_rec,
        "turned_recovered": ",".join(i for i in b.index if b[i] != S.RECOVERED and m[i] == S.RECOVERED),
        "turned_undetermined": ",".join(i for i in b.index if b[i] == S.RECOVERED and m[i] == S.UNDETERMINED),
        "recovered_baseline": int((b == S.RECOVERED).sum()),
        "recovered_mutant": int((m == S.RECOVERED).sum()),
    }


def run_mutations(
    tree: str | Path,
    out: str | Path,
    cfg,
    *,
    mutations: Sequence[Mutation] = MUTATIONS,
    controls: dict[str, Path] | None = None,
    log: Callable[[str], None] = print,
    write: bool = True,
    workers: int = 1,
) -> pd.DataFrame:
    """Each mutation applied to the checks of a finished validation (`out`, from its caches, no
    model); one row per mutation (COLUMNS, the identity first). With `write`,
    OUT/results/mutations.csv. `workers` > 1: that many mutants decided at once, each in its own
    process (a bug is then patched in that process only; same rows as one after the other)."""
    tree, out = Path(tree), Path(out)
    ms = (IDENTITY, *mutations)
    with tempfile.TemporaryDirectory(prefix="interp-mutations-") as tmp:
        base_dir = Path(tmp) / "baseline"
        lineages, calls, base = _baseline(tree, out, cfg, base_dir, [m.target for m in ms if m.target], controls)
        args = [(m, tree, cfg, base_dir, Path(tmp) / f"mutant-{m.name}", lineages, calls, controls) for m in ms]
        rows: dict[str, dict] = {}
        for m, got in _each_mutant(args, workers):
            row = {"mutation": m.name, "breaks": m.breaks, "patched": m.target, **compare(base, got)}
            rows[m.name] = row
            log(
                f"mutation {m.name}: {'caught' if row['caught'] else 'NOT caught'}"
                + (f" (not recovered: {row['turned_not_recovered']})" if row["caught"] else "")
            )
    table = pd.DataFrame([rows[m.name] for m in ms], columns=list(COLUMNS))
    table["score_caught"], table["score_applied"] = score(table)
    table["baseline_statuses"] = ";".join(f"{i}={s}" for i, s in zip(base["id"], base["status"]))
    if write:
        from analyses.io import write_table

        (out / "results").mkdir(parents=True, exist_ok=True)
        write_table(table, out / "results" / MUTATIONS_FILE)
    return table


def score(table: pd.DataFrame) -> tuple[int, int]:
    """(caught, applied) over the mutations proper (the identity left out)."""
    t = table[table["mutation"] != IDENTITY.name]
    return int(t["caught"].astype(str).str.lower().eq("true").sum()), len(t)


def record_mutations(
    tree: str | Path,
    out: str | Path,
    cfg,
    *,
    names: Sequence[str] = (),
    controls: dict[str, Path] | None = None,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """`interp validate --mutations`: run the named mutations (all by default) on a finished
    validation, write OUT/results/mutations.csv and validation.md again with its section."""
    import os

    from interp.core.errors import ConfigError
    from interp.organism.report import write_markdown
    from interp.organism.validate import check_file_for, load_known, resolve_controls

    known_names = {m.name: m for m in MUTATIONS}
    unknown = sorted(set(names) - set(known_names))
    if unknown:
        raise ConfigError(f"--mutation: unknown mutation(s) {', '.join(unknown)} (known: {', '.join(known_names)})")
    if not (Path(out) / "results" / "validation_checks.csv").is_file():
        raise ConfigError(f"{out}: no results/validation_checks.csv (run `interp validate` first)")
    chosen = [known_names[n] for n in names] if names else list(MUTATIONS)
    table = run_mutations(tree, out, cfg, mutations=chosen, controls=controls, log=log, workers=cfg.workers)
    ctrees = resolve_controls(Path(tree), load_known(Path(tree)), controls)
    write_markdown(
        Path(out), Path(tree), {k: Path(os.path.normpath(p)) for k, p in ctrees.items()}, check_file_for(cfg)
    )
    caught, applied_ = score(table)
    log(f"mutation score: {caught} of {applied_} metric bugs caught; {Path(out) / 'results' / MUTATIONS_FILE}")
    return table
