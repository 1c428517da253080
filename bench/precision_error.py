"""A reduced precision's error against float32 on the same prompts (two-option verdicts)."""

from __future__ import annotations


def precision_error(a, f) -> dict:
    """a, f: OptionScores (reduced, float32)."""
    import numpy as np

    dlogp = np.abs(a.logp - f.logp)
    dp = np.abs(a.probs[:, 0] - f.probs[:, 0])
    top2 = np.sort(f.probs, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]  # float32's lead of its verdict: a flip needs a change of half of it
    flipped = a.probs.argmax(1) != f.probs.argmax(1)
    return {
        "prompts": int(len(dp)),
        "max_abs_dlogp": float(dlogp.max()),
        "mean_abs_dlogp": float(dlogp.mean()),
        "median_abs_dlogp": float(np.median(dlogp)),
        "mean_abs_dp": float(dp.mean()),
        "max_abs_dp": float(dp.max()),
        "argmax_flips": int(flipped.sum()),
        "flip_margins": sorted(float(m) for m in margin[flipped]),  # float32 margins of the flipped prompts
        "smallest_margins": sorted(float(m) for m in margin)[:3],
    }
