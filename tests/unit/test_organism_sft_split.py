"""`interp.organism.sft_loss.length_groups` / `split_batch`: how an SFT batch is cut into passes over
rows of similar length (the gradient equivalence with the padded batch is tested on a model in
tests/integration/test_organism.py)."""

from __future__ import annotations

import itertools

import pytest
import torch

from interp.organism.sft_loss import length_groups, split_batch


def _cost(lengths, groups, overhead):
    return sum(max(lengths[i] for i in g) * len(g) + overhead for g in groups)


@pytest.mark.parametrize("seed", range(20))
def test_length_groups_is_the_cheapest_partition_of_the_sorted_rows(seed):
    """Known answer by brute force: every way of cutting the length-sorted rows into runs (2^(n-1)),
    costed as padded tokens + overhead per pass; the DP's cost must equal the cheapest and its groups
    must cover every row once."""
    g = torch.Generator().manual_seed(seed)
    n = 1 + seed % 8
    lengths = torch.randint(5, 300, (n,), generator=g).tolist()
    overhead = [0, 48, 500][seed % 3]
    groups = length_groups(lengths, overhead)
    assert sorted(i for grp in groups for i in grp) == list(range(n))
    order = sorted(range(n), key=lambda i: lengths[i])
    best = min(
        _cost(lengths, [order[a:b] for a, b in zip((0, *cuts), (*cuts, n))], overhead)
        for k in range(n)
        for cuts in itertools.combinations(range(1, n), k)
    )
    assert _cost(lengths, groups, overhead) == best


def test_length_groups_known_cuts():
    """Two lengths far apart are two passes; rows within the overhead of each other share one; a huge
    overhead keeps the batch whole (control: the same rows at overhead 0 are cut)."""
    assert sorted(map(sorted, length_groups([10, 200, 10, 200, 10], 48))) == [[0, 2, 4], [1, 3]]
    assert length_groups([100, 104, 98, 101], 48) == [[2, 0, 3, 1]]
    assert len(length_groups([10, 200, 10, 200], 10_000)) == 1
    assert len(length_groups([100, 104, 98, 101], 0)) == 4


def _batch(lengths, completion=2, left=False):
    width = max(lengths)
    ids = torch.arange(len(lengths) * width).reshape(len(lengths), width) + 3
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for r, n in enumerate(lengths):
        cols = slice(width - n, width) if left else slice(0, n)
        mask[r, cols] = 1
        end = width if left else n
        labels[r, end - completion : end] = ids[r, end - completion : end]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def test_split_batch_cuts_each_pass_to_its_longest_row_and_keeps_every_token():
    batch = _batch([10, 200, 12, 190])
    passes = split_batch(batch)
    assert len(passes) == 2
    assert sorted(p["input_ids"].shape[1] for p, _ in passes) == [12, 200]
    assert sum(n for _, n in passes) == 8  # 4 rows x 2 completion tokens, none lost
    for p, n in passes:  # every real token of a row is kept, at its position
        for r in range(p["input_ids"].shape[0]):
            k = int(p["attention_mask"][r].sum())
            row = next(i for i in range(4) if torch.equal(batch["input_ids"][i, :k], p["input_ids"][r, :k]))
            assert torch.equal(batch["labels"][row, :k], p["labels"][r, :k])
        assert n == int((p["labels"][:, 1:] != -100).sum())


@pytest.mark.parametrize(
    "case",
    ["left padding", "one row", "equal lengths", "a key of another shape", "no labels"],
)
def test_split_batch_leaves_a_batch_it_cannot_cut_whole(case):
    """What the split must not touch: left padding (positions would move), one row, a single group,
    an input that is not [batch, length] (it would not be cut with the rows), no labels."""
    batch = {
        "left padding": _batch([10, 200, 12], left=True),
        "one row": _batch([50]),
        "equal lengths": _batch([50, 50, 50]),
        "a key of another shape": {**_batch([10, 200]), "extra": torch.zeros(2)},
        "no labels": {k: v for k, v in _batch([10, 200]).items() if k != "labels"},
    }[case]
    passes = split_batch(batch)
    assert len(passes) == 1 and passes[0][0] is batch
