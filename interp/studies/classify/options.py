"""Options of the classify study: every field is an `interp sweep` flag and a config key."""

from __future__ import annotations

from dataclasses import dataclass

from interp.core.errors import ConfigError
from interp.core.options import opt

DEFAULT_TEMPLATES = {"binary": "classify_binary_v1", "five": "classify_five_v1", "judge": "classify_judge_v1"}


@dataclass(frozen=True, kw_only=True)
class ClassifyOptions:
    use_chat: bool = opt(
        True,
        "render prompts with the model's chat template (else a plain transcript)",
        flag="--chat-template/--no-chat-template",
    )
    generate: bool = opt(False, "classify: also generate replies and judge them")
    judge: str | None = opt(
        None,
        "classify: judge checkpoint for --generate (default: models/gemma3-270m when "
        "present, else each checkpoint itself)",
    )
    temperature: float = opt(0.9, "sampling temperature")
    max_new_tokens: int = opt(350, "new tokens per sampled reply")
    n_replies: int = opt(1, "classify: replies per post")
    max_posts: int | None = opt(None, "classify: posts to generate for (None: all)")
    binary_template: str = opt(DEFAULT_TEMPLATES["binary"], "classify: template of the binary task")
    five_template: str = opt(DEFAULT_TEMPLATES["five"], "classify: template of the five-class task")
    judge_template: str = opt(DEFAULT_TEMPLATES["judge"], "classify: template of the judge")
    length_instruction: str | None = opt(
        None,
        "classify: length instruction ending the reply prompt (default: "
        "the judge template's, 'Reply in 150-200 words.' as in BenSyc; "
        "'' drops it)",
    )

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        if self.max_new_tokens < 1 or self.n_replies < 1 or (self.max_posts is not None and self.max_posts < 1):
            raise ConfigError("max_new_tokens, n_replies and max_posts must be >= 1")


GENERATION_FIELDS = ("temperature", "max_new_tokens", "n_replies", "max_posts")
