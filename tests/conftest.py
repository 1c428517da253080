import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    from interp.testing import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, tokenizer):
    """One tiny random checkpoint per architecture, built once per session."""
    from interp.testing import build_tiny_model

    root = tmp_path_factory.mktemp("models")
    return {
        arch: build_tiny_model(root / arch, arch, tokenizer=tokenizer, seed=i)
        for i, arch in enumerate(("gpt2", "llama", "qwen2"))
    }


def pytest_configure(config):
    """INTERP_TEST_BF16_MEDIUM=1: run the in-process tests as a machine whose "medium" kernel rounds
    matmul operands to bf16 would compute them (interp.runner.rounding_kernels; AMX CPUs and GPUs
    may), to check that no test depends on this machine's kernel. Subprocesses are not covered."""
    if os.environ.get("INTERP_TEST_BF16_MEDIUM") == "1":
        from interp.runner.rounding_kernels import bf16_operand_kernels

        config._interp_bf16_medium = bf16_operand_kernels()
        config._interp_bf16_medium.__enter__()


def pytest_collection_finish(session):
    """Freeze the heap built by importing the test modules (torch, transformers, pandas, ...):
    the garbage collector then skips those objects, so each full collection (automatic, or the
    gc.collect() statsmodels' Holm runs per call: ~0.4 s each in a test process otherwise) scans
    only what the tests made."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    emulation = getattr(config, "_interp_bf16_medium", None)
    if emulation is not None:
        emulation.__exit__(None, None, None)


def pytest_terminal_summary(terminalreporter):
    """Say it in one line when the cluster tests were skipped (they need root and slurm-wlm)."""
    reasons = set()
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(rep, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        if "SLURM" in reason:
            reasons.add(reason.removeprefix("Skipped: "))
    for reason in sorted(reasons):
        terminalreporter.write_line(f"SLURM cluster tests skipped: {reason}", yellow=True)
