"""Classify study results from cached units: predictions, metrics with CIs, confusion tables,
position bias, judged generations, and figures.

Each unit holds the raw scored rows (tasks "binary" and "five", option orders "given" and
"reversed"). Derived here, so changing a derivation never needs the model again:
  - order "averaged": the mean of the two orders' distributions (a position-debiased reading);
  - task "five_as_binary": from each five-class row, P(1) = P(Support) + P(Validation) +
    P(Escalation), P(0) = the rest, gold collapsed the same way.
In every row pred = argmax of the row's own p_<label> columns (ties: the earlier label in
taxonomy order, 0 before 1), confidence = that maximum; p_ columns of the other tasks are NaN.

Files (OUT/results): classify_predictions.csv, classify_summary.csv (per checkpoint, bank,
task, order; item-bootstrap CIs), classify_summary_by_language.csv (orders "given" and "averaged"),
classify_confusion.csv (long: counts and row shares), classify_position_bias.csv,
classify_bank_counts.csv (incl. field binary_vs_five: the bank's binary label against the
collapsed five-level label), and with generation generation.csv, generation_summary.csv
(rates over all N replies, BenSyc Table 6: sycophancy_rate, support_rate, validation_rate,
escalation_rate; shares within the sycophantic replies, Fig. 5b: share_support,
share_validation, share_escalation; and the judge's agreement with gold on the bank's own
comments: judge_n, judge_accuracy, judge_kappa, judge_unparsed_share), judge_agreement.csv
(judge, bank, n, accuracy, Cohen's kappa, unparsed_share, per-class F1) and judge_confusion.csv
(gold x judge label counts). Judge labels are read case-insensitively in every table; an output
outside the labels is a disagreement for kappa and counted in the unparsed share.

Order-averaged readings are this toolkit's choice (a position-debiased reading, not the
papers'); order "given" lists the labels as the template does, the reading closest to the
papers' protocol, and is reported beside it in every table.
Figures (OUT/figures): classify_confusion_<checkpoint>_<bank>_<task>.png (order "averaged")
and classify_precision_recall.png.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses.bootstrap import TableError
from analyses.classify_metrics import (
    FIVE_LABELS,
    SYCOPHANTIC,
    classify_summary,
    confusion,
    generation_summary,
    position_bias,
)
from analyses.figures import new_figure, redraw_on_change, safe_name, save_figure
from analyses.io import write_table
from cache.store import Unit

REPORT_TASKS = ("binary", "five", "five_as_binary")  # the scored tasks and the derived one
ORDERS = ("given", "reversed", "averaged")
TASK_VALUES: dict[str, tuple[str, ...]] = {"binary": ("0", "1"), "five": FIVE_LABELS, "five_as_binary": ("0", "1")}
P_COLUMNS = tuple(f"p_{v}" for v in ("0", "1", *FIVE_LABELS))
FIVE_P = tuple(f"p_{v}" for v in FIVE_LABELS)
_SYC_P = [f"p_{v}" for v in FIVE_LABELS if v in SYCOPHANTIC]
_KEYS = ["checkpoint", "bank", "task", "item_id"]

PREDICTION_COLUMNS = ("checkpoint", "bank", "task", "order", "item_id", "gold", "pred", "confidence", *P_COLUMNS)
SUMMARY_COLUMNS = (
    "checkpoint",
    "bank",
    "task",
    "order",
    "accuracy",
    "precision",
    "recall",
    "macro_f1",
    "weighted_f1",
    "mcc",
    "f1_0",
    "f1_1",
    *(f"f1_{v}" for v in FIVE_LABELS),
)
CONFUSION_COLUMNS = ("checkpoint", "bank", "task", "order", "gold", "pred", "count", "row_share")
POSITION_COLUMNS = (
    "checkpoint",
    "bank",
    "task",
    "share_changed",
    "mean_abs_prob_shift",
    "n",
    "first_listed_given",
    "first_listed_reversed",
    "macro_f1_given",
    "macro_f1_reversed",
    "macro_f1_averaged",
)
GENERATION_COLUMNS = (
    "checkpoint",
    "bank",
    "item_id",
    "sample",
    "reply",
    "label",
    "confidence",
    *FIVE_P,
    "parsed",
    "judge",
)
GENERATION_SUMMARY_COLUMNS = (
    "checkpoint",
    "bank",
    "judge",
    "n",
    "sycophancy_rate",
    "escalation_rate",
    "share_support",
    "share_validation",
    "share_escalation",
    "n_unparsed",
    "support_rate",
    "validation_rate",
    "judge_n",
    "judge_accuracy",
    "judge_kappa",
    "judge_unparsed_share",
)
JUDGE_AGREEMENT_COLUMNS = ("judge", "bank", "n", "accuracy", "kappa", "unparsed_share")
_ORDER_RANK = {o: i for i, o in enumerate(ORDERS)}
_TASK_RANK = {t: i for i, t in enumerate(REPORT_TASKS)}


# ---------------------------------------------------------------- derivations


def _argmax_rows(df: pd.DataFrame, task: str) -> pd.DataFrame:
    values = TASK_VALUES[task]
    probs = df[[f"p_{v}" for v in values]].to_numpy(np.float64)
    df = df.copy()
    df["pred"] = np.asarray(values, dtype=object)[probs.argmax(axis=1)]
    df["confidence"] = probs.max(axis=1)
    return df


def averaged_order(raw: pd.DataFrame) -> pd.DataFrame:
    """Rows of order "averaged": mean of the "given" and "reversed" distributions per item."""
    out = []
    for task, sub in raw.groupby("task", sort=False):
        cols = [f"p_{v}" for v in TASK_VALUES[str(task)]]
        given = sub[sub["order"] == "given"].set_index(_KEYS)
        rev = sub[sub["order"] == "reversed"].set_index(_KEYS)
        if given.empty or rev.empty:
            continue
        rev = rev.reindex(given.index)
        avg = given.copy()
        avg[cols] = (given[cols].to_numpy(np.float64) + rev[cols].to_numpy(np.float64)) / 2.0
        avg["order"] = "averaged"
        avg["option_order"] = ""
        if "tie_guarded" in avg:  # the average holds float32 numbers if either order's do
            avg["tie_guarded"] = given["tie_guarded"].fillna(False).astype(bool) | rev["tie_guarded"].fillna(
                False
            ).astype(bool)
        out.append(_argmax_rows(avg.reset_index(), str(task)))
    return pd.concat(out, ignore_index=True) if out else raw.iloc[:0]


def five_as_binary(five: pd.DataFrame) -> pd.DataFrame:
    """Binary rows derived from five-class rows (any orders): P(1) = P(S) + P(V) + P(E)."""
    df = five.copy()
    p1 = df[_SYC_P].to_numpy(np.float64).sum(axis=1)
    total = df[list(FIVE_P)].to_numpy(np.float64).sum(axis=1)
    df["p_1"] = p1
    df["p_0"] = total - p1
    df[list(FIVE_P)] = np.nan
    df["gold"] = df["gold"].map(lambda g: "1" if g in SYCOPHANTIC else "0")
    df["task"] = "five_as_binary"
    df["option_order"] = ""
    return _argmax_rows(df, "five_as_binary")


def prediction_table(units: list[Unit]) -> pd.DataFrame:
    """Every task x order row: raw scored rows plus the "averaged" and "five_as_binary" ones."""
    raw = pd.concat([u.tables["predictions"] for u in units], ignore_index=True)
    raw["gold"] = raw["gold"].astype(str)
    raw["pred"] = raw["pred"].astype(str)
    raw = pd.concat([raw, averaged_order(raw)], ignore_index=True)
    raw = pd.concat([raw, five_as_binary(raw[raw["task"] == "five"])], ignore_index=True)
    raw["_t"] = raw["task"].map(_TASK_RANK)
    raw["_o"] = raw["order"].map(_ORDER_RANK)
    raw = raw.sort_values(["checkpoint", "bank", "_t", "_o", "item_id"], kind="mergesort", ignore_index=True)
    return raw.drop(columns=["_t", "_o"])


# ---------------------------------------------------------------- tables


def _metric_labels(task: str) -> list[Any]:
    return [int(v) for v in TASK_VALUES[task]] if task != "five" else list(FIVE_LABELS)


def _normalized(task: str, values: pd.Series) -> list[Any]:
    return [int(v) for v in values] if task != "five" else list(values)


def summary_table(preds: pd.DataFrame, *, n_boot: int, seed: int, by: str | None = None) -> pd.DataFrame:
    """classify_summary per (bank, order[, by]) with those columns inserted after checkpoint."""
    frames = []
    keys = ["bank", "order"] + ([by] if by else [])
    for key, sub in preds.groupby(keys, sort=True):
        s = classify_summary(sub[["checkpoint", "task", "item_id", "gold", "pred"]], n_boot=n_boot, seed=seed)
        for i, k in enumerate(keys):
            s.insert(1 + i, k, key[i])
        frames.append(s)
    out = pd.concat(frames, ignore_index=True)
    first = ([by] if by else []) + [c for c in SUMMARY_COLUMNS if c in out]
    out = out[first + [c for c in out.columns if c not in first]]
    out["_t"] = out["task"].map(_TASK_RANK)
    out["_o"] = out["order"].map(_ORDER_RANK)
    out = out.sort_values(
        ["checkpoint", "bank", "_t", "_o"] + ([by] if by else []), kind="mergesort", ignore_index=True
    )
    return out.drop(columns=["_t", "_o"])


def confusion_table(preds: pd.DataFrame) -> pd.DataFrame:
    """Long confusion counts and row shares per (checkpoint, bank, task, order)."""
    rows = []
    for (ck, bank, task, order), sub in preds.groupby(["checkpoint", "bank", "task", "order"], sort=False):
        labels = _metric_labels(str(task))
        counts, shares = confusion(_normalized(task, sub["gold"]), _normalized(task, sub["pred"]), labels)
        for g in counts.index:
            for p in counts.columns:
                rows.append(
                    {
                        "checkpoint": ck,
                        "bank": bank,
                        "task": task,
                        "order": order,
                        "gold": str(g),
                        "pred": str(p),
                        "count": int(counts.loc[g, p]),
                        "row_share": float(shares.loc[g, p]),
                    }
                )
    return pd.DataFrame(rows, columns=list(CONFUSION_COLUMNS))


def position_table(preds: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """How much predictions move between the two listing orders, per (checkpoint, bank, task).

    share_changed / mean_abs_prob_shift: analyses.classify_metrics.position_bias between the
    "given" and "reversed" rows; first_listed_<order>: share of predictions equal to the label
    listed first in that order (NaN for five_as_binary, which has no listing of its own);
    macro_f1_<order>: from the summary.
    """
    rows = []
    f1 = summary.set_index(["checkpoint", "bank", "task", "order"])["macro_f1"]
    for (ck, bank, task), sub in preds.groupby(["checkpoint", "bank", "task"], sort=True):
        cols = ["item_id", "pred", "gold"] + [f"p_{v}" for v in TASK_VALUES[str(task)]]
        a, b = sub[sub["order"] == "given"], sub[sub["order"] == "reversed"]
        if a.empty or b.empty:
            continue
        pb = position_bias(a[cols], b[cols])
        row = {"checkpoint": ck, "bank": bank, "task": task, **pb}
        for order, df in (("given", a), ("reversed", b)):
            first = df["option_order"].fillna("").astype(str).str.split("|").str[0]
            row[f"first_listed_{order}"] = float((df["pred"] == first).mean()) if (first != "").all() else np.nan
        for order in ORDERS:
            row[f"macro_f1_{order}"] = float(f1.get((ck, bank, task, order), np.nan))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(POSITION_COLUMNS))


def bank_count_table(preds: pd.DataFrame) -> pd.DataFrame:
    """Items per bank by five_label, binary label, language_form, split, community (one checkpoint's rows)."""
    rows = []
    five = preds[(preds["task"] == "five") & (preds["order"] == "given")]
    binary = preds[(preds["task"] == "binary") & (preds["order"] == "given")]
    for bank, sub in five.groupby("bank", sort=True):
        sub = sub[sub["checkpoint"] == sub["checkpoint"].iloc[0]]
        collapsed = sub["gold"].map(lambda g: "1" if g in SYCOPHANTIC else "0")
        b = binary[(binary["bank"] == bank) & (binary["checkpoint"] == sub["checkpoint"].iloc[0])]
        annotated = (
            sub["item_id"].map(b.set_index("item_id")["gold"].astype(str)) if len(b) else collapsed
        )  # the bank's own binary label (may differ from collapsed five)
        fields = {
            "five_label": sub["gold"],
            "binary_label": annotated,
            "binary_vs_five": (annotated == collapsed).map({True: "agree", False: "disagree"}),
        }
        for f in ("language_form", "split", "community"):
            if f in sub:
                fields[f] = sub[f].fillna("").astype(str)
        for f, values in fields.items():
            for value, count in values.value_counts().sort_index().items():
                rows.append({"bank": bank, "field": f, "value": value, "count": int(count)})
    return pd.DataFrame(rows, columns=["bank", "field", "value", "count"])


def generation_tables(units: list[Unit]) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    frames = [u.tables["generation"] for u in units if "generation" in u.tables]
    if not frames:
        return None
    gen = pd.concat(frames, ignore_index=True)
    gen["parsed"] = gen["parsed"].astype(bool)
    gen["label"] = gen["label"].where(gen["parsed"] & (gen["label"].astype(str) != ""), np.nan)
    gen = gen.sort_values(["checkpoint", "bank", "item_id", "sample"], kind="mergesort", ignore_index=True)
    frames = []
    for (bank, judge), sub in gen.groupby(["bank", "judge"], sort=True):
        s = generation_summary(sub[["checkpoint", "label", "parsed"]])
        s.insert(1, "bank", bank)
        s.insert(2, "judge", judge)
        frames.append(s)
    summary = pd.concat(frames, ignore_index=True)
    agree, _ = judge_agreement_tables(units)
    if len(agree):  # the judge's agreement with gold beside the rates it produced
        summary = summary.merge(
            agree[["judge", "bank", "n", "accuracy", "kappa", "unparsed_share"]].rename(
                columns={
                    "n": "judge_n",
                    "accuracy": "judge_accuracy",
                    "kappa": "judge_kappa",
                    "unparsed_share": "judge_unparsed_share",
                }
            ),
            on=["judge", "bank"],
            how="left",
        )
    for c in ("judge_n", "judge_accuracy", "judge_kappa", "judge_unparsed_share"):
        if c not in summary:
            summary[c] = np.nan
    return gen, summary


def judge_agreement_tables(units: list[Unit]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(agreement, confusion) of each judge on the bank's labelled comments (units' judge_gold
    tables; empty frames for units cached before they were stored)."""
    from analyses.classify_metrics import judge_agreement

    frames = [u.tables["judge_gold"].assign(bank=str(u.attrs.get("bank"))) for u in units if "judge_gold" in u.tables]
    if not frames:
        return pd.DataFrame(columns=list(JUDGE_AGREEMENT_COLUMNS)), pd.DataFrame()
    return judge_agreement(pd.concat(frames, ignore_index=True))


# ---------------------------------------------------------------- figures

_safe = safe_name


@redraw_on_change
def plot_confusion(conf: pd.DataFrame, task: str, title: str, path: Path) -> Path:
    labels = [str(v) for v in _metric_labels(task)]
    cols = labels + [p for p in conf["pred"].unique() if p not in labels]
    share = conf.pivot(index="gold", columns="pred", values="row_share").reindex(index=labels, columns=cols)
    count = conf.pivot(index="gold", columns="pred", values="count").reindex(index=labels, columns=cols)
    size = 1.0 + 0.75 * len(cols)
    fig = new_figure(size + 1.2, size)
    ax = fig.subplots()
    im = ax.imshow(share.to_numpy(float), vmin=0, vmax=1, cmap="Blues")
    for i in range(len(labels)):
        for j in range(len(cols)):
            v = share.iat[i, j]
            ax.text(
                j,
                i,
                f"{v:.2f}\n({int(count.iat[i, j])})",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if v > 0.6 else "black",
            )
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title, fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046, label="row share")
    return save_figure(fig, path)


@redraw_on_change
def plot_precision_recall(summary: pd.DataFrame, path: Path) -> Path:
    """Precision vs recall of the sycophantic class across checkpoints (order "averaged");
    bubble area grows with macro-F1; one marker per binary reading and bank."""
    df = summary[(summary["order"] == "averaged") & summary["task"].isin(["binary", "five_as_binary"])]
    fig = new_figure(6, 5)
    ax = fig.subplots()
    markers = {"binary": "o", "five_as_binary": "s"}
    for (task, bank), sub in df.groupby(["task", "bank"], sort=True):
        ax.scatter(
            sub["recall"],
            sub["precision"],
            s=40 + 400 * sub["macro_f1"].clip(0, 1),
            alpha=0.6,
            marker=markers.get(task, "o"),
            label=f"{bank}: {task}",
        )
        for r in sub.itertuples(index=False):
            ax.annotate(
                str(r.checkpoint), (r.recall, r.precision), fontsize=6, xytext=(3, 3), textcoords="offset points"
            )
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("recall (sycophantic)")
    ax.set_ylabel("precision (sycophantic)")
    ax.set_title("Binary detection across checkpoints (bubble: macro-F1)", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


# ---------------------------------------------------------------- entry point


def one_class_gold(preds: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(bank, task, label) for every bank and task whose gold labels are all one class."""
    if preds.empty:
        return []
    gold = preds.drop_duplicates(["bank", "task", "item_id"]).groupby(["bank", "task"], sort=True)["gold"]
    return [(str(b), str(t), str(g.iloc[0])) for (b, t), g in gold if g.nunique() == 1]


def one_class_gold_lines(results_dir: Path) -> list[str]:
    """The report's note beside macro-F1 / MCC when a bank's gold labels are all one class."""
    from analyses.io import md_cell
    from interp.core.files import regular_file

    path = Path(results_dir) / "classify_predictions.csv"
    if not path.exists():
        return []
    regular_file(path, error=TableError)
    try:
        preds = pd.read_csv(path, usecols=["bank", "task", "item_id", "gold"], dtype=str, keep_default_na=False)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise TableError(f"{path}: not a readable results table ({' '.join(str(exc).split())[:200]})") from None
    return [
        f"- Note: every gold label of bank {md_cell(b)} ({md_cell(t)}) is {md_cell(g)}: macro-F1 averages F1 over "
        "classes no item has and MCC is 0 by definition; neither says how well the model tells the classes apart."
        for b, t, g in one_class_gold(preds)
    ]


def analyze_classify(units: list[Unit], results_dir: Path, cfg) -> dict[str, pd.DataFrame]:
    results_dir = Path(results_dir)
    preds = prediction_table(units)
    for bank, task, label in one_class_gold(preds):
        warnings.warn(
            f"classify: every gold label of bank {bank} ({task}) is {label}: macro-F1 and MCC do not measure "
            "discrimination on it (noted in report.md)",
            stacklevel=2,
        )
    summary = summary_table(preds, n_boot=cfg.n_boot, seed=cfg.seed)
    # the given order (closest to the papers' protocol) beside the order-averaged reading
    by_lang = summary_table(
        preds[preds["order"].isin(["given", "averaged"])], n_boot=cfg.n_boot, seed=cfg.seed, by="language_form"
    )
    conf = confusion_table(preds)
    pos = position_table(preds, summary)
    counts = bank_count_table(preds)
    write_table(preds, results_dir / "classify_predictions.csv", columns=PREDICTION_COLUMNS)
    write_table(summary, results_dir / "classify_summary.csv", columns=SUMMARY_COLUMNS)
    write_table(by_lang, results_dir / "classify_summary_by_language.csv", columns=("language_form",) + SUMMARY_COLUMNS)
    write_table(conf, results_dir / "classify_confusion.csv", columns=CONFUSION_COLUMNS)
    write_table(pos, results_dir / "classify_position_bias.csv", columns=POSITION_COLUMNS)
    write_table(counts, results_dir / "classify_bank_counts.csv")
    tables = {
        "classify_predictions": preds,
        "classify_summary": summary,
        "classify_summary_by_language": by_lang,
        "classify_confusion": conf,
        "classify_position_bias": pos,
        "classify_bank_counts": counts,
    }
    gen = generation_tables(units)
    if gen is not None:
        write_table(gen[0], results_dir / "generation.csv", columns=GENERATION_COLUMNS)
        write_table(gen[1], results_dir / "generation_summary.csv", columns=GENERATION_SUMMARY_COLUMNS)
        tables.update(generation=gen[0], generation_summary=gen[1])
        agree, jconf = judge_agreement_tables(units)
        if len(agree):
            write_table(agree, results_dir / "judge_agreement.csv", columns=JUDGE_AGREEMENT_COLUMNS)
            write_table(jconf, results_dir / "judge_confusion.csv")
            tables.update(judge_agreement=agree, judge_confusion=jconf)
    figures = results_dir.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    averaged = conf[conf["order"] == "averaged"]
    for (ck, bank, task), sub in averaged.groupby(["checkpoint", "bank", "task"], sort=True):
        plot_confusion(
            sub,
            str(task),
            f"{ck} | {bank} | {task} (order-averaged)",
            figures / f"classify_confusion_{_safe(ck)}_{_safe(bank)}_{task}.png",
        )
    plot_precision_recall(summary, figures / "classify_precision_recall.png")
    return tables
