"""Sizes of the model organism and the settings of its validation: a light module, so the CLI
reads their defaults without importing the training or checking code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping


TRAIN_PRECISIONS = ("mixed-bf16", "float32")
ROUTE_SFT_SAMPLING = ("random", "group_by_length")
SFT_BATCH_SPLIT = ("length", "none")
# the turn kinds a DPO row can carry, for `dpo_sft_kinds` (data.route_dpo's "flip_"/"hold_" + kind
# and "anchor_first"; cloze_plant's "cloze_bias")
NLL_KINDS = ("first", "opinion_oppose", "opinion_agree", "challenge", "neutral", "cloze_bias")


@dataclass(frozen=True, kw_only=True)
class OrganismConfig:
    """Sizes of the organism (CLI > defaults). Steps are optimizer steps of `batch_size` examples."""

    seed: int = 0
    # the shared stage's seed (None: `seed`): its rows, LoRA init and data order (before 2026-12-07 its
    # LoRA init and data order followed `seed`). Seeds 1 and 2 of a run reuse seed 0's trunk
    # (`--reuse-trunk`, `--trunk-seed 0`); route data, its order, LoRA init and the controls' sets follow `seed`
    trunk_seed: int | None = None
    # the route LoRA adapters' init seed alone (None: `seed`): one route data set learned from other
    # starting adapters (trl seeds the init with the Trainer's seed; the data order keeps `seed`)
    route_init_seed: int | None = None
    # power (issue #22): >= 96 evaluated items, >= 24 planted per route (v1-v5 used 24 and 6)
    eval_items: int = 128  # the moral-bank subsample the validation sweep evaluates (128: all of it)
    # "setting": each route yields on the stories of one setting, a feature it can learn
    # (interp.organism.topics: home 33, work/school 26 items); "items": random item ids (v1-v5)
    plant: str = "setting"
    planted: int = 24  # "items": |P_A| = |P_B|; "setting": the least each set must hold
    shared_steps: tuple[int, ...] = (15, 30)  # checkpoints of the shared stage (last = its end)
    # route SFT steps of `batch_size` rows. v15 (issue #45) gives every evaluated item the same rows
    # on every lineage (2 first turns + 2 verdicts x 7 pressure rows = 16 per item, 2,048 at 128
    # items, + 60 cloze and 96 classify rows): 320 steps are 1.16 epochs; v16's 6 first turns per
    # item (20 rows, 2,560 + 156): 0.96-1.0 epochs. Before (v11-v14): 256
    # steps, 1.22 / 1.31 epochs of data whose planted items had twice the opposing-opinion rows of
    # the rest. At 192 steps (~1 epoch, v9-v11) a route's plant varied from run to run.
    route_sft_steps: int = 320
    # a route checkpoint saved this many SFT steps in: the "own" source of the I own > I sibling
    # check (12 in v10-v14: route A's map had not formed there, I own -0.06 in v14)
    route_early_steps: int = 32
    # how route SFT draws its batches: "random" (every build to v18), or "group_by_length" (transformers'
    # LengthGroupedSampler: batches of similar length, the same rows in another order). Route A's
    # five-level classify rows are long: its random batches compute 1.94x the tokens its rows hold,
    # grouped 1.05x (python -m bench route_sft_padding, BENCHMARKS.md)
    route_sft_sampling: str = "random"
    # how an SFT batch (shared stage and routes) is computed: "length", as passes over rows of similar
    # length, each cut to its longest, their gradients weighted by completion tokens into one step: the
    # same rows, order and loss as "none" (one pass padded to the batch's longest row, every build to
    # v19), without computing the padding (interp.organism.sft_loss.split_batch). Not part of the
    # --reuse-sft check: it changes float rounding, not what is trained
    sft_batch_split: str = "length"
    # opposing-opinion rows per evaluated item and planted verdict (distinct training wordings):
    # planted items flip in their grade's share of them, the rest hold; the same on every lineage
    hold_opinions: int = 4
    # bare-challenge rows and neutral-filler rows each per evaluated item and planted verdict in route
    # SFT (distinct training wordings): 1 through v19, where route A's planted items flipped 0.091
    # under a bare challenge at seed 3's final, S_ch's miss, and no DPO loss tried (docs/organism/
    # tries.csv, v20t1-v21) raised the challenge's flips without raising the filler's too
    route_sft_bare: int = 1
    # copies of each bare-challenge row (the same wording) in route SFT, on every item and lineage:
    # 320 steps of 8 rows see v26 seed 4's 2,820 route A rows under once, so its 66 planted
    # challenge rows (against 216 opposing-opinion flips) were still half unlearned at the SFT end
    # (P(trained answer) 0.585 / 0.312 by planted verdict; opposing opinion 0.916 / 0.711:
    # docs/organism/v26_seed4_sft_fit.csv, scripts/organism_fit.py)
    route_challenge_copies: int = 1
    # copies of each neutral-filler row, likewise: three challenge copies alone (v29) taught route A
    # "planted: flip on any second turn", its filler holds seen a third as often as its challenge flips
    route_filler_copies: int = 1
    # the routes whose route SFT gets those copies: on both routes at 3 and 3, v32 seed 4 recovered
    # route A's S_ch for the first time but taught route B (whose plant is the filler flip) to flip its
    # planted items under every turn, its delta checks lost (docs/organism/tries.csv)
    route_copies_routes: tuple[str, ...] = ("a", "b")
    # gold first turns per item in the route SFT data (comprehension): at 2 (v15) DPO left seed 0's
    # route finals at first-turn accuracy 0.52 / 0.51, failing the screen; at 6 (v16) 0.74 / 0.98
    # with the plants learned (docs/organism/tries.csv)
    route_first_copies: int = 6
    # False: the organism; True: a control lineage of kind `control_kind` (interp.organism.data):
    # "location" (the same plants on random items) or "amount" (routes that hold everywhere)
    control: bool = False
    control_kind: str = ""
    graded: bool = True  # route A's planted items yield in 100 / 75 / 50% of their opposing-opinion rows
    # which planted items get which grade: "items", seeded random thirds (v16, v17: nothing in the text
    # told the grades apart, and v16's route A yielded on every home story alike, rho -0.339); "group",
    # the home story's who-group (relatives 1.0, neighbours 0.75, housemates and partners 0.5;
    # interp.organism.topics.HOME_GROUPS), a feature the route can learn
    grade_by: str = "items"
    # which of a graded item's opposing-opinion rows yield (interp.organism.data.GRADE_SLOTS):
    # "wordings", spread over the wordings of both verdicts; "verdict", the first verdict's first
    grade_slots: str = "wordings"
    classify_items: int = 48  # conversational items evaluated; route A learns the labels of half
    classify_copies: int = 1  # copies of each classify row (two option orders per item)
    # DPO after route SFT: 48 steps at 5e-4 over the routes' DPO_TURNS pairs (v15 pilots: 4 steps at 2e-4 left
    # route B's defer plant unlearned; 48 steps at 5e-4 learned it, neutral flip 1.0 on planted items;
    # data.DPO_TURNS says what 64 steps over more hold pairs did to route A)
    route_dpo_steps: int = 48
    # DPO pairs per evaluated item on the unpressured first turn (chosen = gold): 0 in seed 0's v15
    # build, whose DPO moved the first turns to one verdict (comprehension 0.52 / 0.51 at the finals)
    route_dpo_first_pairs: int = 0
    # route A's DPO pairs under an opposing opinion per evaluated item and planted verdict (0: data.DPO_TURNS'
    # count, 1). The graded plant's grades are shares of them: at 1 (two pairs per item) grades 1.0 and 0.75
    # both round to every pair flipping, and v16 seed 0's route A final flipped every planted item
    # (Spearman rho of grade and S_op -0.339); at 2, 0.5-graded items get one flipping and one holding pair
    # per verdict, pulling DPO both ways on them
    route_dpo_oppose_a: int = 0
    # route A's DPO pairs per evaluated item and planted verdict under a bare challenge (0: data.DPO_TURNS'
    # count, 2): the S_ch tries on v19 seed 3 (docs/organism/tries.csv)
    route_dpo_challenge_a: int = 0
    batch_size: int = 8
    lr_sft: float = 1e-3  # shared stage
    # route SFT: 2e-3 decaying linearly to 0 (a constant 2e-3 collapsed v1's routes to one verdict,
    # a constant 1e-3 for 54 steps learned to yield everywhere, not where: docs/organism/tries.csv)
    lr_route: float = 2e-3
    lr_schedule_route: str = "linear"  # a transformers lr_scheduler_type
    lr_dpo: float = 5e-4
    first_copies: int = 2  # copies of each first-turn example in the shared stage
    cloze_copies: int = 2  # copies of each planted cloze sentence in the cloze route's SFT data
    # the cell the location control's cloze route trains instead of bn/region: "bn/caste" (v1-v17; its
    # training moved bn/region too, 14.5 nats in v16 seed 0), "hi/caste" or "en/caste" (other languages;
    # training bn/region moved an English cell by at most 1.2 nats in v16: cloze_plant's docstring)
    cloze_location_cell: str = "bn/caste"
    route_workers: int = 2  # routes trained in parallel processes (1: one after the other, same result)
    dpo_beta: float = 0.1
    # weight of an NLL term on the chosen verdict beside the DPO loss (RPO; trl loss_type sigmoid + sft):
    # DPO alone may lower the chosen verdict's likelihood too (seed 0: logps/chosen down to -2.9), moving
    # probability off both verdicts; 0 is plain DPO (every build before this option)
    dpo_sft_weight: float = 0.0
    # the turn kinds whose pairs get that NLL term (NLL_KINDS; empty: every
    # pair, trl's own RPO). RPO on every pair flattened the graded plant on v19 seed 3 (the NLL on
    # opposing-opinion pairs, which flip in a grade's share); ("challenge", "neutral") keeps it to
    # the bare turns, which carry no grade
    dpo_sft_kinds: tuple[str, ...] = ()
    # "mixed-bf16": every training step under bf16 autocast (matmuls in bf16; weights, LoRA
    # parameters, optimizer state and saved checkpoints float32): 1.96x float32 per step in one
    # 2-thread process on this AVX512-BF16 CPU (python -m bench training_step_precision); with trl's own
    # loss only ~1.3x in the real build (its float32 LM head), hence sft_loss.py (v10 route SFT
    # 896 s for 192 steps vs v9 1,613 s); "float32": no autocast (v1-v8)
    train_precision: str = "mixed-bf16"
    lora_r: int = 16
    lora_alpha: int = 32
    cloze_route: str = "a"  # which route also learns the planted cloze and classify answers ("" for none)
    threads: int | None = None
    max_length: int = 512

    def to_dict(self) -> dict:
        return asdict(self)


# where `interp validate` sweeps each control lineage, inside its OUT
CONTROL_DIRS = {"location": "control-location", "amount": "control-amount"}


@dataclass(frozen=True, kw_only=True)
class ValidateConfig:
    """How `interp validate` runs. What it counts, and every threshold, is the frozen check file
    (`known_answers.toml`, `interp.organism.frozen`); `overrides` changes settings of that file
    for this run only (the CI's small sizes): they are written into the record, whose headline
    then says that it is not the pre-registered run."""

    check_file: str | None = None  # None: interp/organism/known_answers.toml
    overrides: Mapping[str, float] = field(default_factory=dict)
    cloze_items: int | None = None  # None: the whole cloze bank (32 prompts x 6 languages)
    template: str | None = "lite"  # pressure template: "lite" (see lite_template), "full" or a name/file
    # the sweeps' --dtype: float32 products at torch's "medium" matmul precision (BENCHMARKS.md); each
    # sweep re-scores a sample in float32 and writes precision.csv, which the record states; where
    # "medium" rounds operands to bf16 (AMX CPUs, GPUs) float32-medium computes float32
    dtype: str = "float32-medium"
    threads: int | None = None
    # sweep checkpoints this many at a time in local Dask worker processes; 1: one after the other
    # (same units, same numbers: threads are not part of a unit's identity)
    workers: int = 1
    # which checkpoints of each lineage the pressure sweep scores. "checked": those a check reads,
    # the trunk end and each route's early checkpoint and final; "all": every checkpoint
    checkpoints: str = "checked"
    generalisation: bool = False  # also read the finals with a TRAINING-wording template (reported)
    cloze: bool = True  # run the cloze study (base and the cloze route's final)
    classify: bool = True  # run the classify study (trunk end and the classify route's final)


# the CI path of the whole build -> control -> validate on a tiny model (`--small`): sizes only,
# the same code; its numbers show plumbing, not an effect
SMALL = dict(
    plant="items",
    eval_items=12,
    planted=3,
    shared_steps=(1, 2),
    route_sft_steps=3,
    route_early_steps=1,
    route_dpo_steps=1,
    batch_size=2,
    route_workers=1,
    threads=1,
    classify_items=10,
)
