"""`interp selftest`: passes on this machine; a backend off by more than the derived tolerance,
an unknown dtype or an unavailable device makes it fail with a clear line and exit code."""

from __future__ import annotations

from typer.testing import CliRunner

from interp.cli import app


def test_selftest_passes_here(tmp_path):
    res = CliRunner().invoke(app, ["selftest"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "CPU ISA" in out and "torch" in out
    for name in ("backend hf cpu float32 vs plain HF", "residual capture", "cache read with checksums",
                 "checksum refuses a damaged unit", "sweep of two checkpoints", "sweep resume"):  # fmt: skip
        assert f"ok   {name}" in out, out
    assert "FAIL" not in out and "all checks passed" in out


def test_selftest_fails_on_a_planted_backend_error(monkeypatch):
    """Negative control: the transformer_lens backend's scores moved by 1e-3 nats (ten times the
    float32 tolerance printed for this tiny model, ~1e-4) and the captured residuals by 1e-3
    (the residual tolerance is ~2e-6) must each fail their line and exit 1."""
    import interp.runner.scoring as scoring

    real = scoring.score_continuations
    real_options = scoring.score_options

    def resid_off(lm, prompts, options, **kw):
        s = real_options(lm, prompts, options, **kw)
        s.resid = {k: v + 1e-3 for k, v in s.resid.items()}
        return s

    monkeypatch.setattr(scoring, "score_options", resid_off)

    def off(lm, items, **kw):
        s = real(lm, items, **kw)
        if type(lm.backend).__name__ == "TLBackend":
            s.sum_logp = s.sum_logp + 1e-3
        return s

    monkeypatch.setattr(scoring, "score_continuations", off)
    res = CliRunner().invoke(app, ["selftest"])
    assert res.exit_code == 1, res.output
    assert "FAIL backend transformer_lens cpu float32 vs plain HF" in res.output
    assert "ok   backend hf cpu float32 vs plain HF" in res.output
    assert "FAIL residual capture" in res.output
    assert "2 check(s) FAILED" in res.output


def test_selftest_bad_input_exit_2():
    from _cli_process import run_cli_process

    for args in (["--dtype", "float8"], ["--device", "tpu"]):
        res = run_cli_process(["selftest", *args], timeout=300)
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith("interp: error:") and len(res.stderr.strip().splitlines()) == 1
