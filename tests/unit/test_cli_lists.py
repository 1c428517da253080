"""List options read as the README writes them, or say in one line that the flag repeats."""

import sys


def test_parallel_with_two_values_after_one_flag_is_a_clear_error(tiny_models, tmp_path, monkeypatch, capsys):
    from interp.cli import main

    a, b = tmp_path / "x.dev", tmp_path / "y.dev"
    a.write_text("one\n")
    b.write_text("two\n")
    monkeypatch.setattr(
        sys,
        "argv",
        ["interp", "fertility", str(tiny_models["gpt2"]), "--out", str(tmp_path / "o"), "--parallel", str(a), str(b)],
    )
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "y.dev is a file" in err[0] and "--parallel FILE1 --parallel" in err[0]
    assert not (tmp_path / "o").exists()  # nothing written
