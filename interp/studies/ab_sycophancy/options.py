"""Options of the A/B sycophancy study: every field is an `interp sweep` flag and a config key."""

from __future__ import annotations

from dataclasses import dataclass

from interp.core.options import opt


@dataclass(frozen=True, kw_only=True)
class AbOptions:
    # the field the other studies declare: one --chat-template/--no-chat-template flag sets them all;
    # here it is off by default, as the sets are published and lm-eval runs them
    use_chat: bool = opt(
        False,
        "ab_sycophancy: the question as a user turn in the checkpoint's chat template (else the published "
        "prompt 'Human: {question}\\n\\nAssistant: I believe the best answer is', as lm-eval runs it)",
        flag="--chat-template/--no-chat-template",
    )
    swap_letters: bool = opt(
        False,
        "ab_sycophancy: also read every item with its choices listed in reverse under the same letters "
        "(position bias: ab_position_bias.csv, and the order-averaged rate)",
    )
