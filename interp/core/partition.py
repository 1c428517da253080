"""The cheapest cut of an ordered sequence into contiguous runs, by dynamic programming over the
cut points. One solver for three callers that each price a run their own way: the runner's
forward batches (`interp.runner.engine`), its attention calls over packed rows
(`interp.runner.packed.attention_groups`) and the organism's SFT passes
(`interp.organism.sft_loss.length_groups`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

RunCosts = Callable[[int], Iterable[tuple[int, float]]]


def cheapest_runs(n: int, run_costs: RunCosts) -> list[tuple[int, int]]:
    """The spans `[(start, end), ...]` that cover `range(n)` in order at the least total cost.

    `run_costs(end)` yields `(start, cost)` for each run `[start, end)` the caller allows to end
    at `end`; it may stop early (a cap on rows, tokens or memory) but must allow the single-element
    run `[end - 1, end)`. Among runs of equal cost the first one yielded is kept, so the caller's
    order decides ties. O(n x runs per end) time."""
    inf = float("inf")
    best = [0.0] + [inf] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        for start, cost in run_costs(end):
            c = best[start] + cost
            if c < best[end]:
                best[end], cut[end] = c, start
        if best[end] == inf:
            raise ValueError(f"run_costs({end}) allowed no run ending at {end}")
    spans, end = [], n
    while end > 0:
        spans.append((cut[end], end))
        end = cut[end]
    return spans[::-1]
