"""The site's pages: one HTML shell per page (header, navigation, its script) and the assets.

Each page is the same shell: Plotly (vendored, `assets/vendor/`), `assets/mode.js` (how data is
read: `files` from `data/*.js` beside the page, or `api` from the server), `assets/view.js`
(loading, number formats, tables, navigation) and the page's own script.
"""

from __future__ import annotations

import html
from importlib import resources
from pathlib import Path

# (file, title, script): in reading order; each page links to the next
PAGES = (
    ("index.html", "Overview", "overview.js"),
    ("map.html", "Item map", "map.js"),
    ("item.html", "Item", "item.js"),
    ("compare.html", "Compare", "compare.js"),
    ("cloze.html", "Cloze", "cloze.js"),
    ("classify.html", "Classify", "classify.js"),
    ("sets.html", "Field sets", "sets.js"),
    ("setitem.html", "Field-set item", "setitem.js"),
)
SCRIPTS = ("view.js", *(p[2] for p in PAGES))
ASSET_FILES = (*SCRIPTS, "view.css", "vendor/plotly-cartesian.min.js", "vendor/plotly-LICENSE.txt", "vendor/README.md")


def assets_dir() -> Path:
    return Path(str(resources.files("interp.view") / "assets"))


def mode_js(mode: str) -> str:
    return f'window.VIEW_MODE = "{mode}";\n'


def page_html(file: str) -> str:
    """The HTML of one page: navigation to every page (the next one named), then its script."""
    i = next(k for k, p in enumerate(PAGES) if p[0] == file)
    _, title, script = PAGES[i]
    nxt = PAGES[(i + 1) % len(PAGES)]
    nav = " ".join(f'<a href="{f}"{" class=here" if f == file else ""}>{html.escape(t)}</a>' for f, t, _ in PAGES)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · interp view</title>
<link rel="stylesheet" href="assets/view.css">
<script src="assets/vendor/plotly-cartesian.min.js"></script>
<script src="assets/mode.js"></script>
<script src="assets/view.js"></script>
</head>
<body data-page="{file}">
<header><strong>interp view</strong> <nav>{nav}</nav></header>
<main id="app"><p class="loading">loading…</p></main>
<footer><a id="next" href="{nxt[0]}">Next: {html.escape(nxt[1])} →</a></footer>
<script src="assets/{script}"></script>
</body>
</html>
"""
