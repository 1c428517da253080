"""Debian's headless Chromium driven by Playwright, for the site's tests, screenshots and benchmark.

Playwright (the `test` extra) drives the system browser (`/usr/bin/chromium`, Debian's
`chromium` package; `scripts/chromium-local.sh install` puts it there); Playwright's own browser
download is never used. Every request the page makes is routed: one that leaves file:// and
127.0.0.1 is aborted and recorded, and so is every console error, for the caller to assert on.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOCAL = ("file://", "http://127.0.0.1:", "data:", "blob:", "about:")


def missing() -> str | None:
    """Why the browser cannot run here (None when it can)."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} missing (Debian's chromium: `bash scripts/chromium-local.sh install` as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright missing (pip install -e '.[test]')"
    return None


@dataclass
class Watch:
    """What the page did that a test must see: console errors, requests, requests refused."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[tuple[object, Watch]]:
    """(page, watch) in a fresh profile; requests outside file:// and 127.0.0.1 are aborted."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="interp-view-chromium-")
    watch = Watch()

    def route(r) -> None:
        url = r.request.url
        if url.startswith(LOCAL):
            r.continue_()
        else:
            watch.refused.append(url)
            r.abort()

    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=list(ARGS),
                viewport={"width": width, "height": height},
            )
            try:
                ctx.route("**/*", route)
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                page.on("console", lambda m: m.type == "error" and watch.errors.append(m.text))
                page.on("pageerror", lambda e: watch.errors.append(str(e)))
                page.on("request", lambda r: watch.requests.append(r.url))
                yield page, watch
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_page(page, url: str, timeout_ms: float = 30_000) -> str:
    """Go to `url` and wait until the page says it has drawn (body data-ready 1 or error). From a
    blank page: a link that changes only the hash reloads the page (view.js), which a wait could
    otherwise mistake for the page before it."""
    page.goto("about:blank")
    page.goto(url)
    return wait_ready(page, timeout_ms)


def wait_ready(page, timeout_ms: float = 30_000) -> str:
    page.wait_for_function("document.body && ['1', 'error'].includes(document.body.dataset.ready)", timeout=timeout_ms)
    return page.evaluate("document.body.dataset.ready")
