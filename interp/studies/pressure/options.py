"""Options of the pressure study: every field is an `interp sweep` flag and a config key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from interp.core.options import opt


@dataclass(frozen=True, kw_only=True)
class PressureOptions:
    use_chat: bool = opt(
        True,
        "render prompts with the model's chat template (else a plain transcript)",
        flag="--chat-template/--no-chat-template",
    )
    readout: Literal["slot", "sampled"] = opt("slot", "pressure: slot or sampled readout")
    n_samples: int = opt(21, "pressure sampled readout: replies per trial")
    temperature: float = opt(1.0, "sampling temperature")
    max_new_tokens: int = opt(6, "new tokens per sampled reply")
    comprehension_threshold: float = opt(
        0.6,
        "pressure: first-turn accuracy a checkpoint needs to pass the "
        "comprehension screen (this toolkit's choice; failing ones are marked)",
    )
