"""What a test of `interp view` reads off a page, and how it compares that with a CSV's value."""

from __future__ import annotations

import math
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from _cli_process import CLIProcess


def csv_tol(x: float) -> float:
    """What writing `x` with %.10g (analyses.io.write_table) and reading it back can move it by."""
    if x == 0 or not math.isfinite(x):
        return 0.0
    return 0.5 * 10 ** (math.floor(math.log10(abs(x))) - 9) + abs(x) * np.finfo(float).eps


def page_table(page, name: str) -> tuple[list[str], list[dict]]:
    """(header labels, rows) of the page's table `name`: a cell's data-v (the number the page holds
    and shows rounded) where it has one, else its text."""
    return page.evaluate(
        """(name) => {
        const t = document.querySelector(`table[data-name="${name}"]`);
        const head = [...t.querySelectorAll("thead th")].map((th) => th.textContent);
        const keys = [...t.querySelectorAll("thead th")].map((th) => th.dataset.col);
        const rows = [...t.querySelectorAll("tbody tr")].map((tr) => {
            const r = {};
            [...tr.children].forEach((td, i) => (r[keys[i]] = td.hasAttribute("data-v") ? td.dataset.v : td.textContent));
            return r;
        });
        return [head, rows];
    }""",
        name,
    )


def same(shown, value) -> bool:
    """A number as the page holds it (data-v text, a chart's number, None / "" for none) equals the
    CSV's value as pandas reads it: the page carries the float64 pandas read, unrounded."""
    if shown in ("", None):
        return pd.isna(value)
    return not pd.isna(value) and float(shown) == float(value)


@contextmanager
def serve_site(outs: list[Path], env: dict) -> Iterator[str]:
    """`interp view OUT ... --serve` on a free port; yields its URL once it answers, stops it after."""
    with socket.socket() as s:  # a free port, handed to the server (which binds 127.0.0.1 only)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = CLIProcess(["view", *map(str, outs), "--serve", "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "api/site.json", timeout=5).read()
            break
        except OSError:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.2)
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def click_cell(page, state: str, row: int, col: int, opens: str) -> str:
    """Click the cell (row, col) of the heatmap whose page state is `window[state]` (its `gd`,
    `rows`, `items`) with the mouse, wait for the page `opens`; returns the item id of the row."""
    x, y = page.evaluate(
        """([state, row, col]) => {
        const gd = window[state].gd, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const box = gd.querySelector(".nsewdrag").getBoundingClientRect();
        return [box.left + xa.l2p(col), box.top + ya.l2p(row)];
    }""",
        [state, row, col],
    )
    item_id = page.evaluate(f"window.{state}.items[window.{state}.rows[{row}]]")
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_url(f"**/{opens}#*")
    return item_id
