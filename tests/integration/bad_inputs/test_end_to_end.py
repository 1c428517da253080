"""Representative bad inputs run as real processes (`python -m interp.cli ...`): exit code 2 and a
single `interp: error:` line on stderr, end to end (imports, warnings and logging included)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from ._util import (
    PRESSURE,
    REPO,
    SWEEP,
    Result,
    assert_intact,
    assert_one_line_error,
    bytes_with_bad_byte,
    log_bytes,
    snapshot,
    subprocess_env,
)


@pytest.fixture(scope="module")
def e2e(tmp_path_factory, bi_model, earlier_out):
    """Build the inputs, start every process at once (they are mostly import time), collect results."""
    tmp = tmp_path_factory.mktemp("e2e")
    cases = {}

    bank = tmp / "moral_bad.jsonl"
    bank.write_bytes(bytes_with_bad_byte(PRESSURE, 1, "text"))
    cases["bank-not-utf8"] = (
        ["sweep", bi_model, "--study", "pressure", "--bank", bank, "--out", earlier_out, "--max-items", "2", "--quiet"],
        earlier_out,
        [bank, "row 2", "UTF-8"],
    )

    ck = tmp / "remote-code"
    shutil.copytree(bi_model, ck)
    cfg = json.loads((ck / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (ck / "config.json").write_text(json.dumps(cfg))
    cases["checkpoint-remote-code"] = (
        ["sweep", ck, *SWEEP, "--out", earlier_out],
        earlier_out,
        [ck / "config.json", "auto_map"],
    )

    copy = tmp / "OUT-copy"
    shutil.copytree(earlier_out, copy)
    (unit,) = sorted((copy / "cache").rglob("*.h5"))
    data = unit.read_bytes()
    unit.write_bytes(data[: len(data) // 3])
    cases["cache-truncated-probe"] = (
        ["probe", copy, "--study", "pressure", "--target", "planted", "--folds", "2", "--shuffles", "2"],
        copy,
        [unit, "truncated"],
    )

    noconf = tmp / "no-config"
    shutil.copytree(bi_model, noconf)
    (noconf / "config.json").unlink()
    cases["checkpoint-no-config"] = (
        ["sweep", noconf, *SWEEP, "--out", earlier_out],
        earlier_out,
        [noconf, "config.json"],
    )

    before = {k: (snapshot(out), log_bytes(out)) for k, (_, out, _) in cases.items()}
    procs = {
        k: subprocess.Popen(
            [sys.executable, "-m", "interp.cli", *map(str, argv)],
            cwd=REPO,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k, (argv, _, _) in cases.items()
    }
    results = {}
    for k, p in procs.items():
        out, err = p.communicate(timeout=300)
        results[k] = Result(p.returncode, out, err)
    return {k: (results[k], cases[k][1], cases[k][2], before[k]) for k in cases}


@pytest.mark.parametrize(
    "case",
    [
        "bank-not-utf8",
        "checkpoint-remote-code",
        "cache-truncated-probe",
        "checkpoint-no-config",
    ],
)
def test_subprocess_exit_2_and_one_stderr_line(case, e2e):
    res, out, must, (snap, log) = e2e[case]
    assert_one_line_error(res, *must, one_line=True)
    assert_intact(out, snap, log)
