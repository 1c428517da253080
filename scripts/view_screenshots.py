"""Screenshots of every `interp view` page for the guide (docs/img/view_*.png), from a real sweep.

    python scripts/view_screenshots.py demo_out [OUT2 ...] [--dest docs/img] [--pages sets,setitem]

Writes the static site of the given sweeps to a temporary directory, opens each page in Debian's
headless Chromium (interp.view.browser) and saves one PNG per page: the overview, the item map,
the most-yielding item of the first bank, a comparison of the first and last checkpoint, the cloze
grid with its first cell opened, a confusion matrix with a cell opened, and the field sets' item
map and its first item (a sweep of the ab_sycophancy or sycophancy_eval study). `--pages` shoots
only those named. Fails on a console error or a request that leaves file://.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from interp.view import write_site  # noqa: E402
from interp.view.browser import chromium, missing, open_page, wait_ready  # noqa: E402

PAGES = ("overview", "map", "item", "compare", "cloze", "classify", "sets", "setitem")
CLICK = "(name) => window[name].gd.emit('plotly_click', {points: [{pointIndex: [0, 0]}]})"


def small(path: Path) -> None:
    """The PNG in 256 colours (a page of flat colours and text looks the same; the repository keeps
    a third of the bytes)."""
    from PIL import Image

    with Image.open(path) as img:
        flat = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    flat.save(path, optimize=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outs", nargs="+", type=Path)
    ap.add_argument("--dest", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated: " + ", ".join(PAGES))
    args = ap.parse_args(argv)
    if missing():
        raise SystemExit(f"view_screenshots: {missing()}")
    args.dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = write_site(args.outs, Path(tmp) / "site").parent.as_uri() + "/"
        with chromium(width=1280, height=860) as (page, watch):
            shots = []

            wanted = set(args.pages.split(","))

            def shot(name: str, url: str, then=None, full: bool = False) -> None:
                if name not in wanted:
                    return
                assert open_page(page, base + url) == "1", (url, watch.errors)
                if then:
                    page.evaluate(CLICK, then)
                    wait_ready(page)
                    page.wait_for_timeout(300)
                path = args.dest / f"view_{name}.png"
                page.screenshot(path=str(path), full_page=full)
                small(path)
                shots.append(path)

            shot("overview", "index.html")
            if wanted & {"map", "item"}:
                assert open_page(page, base + "map.html#s=0&b=0&k=opinion") == "1", watch.errors
                first = page.evaluate("window.VIEW_MAP.rows[0]")
                shot("map", "map.html#s=0&b=0&k=opinion")
                shot("item", f"item.html#s=0&b=0&i={first}")
            shot("compare", "compare.html")
            shot("cloze", "cloze.html", then="VIEW_CLOZE", full=True)
            shot("classify", "classify.html", then="VIEW_CONFUSION")
            if wanted & {"sets", "setitem"}:
                assert open_page(page, base + "sets.html") == "1", watch.errors
                first = page.evaluate("window.VIEW_SETMAP.rows[0]")
                shot("sets", "sets.html")
                shot("setitem", page.url.split("/")[-1].replace("sets.html", "setitem.html") + f"&i={first}", full=True)
            if watch.errors or watch.refused:
                raise SystemExit(f"view_screenshots: console errors {watch.errors[:3]}, outside {watch.refused[:3]}")
    for p in shots:
        print(p)


if __name__ == "__main__":
    main()
