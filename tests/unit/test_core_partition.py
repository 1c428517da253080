"""`interp.core.partition.cheapest_runs`: the one dynamic programme behind the runner's batches,
its packed attention calls and the organism's SFT passes, against brute force over every cut."""

from __future__ import annotations

import itertools
import random

import pytest

from interp.core.partition import cheapest_runs


def _brute(n, cost, allowed):
    """Every way of cutting range(n) into runs (2^(n-1)), the cheapest total among the allowed."""
    best = float("inf")
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            spans = list(zip((0, *cuts), (*cuts, n)))
            if all(allowed(a, b) for a, b in spans):
                best = min(best, sum(cost(a, b) for a, b in spans))
    return best


def _case(seed):
    rng = random.Random(seed)
    n = 1 + seed % 9
    table = {(a, b): rng.choice([0.0, 1.0, 2.5, rng.uniform(0, 10)]) for b in range(1, n + 1) for a in range(b)}
    cap = rng.randint(1, n)  # runs of at most `cap` elements, as the runner's batch size caps rows
    return n, (lambda a, b: table[a, b]), (lambda a, b: b - a <= cap), cap


@pytest.mark.parametrize("seed", range(40))
def test_cheapest_runs_is_the_cheapest_cover(seed):
    """Known answer by brute force, with arbitrary run costs (ties included) and a cap that the
    callback enforces by stopping early: the spans tile range(n) in order, respect the cap and cost
    the brute-force minimum."""
    n, cost, allowed, cap = _case(seed)

    def runs(end):
        for start in range(end - 1, -1, -1):
            if end - start > cap:
                return
            yield start, cost(start, end)

    spans = cheapest_runs(n, runs)
    assert [a for a, _ in spans] == [0] + [b for _, b in spans[:-1]] and spans[-1][1] == n
    assert all(allowed(a, b) for a, b in spans)
    assert sum(cost(a, b) for a, b in spans) == pytest.approx(_brute(n, cost, allowed), abs=1e-9)


def test_cheapest_runs_control_a_greedy_cut_is_caught():
    """Control: the brute-force comparison can fail. Cutting greedily at the cheapest single run
    (what a one-step look-ahead would do) is dearer than the optimum on this case, and the solver
    finds the optimum (one run of three at cost 3 against 1 + 2.5 + 2.5)."""
    cost = {(0, 1): 1.0, (1, 2): 2.5, (2, 3): 2.5, (0, 2): 4.0, (1, 3): 4.0, (0, 3): 3.0}
    spans = cheapest_runs(3, lambda end: ((s, cost[s, end]) for s in range(end)))
    assert spans == [(0, 3)]
    greedy = sum(cost[i, i + 1] for i in range(3))
    assert greedy > _brute(3, lambda a, b: cost[a, b], lambda a, b: True)


def test_cheapest_runs_ties_go_to_the_first_yielded_run():
    """Equal costs: the caller's order decides (largest start first gives the shortest last run)."""

    def by_length(order):  # every cut of 2 elements costs 2: a tie
        return lambda end: ((s, float(end - s)) for s in order(end))

    assert cheapest_runs(2, by_length(lambda e: range(e - 1, -1, -1))) == [(0, 1), (1, 2)]
    assert cheapest_runs(2, by_length(range)) == [(0, 2)]


def test_cheapest_runs_refuses_an_end_with_no_run():
    with pytest.raises(ValueError, match="no run ending at 2"):
        cheapest_runs(2, lambda end: iter(()) if end == 2 else iter([(0, 1.0)]))
    assert cheapest_runs(0, lambda end: iter(())) == []
