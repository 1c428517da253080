"""Tokens a route SFT step computes: the rows' own tokens against what random and length-grouped
batches pad them to (`interp organism build --route-sft-sampling random|group_by_length`).

    python -m bench route_sft_padding --repeats 5
    python -m bench route_sft_padding --repeats 5 --classify-copies 4 --grade-by group

No model runs: the rows are what the build writes (bench.training_step_precision.route_rows),
tokenized as prompt + completion together and cut at the build's max_length (the trainer
adds an end-of-sequence token); the batches are
the route SFT's steps x batch size rows drawn by torch's random permutation (the Trainer's
RandomSampler) or by transformers' LengthGroupedSampler, each under `--repeats` seeds (median and
range). A step's compute grows with its padded tokens (batch x longest row), so the padded /
real ratio is the share of route SFT time spent on padding. Writes
bench/results/route_sft_padding.json.
"""

from __future__ import annotations

from bench import common


def padded_tokens(lengths: list[int], rows: list[int], batch_size: int) -> int:
    """Tokens of `rows` in batches of `batch_size`, each padded to its longest."""
    return sum(
        max(lengths[i] for i in rows[k : k + batch_size]) * len(rows[k : k + batch_size])
        for k in range(0, len(rows), batch_size)
    )


def main() -> None:
    p = common.parser(__doc__, repeats=5)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--classify-copies", type=int, default=None)
    p.add_argument("--grade-by", default=None)
    args = p.parse_args()
    common.setup(args.threads)

    import statistics

    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from bench.training_step_precision import route_rows
    from interp.model.loading import load_tokenizer
    from interp.organism.config import OrganismConfig

    settings = {
        k: v for k, v in (("classify_copies", args.classify_copies), ("grade_by", args.grade_by)) if v is not None
    }
    cfg = OrganismConfig(**settings)
    tok = load_tokenizer(common.model_path(args.model))
    n_rows = cfg.route_sft_steps * cfg.batch_size
    out: dict = {"settings": settings, "batch_size": cfg.batch_size, "steps": cfg.route_sft_steps, "routes": {}}
    for route in "ab":
        rows = route_rows(tok, route, **settings)
        lengths = [min(len(tok(r["prompt"] + r["completion"])["input_ids"]), cfg.max_length) for r in rows]
        # the rows the steps draw, as real tokens: the mean row times the rows drawn (an epoch may not divide)
        real = statistics.fmean(lengths) * n_rows
        ratios: dict[str, list[float]] = {"random": [], "group_by_length": []}
        for seed in range(args.repeats):
            g = torch.Generator().manual_seed(seed)
            orders = {
                "random": torch.randperm(len(rows), generator=g).tolist(),
                "group_by_length": list(LengthGroupedSampler(cfg.batch_size, lengths=lengths, generator=g)),
            }
            for k, order in orders.items():
                order = (order * (n_rows // len(order) + 1))[:n_rows]  # steps past one epoch start it again
                ratios[k].append(padded_tokens(lengths, order, cfg.batch_size) / real)
        out["routes"][route] = {
            "rows": len(rows),
            "tokens_min_median_max": [min(lengths), statistics.median(lengths), max(lengths)],
            "padded_over_real": {k: common.summarize(v) for k, v in ratios.items()},
        }
        r = out["routes"][route]["padded_over_real"]
        print(f"route {route}: {len(rows)} rows; padded / real tokens: random {r['random']['median']:.2f}, "
              f"grouped {r['group_by_length']['median']:.2f}")  # fmt: skip
    rows = []
    for route, d in out["routes"].items():
        lo, med, hi = d["tokens_min_median_max"]
        cells = [f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})" for r in d["padded_over_real"].values()]
        rows.append([f"route {route}", str(d["rows"]), f"{lo} / {med:g} / {hi}", *cells])
    opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in settings.items())
    out["report"] = {
        "order": 2.2,
        "title": "Organism route SFT: padded tokens of random vs length-grouped batches (no model)",
        "what": f"The route SFT rows `interp organism build {opts}` writes, {out['steps']} steps of "
        f"{out['batch_size']} rows drawn as the Trainer's random sampler or transformers' LengthGroupedSampler "
        f"(`--route-sft-sampling group_by_length`) draws them, {args.repeats} seeds each; a batch computes its "
        "rows padded to the longest. Padded over real tokens is what a step computes over what it needs: route "
        "A's long five-level classify rows pad most random batches.",
        "rerun": f"python -m bench route_sft_padding --repeats {args.repeats} {opts}".strip(),
        "tables": [
            {
                "columns": ["route", "rows", "tokens min / median / max", "random: padded / real", "grouped"],
                "rows": rows,
            }
        ],
    }
    common.write_results("route_sft_padding", out, threads=args.threads)


if __name__ == "__main__":
    main()
