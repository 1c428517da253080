"""lm-evaluation-harness model `interp`: loglikelihood requests on the prefix-reusing engine.

    pip install 'interp[lm-eval]'
    interp-lm-eval --model interp --model_args pretrained=DIR --tasks TASKS --include_path TASK_DIR
    interp lm-eval-hook --install; lm_eval --model interp ...      (plain lm_eval, opt-in hook)
    python -m interp.integrations.lm_eval_model ...            (the same)
    import interp.integrations.lm_eval_model; lm_eval.simple_evaluate(model="interp", model_args="pretrained=DIR", ...)

lm-eval 0.4.13 discovers models only through its own module list (no plugin entry points), so
the registration happens on import of this module; `interp-lm-eval` imports it and hands the
command line to lm-eval's own `cli_evaluate` unchanged. For the plain `lm_eval` command, install
the opt-in start-up hook: `interp lm-eval-hook --install` (interp.integrations.lm_eval_hook).

Tokenization, truncation and the empty-context rule are lm-eval's own (`TemplateLM`, with
`tok_encode` as HFLM does it), so the same requests become the same token sequences as with
`--model hf`; only the forward differs: requests sharing a context (every multiple-choice
question) compute it once (interp.runner.engine), and the unembedding runs only at the
positions that are read. Tested equal to HFLM within 1e-4 (tests/integration/test_lm_eval_model.py).
`is_greedy` is exact (the engine takes the argmax over the whole vocabulary at each continuation
position on the device; pass `greedy=False` to skip it and report False).
`generate_until` is not served (this model is for log-likelihood tasks).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import _add_special_kwargs, has_bos_prefix, resolve_max_length

DEFAULT_MAX_LENGTH = 2048  # HFLM's default when neither config nor tokenizer states one
# padded tokens one more forward is worth (EngineConfig.forward_cost_tokens): lm-eval's requests
# come in few deep levels, where fewer, wider forwards used two threads better (local tasks, 2
# threads, engine time: 16 -> 64 was 4% faster; at 1 thread no different). Speed only.
FORWARD_COST_TOKENS = 64
MIN_ROWS = 64  # the engine's default rows per forward


def _bool(v: Any) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() in ("1", "true", "yes")


class InterpLM(TemplateLM):
    """`pretrained` is a local checkpoint directory (or an `interp` LoadedModel)."""

    def __init__(
        self,
        pretrained: Any,
        *,
        backend: str = "hf",
        dtype: str = "float32",
        batch_size: int | str = 16,
        max_batch_tokens: int = 8192,
        prefix_reuse: bool | str = True,
        threads: int | None = None,
        add_bos_token: bool | str | None = None,
        max_length: int | None = None,
        greedy: bool | str = True,
        forward_cost_tokens: int | str = FORWARD_COST_TOKENS,
        packed: bool | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        import interp
        from interp.model.loading import LoadedModel
        from interp.runner.engine import EngineConfig

        if isinstance(pretrained, LoadedModel):
            self.lm = pretrained
        else:
            self.lm = interp.load(
                str(pretrained), backend=backend, dtype=dtype, threads=int(threads) if threads else None
            )
        self.tokenizer = self.lm.tokenizer
        self.add_bos_token = None if add_bos_token is None else _bool(add_bos_token)
        # lm-eval's batch size counts sequences; the engine's rows are prefix-tree nodes, bounded by
        # max_batch_tokens and memory: a small lm-eval batch size does not shrink its forwards
        bs = MIN_ROWS if str(batch_size).startswith("auto") else max(MIN_ROWS, int(batch_size))
        self.engine_cfg = EngineConfig(
            batch_size=bs,
            max_batch_tokens=int(max_batch_tokens),
            prefix_reuse=_bool(prefix_reuse),
            forward_cost_tokens=int(forward_cost_tokens),
            packed=None if packed is None or str(packed).lower() == "auto" else _bool(packed),
        )
        model = getattr(self.lm.backend, "model", None)
        config = getattr(model, "config", None)
        self._max_length = (
            int(max_length) if max_length else resolve_max_length(config, self.tokenizer, default=DEFAULT_MAX_LENGTH)
        )
        self.greedy = _bool(greedy)
        kwargs.pop("greedy_chunk", None)  # accepted for old command lines; is_greedy no longer chunks
        self.engine_stats: dict[str, Any] = {}  # request type -> the EngineStats of its last call

    # -- tokenization: exactly HFLM's
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, left_truncate_len: int | None = None, **kwargs: Any
    ) -> list[int]:
        special = _add_special_kwargs(add_special_tokens, self.add_bos_token)
        if add_special_tokens is None and has_bos_prefix(string, self.tokenizer.decode(self.prefix_token_id)):
            special["add_special_tokens"] = False
        enc = self.tokenizer.encode(string, **special)
        return enc[-left_truncate_len:] if left_truncate_len else enc

    # -- scoring
    def _run(self, pairs: list[tuple[list[int], list[int]]], greedy: bool, kind: str) -> list[tuple[float, bool]]:
        """All requests of one call in one engine run: requests sharing a context (the choices of
        a question) or a longer prefix (few-shot examples, a task's preamble) share its forward."""
        from interp.runner.engine import Engine, Seq

        seqs = []
        for ctx, cont in pairs:
            if not ctx or not cont:
                raise ValueError("interp lm-eval model: empty context or continuation encoding")
            full = (list(ctx) + list(cont))[-(self.max_length + 1) :]
            ids = tuple(full[:-1])
            k = len(cont)
            reads = [(len(ids) - k + j, (t,)) for j, t in enumerate(cont)]
            seqs.append(Seq(ids=ids, reads=reads, argmax=greedy))
        engine = Engine(self.lm.backend, [], self.engine_cfg, self.tokenizer.pad_token_id)
        results = engine.run(seqs)
        self.engine_stats[kind] = engine.stats
        out = []
        for (_, cont), res in zip(pairs, results):
            total = float(sum(r[0] for r in res.logp))
            # argmax of the whole distribution at each continuation position, as HFLM checks it
            is_greedy = greedy and all(a == t for a, t in zip(res.argmax, cont))
            out.append((total, is_greedy))
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs: Any) -> list[tuple[float, bool]]:
        answers = self._run([(ctx, cont) for _, ctx, cont in requests], greedy=self.greedy, kind="loglikelihood")
        for (key, _, _), answer in zip(requests, answers):
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, answer)
        return answers

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        from lm_eval import utils

        windows, owner = [], []
        for n, (string,) in enumerate(req.args for req in requests):
            for ctx, cont in map(
                utils.make_disjoint_window,
                utils.get_rolling_token_windows(
                    token_list=self.tok_encode(string),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                ),
            ):
                windows.append((ctx, cont))
                owner.append(n)
        scores = self._run(windows, greedy=False, kind="loglikelihood_rolling")
        totals = np.zeros(len(requests))
        for n, (s, _) in zip(owner, scores):
            totals[n] += s
        out = [float(t) for t in totals]
        for req, t in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, t)
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError("interp lm-eval model serves loglikelihood tasks only; use --model hf to generate")


if __name__ != "__main__":  # `python -m` registers the importable copy instead (see the end)
    register_model("interp")(InterpLM)


def cli() -> None:
    """`interp-lm-eval`: lm-eval's own command line with the `interp` model registered."""
    from lm_eval.__main__ import cli_evaluate

    sys.argv[0] = "lm_eval"
    cli_evaluate()


if __name__ == "__main__":
    # the class of this `__main__` copy is not the one lm-eval's registry (or the start-up hook's
    # lazy entry `interp.integrations.lm_eval_model:InterpLM`) names: run the importable module's cli
    from interp.integrations.lm_eval_model import cli as _cli

    _cli()
