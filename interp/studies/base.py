"""What a study is: bank + template -> trials -> scored unit -> results tables.

Every study implements the same small protocol so the sweep can plan, run, cache and
analyze any of them the same way. Numbers-changing settings go into `settings()` and
from there into the unit identity; batch size and threads never do.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np
import pandas as pd

from cache.store import Unit
from interp.banks import Bank
from interp.errors import BankError
from interp.hashing import sha256_json
from interp.loading import LoadedModel
from interp.runner.scoring import ScoringConfig


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Options for running studies (CLI > config file > these defaults)."""

    backend: str = "hf"
    layer: int | None = None  # None: three-quarter depth, floor(3 n_layers / 4), as resid_pre
    scoring: ScoringConfig = ScoringConfig()
    resid_dtype: str = "float16"
    max_items: int | None = None  # subsample the bank (deterministic for `seed`)
    seed: int = 0
    threads: int | None = None
    n_boot: int = 1000
    options: Mapping[str, Any] = field(default_factory=dict)  # study-specific, see each study


@dataclass(frozen=True)
class Template:
    name: str
    data: Mapping[str, Any]
    hash: str
    source: str = ""  # the file it came from, for error messages


@dataclass
class Payload:
    tables: dict[str, pd.DataFrame]
    arrays: dict[str, np.ndarray]


def load_template(ref: str | Path) -> Template:
    """A shipped template by name (e.g. `pressure_v1`) or a user's JSON file."""
    path = Path(str(ref))
    if not path.exists():
        path = Path(str(resources.files("interp") / "data" / "templates" / f"{ref}.json"))
    if path.exists():
        from interp.fingerprint import regular_file

        regular_file(path, limit=16 << 20, error=BankError)  # a FIFO or /dev/zero: refused, not read
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise BankError(f"{ref}: template file does not exist") from None
    except ValueError as exc:
        raise BankError(f"{path}: template is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or "version" not in data:
        raise BankError(f"{path}: template needs a JSON object with a 'version' field")
    return Template(name=path.stem, data=data, hash=sha256_json(data), source=str(path))


def chat_template_hash(lm_tokenizer) -> str:
    """Identity of the prompt format: the model's chat template, or the plain transcript."""
    tmpl = getattr(lm_tokenizer, "chat_template", None)
    return sha256_json({"chat_template": tmpl or "plain-transcript-v1"})


def render_chat(tokenizer, messages: list[dict[str, str]], assistant_prefix: str, *, use_chat: bool = True) -> str:
    """Prompt text ending inside the assistant's reply (after `assistant_prefix`).

    With a chat template the model's own format is used; otherwise a plain transcript
    "User: ...\\nAssistant: ..." is written. Both are hashed into the unit identity.
    """
    if use_chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text + assistant_prefix
    lines = []
    for m in messages:
        role = {"user": "User", "assistant": "Assistant", "system": "System"}[m["role"]]
        lines.append(f"{role}: {m['content']}")
    lines.append(f"Assistant: {assistant_prefix}".rstrip(" ") if assistant_prefix else "Assistant:")
    return "\n".join(lines)


class Study(Protocol):
    name: str
    version: str
    default_banks: tuple[str, ...]
    default_template: str

    def load_bank(self, ref: str | Path) -> Bank: ...

    def check_template(self, template: Template) -> None: ...

    def settings(self, lm_tokenizer, cfg: RunConfig) -> dict: ...

    def run_unit(self, lm: LoadedModel, bank: Bank, template: Template, layer: int, cfg: RunConfig) -> Payload: ...

    def analyze(self, units: list[Unit], results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]: ...
