import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dask
import pytest
import torch

torch.set_num_threads(1)
# Dask's local worker processes as children of a fork server that imported the toolkit once
# (tests/_cli_process.py), as Dask's own test suite does: a spawned worker pays ~5 s of CPU
# importing torch and transformers before its first task. What a worker computes is the same.
dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})


@pytest.fixture(scope="session", autouse=True)
def _fork_server():
    from _cli_process import start_fork_server

    start_fork_server()


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


# Two tiers: tests/unit (no sweep, no command in its own process, no training: the edit loop,
# `bash scripts/test.sh --quick`) and tests/integration (end to end, bad inputs, clusters, the
# organism). Helpers (_*.py) and this file stay here, where both tiers find them.

# The files that keep one worker busiest (measured 2026-12-03 with --durations=0, whole files),
# longest first. scripts/test.sh runs the suite with `--dist loadfile --no-loadscope-reorder`:
# a file stays on one worker (its module fixtures are built once), and the files are handed out
# in this order, so no long file starts last while the other worker idles. Only the order of
# the tests changes, never which run; a file not listed keeps pytest's order after these.
SLOWEST_FIRST = (
    "integration/test_organism.py",
    "integration/test_organism_simulate.py",
    "integration/test_golden_tables.py",
    "integration/test_slurm_cluster.py",
    "integration/test_lm_eval_model.py",
    "integration/test_residual_layers.py",
    "integration/test_tables_add_up.py",
    "integration/test_determinism.py",
    "integration/test_dask_faults.py",
    "integration/test_sweep.py",
    "integration/bad_inputs/test_silent_wrong.py",
    "integration/test_lm_eval_hook.py",
    "integration/bad_inputs/test_content_hash.py",
    "integration/test_dask_scheduler.py",
    "integration/test_external_study.py",  # added 2026-12-04 (82 s alone, load ~5)
    "integration/test_extras.py",  # added 2026-12-04 (75 s alone, load ~5)
    "integration/test_view.py",  # added 2026-12-04 (three sweeps and a browser: ~170 s alone, load ~5)
    "integration/test_docs.py",
    "integration/test_torch_free.py",
    "unit/test_layers.py",
    "integration/test_engine_levels.py",
    "integration/bad_inputs/test_locks_signals.py",
    "integration/bad_inputs/test_end_to_end.py",
    "integration/test_precision_audit.py",
    "integration/test_probes_cache.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0].removeprefix("tests/"), len(rank)))


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
    """Say it in one line when the cluster tests (root and slurm-wlm) or the browser tests (Debian's
    chromium, playwright) were skipped."""
    reasons = set()
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(rep, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        for key, what in (("SLURM", "SLURM cluster"), ("headless Chromium", "interp view browser")):
            if key in reason:
                reasons.add((what, reason.removeprefix("Skipped: ")))
    for what, reason in sorted(reasons):
        terminalreporter.write_line(f"{what} tests skipped: {reason}", yellow=True)
