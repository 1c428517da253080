"""Start-up hook that makes plain `lm_eval --model interp` work (copied into site-packages).

lm-eval 0.4.13 has no plugin discovery: its models are a fixed `MODEL_MAPPING` in
`lm_eval/models/__init__.py`, registered when that module is imported. `interp lm-eval-hook
--install` copies this file into the environment's site-packages as `_interp_lm_eval_hook.py`
next to a one-line `interp-lm-eval-hook.pth` that imports it at Python start-up.

At start-up it only puts a finder on `sys.meta_path` (it imports nothing but `sys`). The finder
acts on one import, `lm_eval.models`: right after lm-eval has registered its own models there, it
adds the lazy entry `interp -> interp.integrations.lm_eval_model:InterpLM`, which lm-eval resolves only when
`--model interp` is asked for. Processes that never import lm-eval see nothing else. Registering
before `lm_eval.models` ran would hide lm-eval's own models (`get_model` imports them only while
the registry is empty), hence the wait. This file must stay standard-library only.
"""

import sys

MODEL_NAME = "interp"
TARGET = "interp.integrations.lm_eval_model:InterpLM"
WATCHED = "lm_eval.models"


def register() -> None:
    """Add the lazy `interp` entry to lm-eval's model registry (if nothing holds the name)."""
    try:
        from lm_eval.api.registry import model_registry

        if MODEL_NAME not in model_registry:
            model_registry.register(MODEL_NAME, target=TARGET)
    except Exception as exc:  # never break an lm-eval run over the extra model
        import warnings

        warnings.warn(f"interp lm-eval hook: model {MODEL_NAME!r} not registered: {exc}", stacklevel=2)


class LmEvalModelsFinder:
    """A meta-path finder that only wraps the loader of `lm_eval.models` (the real finders find it)."""

    interp_lm_eval_hook = True  # marks every copy of this finder (the module may be loaded twice)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != WATCHED:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if getattr(finder, "interp_lm_eval_hook", False) or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_register(module):
            exec_module(module)
            register()

        loader.exec_module = exec_then_register
        return spec


def install() -> None:
    """Put the finder first on `sys.meta_path` (once per process)."""
    if not any(getattr(f, "interp_lm_eval_hook", False) for f in sys.meta_path):
        sys.meta_path.insert(0, LmEvalModelsFinder())
    if WATCHED in sys.modules:  # lm-eval's models already loaded (hook installed late)
        register()


install()
