"""What a study is: bank + template -> trials -> scored unit -> results tables.

Every study is a `StudySpec` subclass in its own folder `interp/studies/<name>/`, registered
once with `@register_study` (interp.studies). The sweep plans, runs, caches and analyzes any
of them the same way; the report, `probe` and `predict` ask the spec for its sections,
probe targets and item maps. Numbers-changing settings go into `settings()` and from there
into the unit identity; batch size and threads never do.

Importing this module never imports torch: the model side is imported inside `run_unit`.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

import numpy as np
import pandas as pd

from cache.store import Unit
from interp.banks import Bank
from interp.core.errors import BankError, CheckpointError, ConfigError
from interp.core.hashing import sha256_json
from interp.core.options import build, opt, option_fields
from interp.runner.options import ScoringConfig

if TYPE_CHECKING:
    from interp.model.loading import LoadedModel


@dataclass(frozen=True, kw_only=True)
class NoOptions:
    """A study without options of its own."""


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Options for running studies (CLI > config file > these defaults), typed.

    Study options live in `studies` (study name -> that study's options dataclass); read
    them with `cfg.options_for(spec)`. `options=` (a plain dict, broadcast to every study
    that declares the key) is accepted for old callers and converted at construction.
    """

    backend: str = opt("hf", "a registered backend: hf, transformer_lens or nnsight")
    layer: int | None = opt(None, "residual layer (None: floor(3 n_layers / 4)), resid_pre")
    layers: str | None = opt(
        None, "several residual layers: all, 0,4,8, 2-5, -1 (not with --layer; cache.layers.parse_layers)"
    )
    device: str = opt("cpu", "cpu, cuda, cuda:N or auto (cuda when available)")
    dtype: str = opt(
        "float32",
        "float32: the numbers to publish. mixed-bf16 (matmuls in bf16, the rest float32) may be faster on CPUs "
        "with AVX-512 BF16 or AMX, at the cost results/precision.csv measures; what it buys depends on the "
        "workload, and on long chat contexts it does not pay (under 1.5x float32, verdicts moved by more than "
        "0.02): read precision.csv's speedup (docs/commands.md, Precision). "
        "Hidden, still accepted: "
        "float32-medium (no faster than float32 on any of the three workloads measured); "
        "mixed-bf16-medium (under the 1.2x floor on all three workloads measured); "
        "bfloat16 (verdicts moved beyond the audit's bounds, no tie guard); "
        "float16 (no fast float16 matmul on the project's CPUs; not measured on a GPU)",
        # interp.model.devices.DTYPES' names, spelled out: importing it would pull torch into the torch-free
        # cache readers (tests/integration/test_torch_free.py); tests/unit/test_mixed_precision.py holds the two equal
        choices=("float32", "bfloat16", "float16", "mixed-bf16", "float32-medium", "mixed-bf16-medium"),
    )
    device_map: str | None = opt(None, "accelerate device map, e.g. auto (a model larger than one device)")
    scoring: ScoringConfig = field(default=ScoringConfig(), metadata={"cli": False})
    resid_dtype: str = opt("float16", "dtype residuals are cached in", choices=("float16", "float32", "bfloat16"))
    max_items: int | None = opt(None, "deterministic subsample of the bank")
    seed: int = opt(0, "seed for subsampling, sampling and bootstraps", bounds="[0, inf)")
    threads: int | None = opt(None, "torch threads", bounds="[1, inf)")
    n_boot: int = opt(1000, "bootstrap resamples for confidence intervals", bounds="[1, inf)")
    allow_pickle: bool = opt(False, "load pickled .bin weights (weights_only)")
    full_hash: bool = opt(False, "fingerprint weights by hashing every byte (default: header + sampled blocks)")
    dask_retries: int = opt(2, "dask: re-runs of a unit task that raised", flag="--retries", bounds="[0, inf)")
    dask_allowed_failures: int = opt(
        3, "dask: worker deaths a unit task may cause before it is given up", bounds="[0, inf)"
    )
    dask_worker_timeout: float = opt(
        300.0, "dask: seconds with no worker connected before giving up", flag="--worker-timeout", bounds="(0, inf)"
    )
    dask_resources: Mapping[str, float] = field(default_factory=dict, metadata={"cli": False})
    # add alpha x direction at resid_pre while scoring (interp.runner.steering.Steering.to_options());
    # part of the unit identity through the settings hash (sweeps.plan.unit_settings)
    steering: Mapping[str, Any] | None = field(default=None, metadata={"cli": False})
    studies: Mapping[str, Any] = field(default_factory=dict, metadata={"cli": False})
    options: Mapping[str, Any] = field(default_factory=dict, metadata={"cli": False})  # deprecated, see above

    def __post_init__(self) -> None:
        if self.max_items is not None and (
            isinstance(self.max_items, bool) or not isinstance(self.max_items, int) or self.max_items < 1
        ):  # 0 used to run the whole bank silently, a negative count to fail with an IndexError
            from interp.core.errors import ConfigError

            raise ConfigError(f"--max-items must be a positive integer (got {self.max_items!r})")
        if self.layer is not None and self.layers is not None:  # one used to win without a word
            from interp.core.errors import ConfigError

            raise ConfigError(
                f"--layer {self.layer} and --layers {self.layers} exclude each other: give one "
                f"(--layers {self.layer},{self.layers} for both)"
            )
        if self.options:
            legacy = dict(self.options)
            for key in (
                "allow_pickle",
                "full_hash",
                "dask_retries",
                "dask_allowed_failures",
                "dask_worker_timeout",
                "dask_resources",
            ):
                if key in legacy:
                    object.__setattr__(self, key, legacy.pop(key))
            from interp.studies import broadcast_options

            object.__setattr__(self, "studies", broadcast_options(legacy, dict(self.studies)))
            object.__setattr__(self, "options", {})

    def options_for(self, spec: "StudySpec | type[StudySpec]") -> Any:
        """The typed options of one study (its defaults when none were given)."""
        return self.studies.get(spec.name) or spec.Options()


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
        from interp.core.files import regular_file

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
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja2's TemplateError (syntax, raise_exception) and what a template trips on
            where = getattr(tokenizer, "name_or_path", "") or "the tokenizer"
            raise CheckpointError(
                f"{where}: chat template cannot render the prompt ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:200]}); fix the template (tokenizer_config.json or chat_template.jinja) "
                "or sweep without it (--no-chat-template)"
            ) from None
        if not isinstance(text, str):
            raise CheckpointError(f"{getattr(tokenizer, 'name_or_path', '')}: chat template did not render text")
        return text + assistant_prefix
    lines = []
    for m in messages:
        role = {"user": "User", "assistant": "Assistant", "system": "System"}[m["role"]]
        lines.append(f"{role}: {m['content']}")
    lines.append(f"Assistant: {assistant_prefix}".rstrip(" ") if assistant_prefix else "Assistant:")
    return "\n".join(lines)


@dataclass(frozen=True)
class ProbeTarget:
    """A probe target of a study: `extract(unit) -> (X, y, groups)` from one cached unit."""

    kind: str  # "ridge" (continuous) or "logistic" (binary)
    extract: Callable[[Unit, str], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ReportSection:
    """One results table in report.md.

    Parameters
    ----------
    file : str
        The table's file under OUT/results/.
    heading : str
        Its heading in report.md.
    columns : tuple of str, optional
        The columns shown (None: all).
    note : str
        One sentence: what the numbers mean and which choices are the toolkit's own (not the
        papers').
    extra : callable, optional
        Lines added under the table, from OUT/results (e.g. what a number cannot mean for this
        data).
    """

    file: str
    heading: str
    columns: tuple[str, ...] | None = None
    note: str = ""
    extra: Callable[[Path], list[str]] | None = None


@dataclass(frozen=True)
class PredictInputs:
    """What `interp predict` needs from one cached unit: the item map, the unpressured
    profile and the per-item mean residual (None when the unit has none)."""

    item_map: pd.Series
    profile: pd.DataFrame
    readout: pd.DataFrame | None


class StudySpec(abc.ABC):
    """One study, everything about it in one class: subclass it, implement `load_bank` and
    `run_unit`, and register it (an `interp.studies` entry point, or `register_study`).

    Class attributes: name, version (in the unit identity), default_banks (shipped bank
    names), shipped_banks (name -> file under interp/data/banks), default_template,
    Options (frozen keyword-only dataclass), sample_by / stratify_by (how --max-items
    subsamples a bank), report_sections, demo_probe_targets, demo_banks. Methods with a
    default: check_template, subsample, settings, analyze, figures, probe_targets,
    predict_inputs, default_predict_bank.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    default_banks: ClassVar[tuple[str, ...]] = ()
    shipped_banks: ClassVar[Mapping[str, str]] = {}
    default_template: ClassVar[str]
    Options: ClassVar[type] = NoOptions
    sample_by: ClassVar[str] = "item_id"
    stratify_by: ClassVar[str | None] = None
    report_sections: ClassVar[tuple[ReportSection, ...]] = ()
    demo_probe_targets: ClassVar[tuple[str, ...]] = ()
    demo_banks: ClassVar[tuple[str, ...] | None] = None  # None: default_banks
    demo_items: ClassVar[int | None] = None  # items per bank in the 15-minute demo (None: all)
    supports_predict: ClassVar[bool] = False  # predict_inputs implemented (`interp predict`)

    # -- planning

    @abc.abstractmethod
    def load_bank(self, ref: str | Path) -> Bank:
        """A shipped bank by name or a user's file, validated (errors name the file, row and field)."""

    def check_template(self, template: Template) -> None:
        """Fail before any model loads if the template cannot serve this study."""
        return None  # a study that reads no template fields accepts any

    def subsample(self, bank: Bank, n: int | None, *, seed: int) -> Bank:
        return bank.subsample(n, seed=seed, by=self.sample_by, stratify=self.stratify_by)

    def settings(self, tokenizer, cfg: RunConfig) -> dict:
        """Everything that changes the numbers, hashed into the unit identity."""
        return {"resid_dtype": cfg.resid_dtype}

    # -- running (the only part that needs a model)

    @abc.abstractmethod
    def run_unit(
        self, lm: "LoadedModel", bank: Bank, template: Template, layers: tuple[int, ...], cfg: RunConfig
    ) -> Payload:
        """Score one bank on one loaded model: tables and arrays for one cache unit. Residual
        arrays come back as [..., len(layers), d_model] (cache.layers.stack_layers)."""

    # -- reading the cache

    def analyze(self, units: list[Unit], results_dir: Path, cfg: RunConfig) -> dict[str, pd.DataFrame]:
        """Write this study's results tables (results_dir/*.csv) from its cached units; return them."""
        return {}

    def figures(self, out: Path, results: Path, figures: Path) -> None:
        """Report figures drawn from results/*.csv (called by `interp report`)."""
        return None  # a study whose results have no figures

    def probe_targets(self) -> Mapping[str, ProbeTarget]:
        """Target name -> how `interp probe` reads (X, y, groups) from one cached unit."""
        return {}

    def predict_inputs(
        self, unit: Unit, *, turn_kind: str, with_readout: bool, readout_trials: str = "pressured"
    ) -> PredictInputs | None:
        """Item map, profile and readout of one unit for `interp predict`; None: not supported.
        `readout_trials`: which trials' residuals are averaged into the readout features."""
        return None

    def default_predict_bank(self, banks: list[str]) -> str:
        return banks[0]


def options_from(spec: type[StudySpec] | StudySpec, values: Mapping[str, Any]) -> Any:
    return build(spec.Options, values, where=f"{spec.name}: ")


def option_names(spec: type[StudySpec] | StudySpec) -> set[str]:
    return {f.name for f in option_fields(spec.Options)}


__all__ = [
    "ConfigError",
    "NoOptions",
    "Payload",
    "PredictInputs",
    "ProbeTarget",
    "ReportSection",
    "RunConfig",
    "StudySpec",
    "Template",
    "chat_template_hash",
    "load_template",
    "options_from",
    "render_chat",
]
