"""`interp ARGS` (or `python SCRIPT ARGS`) in its own process without paying for a fresh
interpreter's imports.

A command run as `python -m interp.cli` spends ~5 s of CPU importing torch and transformers
before it reads its first argument; the tests that need a separate process (one that can hang,
be killed, or hold a lock against this one) run dozens of them. Here each command is a child of
multiprocessing's fork server, a process that imported the toolkit once and nothing else: a
clean process per command (no state of this test process, no model or memo loaded), with its
own environment, working directory, argv and stdout / stderr, ending with main()'s exit code.
What only a real interpreter start can show (hash seeds, import-time warnings, the `-m` entry
point) stays with subprocess tests.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Mapping, Sequence

# what `interp sweep` imports before its first unit, and what a Dask worker process imports
# before its first task; anything else a command needs is imported in the child, as a fresh
# process would
_PRELOAD = [
    "interp.cli",
    "sweeps.api",
    "interp.runner.backends",
    "interp.studies.pressure",
    "cache.store",
    "distributed.nanny",
]


def start_fork_server() -> None:
    """Start this process's fork server now, with these preloads and the environment of now.
    It is one per process and shared: the Dask workers of tests/conftest.py are its children too
    (their environment is the sweep's, passed by the nanny), so it must not start later with
    Dask's shorter preload list or inside a test that changed the environment."""
    multiprocessing.set_forkserver_preload(_PRELOAD)
    from multiprocessing import forkserver

    forkserver.ensure_running()


def _context():
    start_fork_server()
    return multiprocessing.get_context("forkserver")


def _child(argv: list[str], env: dict[str, str], cwd: str, out_path: str, err_path: str, script: str | None) -> None:
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.argv = [script or "interp", *argv]
    code = 0
    try:
        if script is None:
            from interp.cli import main

            main()
        else:  # as `python SCRIPT`: its directory first on the path, run as __main__
            import runpy

            sys.path.insert(0, os.path.dirname(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:  # as the interpreter maps it: None -> 0, int -> itself, else printed -> 1
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - a traceback on stderr and exit 1, as `python -m` gives
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class CLIProcess:
    """A running `interp ARGS` (`python SCRIPT ARGS` with `script`) with the parts of
    subprocess.Popen the tests use (text output)."""

    def __init__(
        self,
        args: Sequence,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        script: str | Path | None = None,
    ):
        self._dir = tempfile.TemporaryDirectory(prefix="interp-cli-")
        self._out, self._err = (os.path.join(self._dir.name, n) for n in ("stdout", "stderr"))
        self._proc = _context().Process(
            target=_child,
            args=(
                [str(a) for a in args],
                dict(os.environ if env is None else env),
                str(cwd or os.getcwd()),
                self._out,
                self._err,
                None if script is None else str(Path(script).resolve()),
            ),
        )
        self._proc.start()
        self.pid = self._proc.pid
        self._output: tuple[str, str] | None = None

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode  # -N when ended by signal N, as Popen

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self._proc.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise subprocess.TimeoutExpired(["interp"], timeout)
        return self._proc.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """(stdout, stderr) once the process has ended; TimeoutExpired if it does not in time."""
        self.wait(timeout)
        if self._output is None:
            self._output = tuple(Path(p).read_text(errors="replace") for p in (self._out, self._err))
            self._dir.cleanup()
        return self._output


def run_cli_process(
    args: Sequence,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float,
    script: str | Path | None = None,
) -> subprocess.CompletedProcess:
    """Run `interp ARGS` (`python SCRIPT ARGS`) to the end; on timeout the process is killed and
    TimeoutExpired raised."""
    proc = CLIProcess(args, env=env, cwd=cwd, script=script)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        raise
    return subprocess.CompletedProcess([str(script or "interp"), *map(str, args)], proc.returncode, out, err)
