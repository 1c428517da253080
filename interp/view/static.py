"""`interp view OUT`: the static site, written beside the sweep (OUT/view/ by default).

It opens by double-click (file://): every payload the pages read is a `data/KEY.js` file that
hands its JSON to the page (a script tag reads a file:// neighbour; fetch does not), and Plotly is
copied beside the pages. Nothing is fetched from anywhere. The site is written under a temporary
name and put in place last, so an earlier site stays whole until the new one is complete.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from interp.core.errors import ConfigError
from interp.view.encode import dumps
from interp.view.pages import ASSET_FILES, PAGES, assets_dir, mode_js, page_html
from interp.view.site import Site

MARKER = ".interp-view"  # names a directory this command wrote (and may replace)


def _check_dest(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or (any(dest.iterdir()) and not (dest / MARKER).is_file())):
        raise ConfigError(f"{dest}: exists and is not a site `interp view` wrote; choose another --out")


def write_pages(root: Path, mode: str) -> None:
    """The pages and assets (Plotly and its licence included) under `root`."""
    (root / "assets" / "vendor").mkdir(parents=True, exist_ok=True)
    for file, _, _ in PAGES:
        (root / file).write_text(page_html(file), encoding="utf-8")
    src = assets_dir()
    for name in ASSET_FILES:
        shutil.copyfile(src / name, root / "assets" / name)
    (root / "assets" / "mode.js").write_text(mode_js(mode), encoding="utf-8")


def write_site(outs: Sequence[str | Path], dest: str | Path | None = None, *, log=None) -> Path:
    """Write the static site of the sweeps `outs` to `dest` (default OUT/view); return its index.html."""
    site = Site(outs, mode="files")
    dest = Path(dest) if dest is not None else Path(outs[0]) / "view"
    _check_dest(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write_pages(tmp, "files")
        keys = ["site", *site.static_keys()]
        for n, key in enumerate(keys):
            try:
                payload = site.payload(key)
            except KeyError:  # a key that names nothing here (e.g. a map of a turn kind not swept)
                continue
            path = tmp / "data" / f"{key}.js"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"VIEW.put({json.dumps(key)},{dumps(payload)});\n", encoding="utf-8")
            if log and (n + 1) % 500 == 0:
                log(f"interp view: {n + 1} of {len(keys)} payloads")
        (tmp / MARKER).write_text("written by interp view; the command replaces this directory when rerun\n")
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest / "index.html"
