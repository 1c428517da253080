"""Local lm-evaluation-harness tasks built from the shipped banks (no hub, no download).

`write_tasks(DIR)` writes one YAML per task plus its JSONL data into DIR; then
    interp-lm-eval --model interp --model_args pretrained=MODEL --include_path DIR --tasks interp_factual,...
runs them offline. They are ordinary lm-eval task configs (`dataset_path: json` with local
`data_files`), so `--model hf` runs the same requests; they also serve as a template for a
user's own local tasks.

  interp_factual  multiple choice: "Claim: ... True or false?" -> " true" / " false" (factual bank)
  interp_moral    multiple choice: account -> " wrong" / " acceptable" (moral bank)
  interp_cloze    multiple choice: sentence start -> stereotype / anti-stereotype / meaningless
                  completion (cloze bank, every language; a CrowS-Pairs-style preference task)
  interp_rolling  loglikelihood_rolling (perplexity) over the factual and moral texts
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from interp.banks import shipped_bank_path

TASKS = ("interp_factual", "interp_moral", "interp_cloze", "interp_rolling")


def _rows(name: str, max_items: int | None) -> pd.DataFrame:
    from interp.studies import all_studies

    all_studies()  # the studies register their shipped banks
    rows = pd.read_json(shipped_bank_path(name), lines=True)
    if max_items:
        key = "prompt_id" if "prompt_id" in rows else "item_id"
        keep = rows[key].drop_duplicates().iloc[:max_items]
        rows = rows[rows[key].isin(set(keep))]
    return rows.reset_index(drop=True)


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def _yaml(task: str, data: Path, output_type: str, body: str) -> str:
    return (
        f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        f"test_split: test\noutput_type: {output_type}\n{body}"
    )


_MC_METRICS = "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"


def write_tasks(dest: str | Path, *, max_items: int | None = None) -> list[str]:
    """Write the task YAMLs and data under `dest`; returns the task names."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    fact = _rows("factual", max_items)
    _write_jsonl(
        dest / "factual.jsonl", [{"text": r.text, "label": ["true", "false"].index(r.gold)} for r in fact.itertuples()]
    )
    (dest / "interp_factual.yaml").write_text(
        _yaml(
            "interp_factual",
            dest / "factual.jsonl",
            "multiple_choice",
            'doc_to_text: "Claim: {{text}}\\nIs the claim true or false?\\nAnswer:"\n'
            'doc_to_choice: ["true", "false"]\ndoc_to_target: label\n' + _MC_METRICS,
        )
    )
    moral = _rows("moral", max_items)
    _write_jsonl(
        dest / "moral.jsonl",
        [{"text": r.text, "label": ["wrong", "acceptable"].index(r.gold)} for r in moral.itertuples()],
    )
    (dest / "interp_moral.yaml").write_text(
        _yaml(
            "interp_moral",
            dest / "moral.jsonl",
            "multiple_choice",
            'doc_to_text: "{{text}}\\nWas that wrong or acceptable?\\nAnswer:"\n'
            'doc_to_choice: ["wrong", "acceptable"]\ndoc_to_target: label\n' + _MC_METRICS,
        )
    )
    cloze = _rows("cloze", max_items)
    recs = []
    for r in cloze.itertuples():
        stem = r.context.split("___")[0].rstrip()
        recs.append(
            {
                "context": stem,
                "choices": [r.stereotype, r.anti_stereotype, r.meaningless],
                "label": 0,
                "language": r.language,
            }
        )
    _write_jsonl(dest / "cloze.jsonl", recs)
    (dest / "interp_cloze.yaml").write_text(
        _yaml(
            "interp_cloze",
            dest / "cloze.jsonl",
            "multiple_choice",
            'doc_to_text: "{{context}}"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: label\n' + _MC_METRICS,
        )
    )
    _write_jsonl(dest / "rolling.jsonl", [{"text": t} for t in list(fact["text"]) + list(moral["text"])])
    (dest / "interp_rolling.yaml").write_text(
        _yaml(
            "interp_rolling",
            dest / "rolling.jsonl",
            "loglikelihood_rolling",
            'doc_to_text: ""\ndoc_to_target: "{{text}}"\nmetric_list:\n  - metric: word_perplexity\n'
            "  - metric: byte_perplexity\n  - metric: bits_per_byte\n",
        )
    )
    return list(TASKS)
