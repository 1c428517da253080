"""Cache: round trip, provenance refusal, atomicity under SIGKILL, damaged files."""

import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from cache import Store, read_unit
from _units import ident
from interp.core.errors import CacheError, ProvenanceError


def test_round_trip(tmp_path):
    store = Store(tmp_path)
    df = pd.DataFrame({"item_id": ["a", "b", "ক"], "p": [0.1, 0.2, 0.3], "n": [1, 2, 3], "ok": [True, False, True]})
    resid = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float16)
    u = ident()
    assert not store.is_complete(u)
    path = store.write(u, tables={"trials": df}, arrays={"resid": resid})
    assert store.is_complete(u)
    unit = store.read(u)
    pd.testing.assert_frame_equal(unit.tables["trials"], df, check_dtype=False)
    assert unit.arrays["resid"].dtype == np.float16
    np.testing.assert_array_equal(unit.arrays["resid"], resid)
    assert unit.attrs["layer"] == 3 and unit.attrs["checkpoint"] == "ck"
    assert path.name.startswith("pressure-")


def test_identity_hash_ignores_display_name_but_not_content():
    assert ident().hash == ident(checkpoint="renamed").hash
    assert ident().hash != ident(layer=4).hash
    assert ident().hash != ident(checkpoint_fingerprint="g" * 64).hash


def test_provenance_mismatch_refused(tmp_path):
    store = Store(tmp_path)
    path = store.write(ident(), tables={"t": pd.DataFrame({"x": [1]})})
    with pytest.raises(ProvenanceError, match="bank_hash"):
        read_unit(path, expect={"bank_hash": "c" * 64})
    assert not store.is_complete(ident(bank_hash="c" * 64))


def test_truncated_file_is_a_clear_error(tmp_path):
    store = Store(tmp_path)
    path = store.write(ident(), tables={"t": pd.DataFrame({"x": np.arange(1000)})}, arrays={"a": np.zeros((200, 200))})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(CacheError, match=str(path.name)):
        read_unit(path)
    assert not store.is_complete(ident())


_WRITER = r"""
import sys, numpy as np, pandas as pd
from cache import Store, UnitIdentity
store = Store(sys.argv[1])
for i in range(10**6):
    u = UnitIdentity(checkpoint="ck", checkpoint_fingerprint=str(i), study="s", study_version="1", bank="b",
                     bank_hash="b", template_hash="t", settings_hash="s", layer=0)
    store.write(u, tables={"t": pd.DataFrame({"x": np.arange(5000)})}, arrays={"a": np.ones((300, 300))})
"""


def test_sigkill_mid_write_leaves_no_incomplete_unit(tmp_path):
    for delay in (0.4, 0.9, 1.5):
        root = tmp_path / f"r{delay}"
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)])
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = Store(root)
        for p in store.units():
            unit = read_unit(p)  # every file under a final name opens as complete
            assert unit.attrs["complete"]
        store.clean_stale()
        assert not list(root.rglob(".*.tmp-*"))


def test_clean_stale_keeps_live_writers_temporaries(tmp_path):
    """A second sweep into the same OUT must not delete the first one's temporaries: a live
    writer's (this host, pid running; another host, recently touched) stay, a dead one's go."""
    import os

    from interp.core.atomic import STALE_AGE_S, atomic_path, host_tag, pid_alive, tmp_path_for

    root = tmp_path / "cache"
    (root / "pressure").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)
    assert not pid_alive(dead)
    here = host_tag()
    parent = os.getppid()  # a live process on this host: another sweep still writing
    files = {
        "live_here": root / "pressure" / f".a.h5.tmp-{parent}-{here}-0a1b2c3d",
        "dead_here": root / "pressure" / f".b.h5.tmp-{dead}-{here}-0a1b2c3d",
        "fresh_elsewhere": root / "pressure" / f".c.h5.tmp-{dead}-othernode.cluster-0a1b2c3d",
        "old_elsewhere": root / "pressure" / f".d.h5.tmp-{dead}-othernode.cluster-0a1b2c3d",
        "old_format_fresh": root / "pressure" / f".e.h5.tmp-{dead}-0a1b2c3d",
        "old_format_old": root / "pressure" / f".f.h5.tmp-{dead}-0a1b2c3d",
    }
    for p in files.values():
        p.write_bytes(b"partial")
    past = time.time() - STALE_AGE_S - 60
    for k in ("old_elsewhere", "old_format_old"):
        os.utime(files[k], (past, past))
    assert Store(root).clean_stale() == 3
    left = {k for k, p in files.items() if p.exists()}
    assert left == {"live_here", "fresh_elsewhere", "old_format_fresh"}
    # this process's own write in progress survives a clean and still lands under its final name
    target = root / "pressure" / "g.h5"
    assert tmp_path_for(target).name.startswith(f".g.h5.tmp-{os.getpid()}-{here}-")
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"whole")
        Store(root).clean_stale()
        assert tmp.exists()
    assert target.read_bytes() == b"whole"


def test_unwritable_destination(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError, match="cannot create"):
        Store(blocker / "cache").write(ident(), tables={"t": pd.DataFrame({"x": [1]})})


def test_read_unit_takes_a_string_path(tmp_path):
    """The README quick start passes glob's str; read_unit must not need a Path."""
    path = Store(tmp_path).write(ident(), tables={"t": pd.DataFrame({"x": [1, 2]})}, arrays={})
    assert read_unit(str(path)).tables["t"]["x"].tolist() == [1, 2]
