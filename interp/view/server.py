"""`interp view OUT --serve`: the same pages served on 127.0.0.1, each payload computed when a
page first asks for it (per study, per checkpoint, per item) and kept, for sweeps too large to
write out whole. Only the loopback interface is bound, and a request naming another host is
refused (a page elsewhere cannot reach the server through a rebound DNS name)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from interp.core.errors import InterpError
from interp.view.encode import dumps
from interp.view.pages import ASSET_FILES, PAGES, assets_dir, mode_js, page_html
from interp.view.site import Site

HOST = "127.0.0.1"
KEPT_PAYLOADS = 512  # payloads kept in memory (least recently used leave first)
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json"}


class _Payloads:
    def __init__(self, site: Site):
        self.site = site
        self.kept: OrderedDict[str, bytes] = OrderedDict()
        self.lock = threading.Lock()

    def warm(self, key: str) -> None:
        try:
            self.site.warm(key)
        except (KeyError, InterpError):  # the page that needs it will say what is wrong
            pass

    def get(self, key: str) -> bytes:
        with self.lock:
            if key in self.kept:
                self.kept.move_to_end(key)
                return self.kept[key]
        body = dumps(self.site.payload(key)).encode("utf-8")
        with self.lock:
            self.kept[key] = body
            while len(self.kept) > KEPT_PAYLOADS:
                self.kept.popitem(last=False)
        return body


def make_server(outs: Sequence[str | Path], port: int = 8765) -> tuple[ThreadingHTTPServer, str]:
    """A server for the sweeps `outs` on 127.0.0.1:`port` (0: any free port) and its URL; not started."""
    payloads = _Payloads(Site(outs, mode="api"))
    pages = {f: page_html(f) for f, _, _ in PAGES}
    assets = assets_dir()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # the terminal shows the URL, not every request
            pass

        def _send(self, code: int, body: bytes, kind: str, keep: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind + "; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            # the package's scripts (Plotly: 1.5 MB) are kept by the browser for the session; data never
            self.send_header("Cache-Control", "max-age=3600" if keep else "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            if host not in (HOST, "localhost"):
                return self._send(403, b"interp view answers 127.0.0.1 only", "text/plain")
            path = unquote(urlsplit(self.path).path).lstrip("/") or "index.html"
            if path in pages:
                return self._send(200, pages[path].encode("utf-8"), "text/html")
            if path == "assets/mode.js":
                return self._send(200, mode_js("api").encode(), "text/javascript")
            if path.startswith("assets/") and path[7:] in ASSET_FILES:
                kind = _TYPES.get(Path(path).suffix, "text/plain")
                return self._send(200, (assets / path[7:]).read_bytes(), kind, keep=True)
            if path.startswith("api/") and path.endswith(".json"):
                try:
                    self._send(200, payloads.get(path[4:-5]), "application/json")
                    threading.Thread(target=payloads.warm, args=(path[4:-5],), daemon=True).start()
                    return None
                except KeyError:
                    return self._send(404, f"no data for {path[4:-5]}".encode(), "text/plain")
                except InterpError as exc:
                    return self._send(500, str(exc).encode(), "text/plain")
            return self._send(404, b"not found", "text/plain")

    server = ThreadingHTTPServer((HOST, port), Handler)
    server.daemon_threads = True
    return server, f"http://{HOST}:{server.server_address[1]}/"


def serve(outs: Sequence[str | Path], port: int = 8765, *, echo: Callable[[str], None] = print) -> None:
    """Serve until interrupted (Ctrl-C), after printing the URL."""
    server, url = make_server(outs, port)
    echo(f"interp view: serving {len(outs)} sweep(s) at {url} (Ctrl-C stops)")
    try:
        server.serve_forever()
    finally:
        server.server_close()
