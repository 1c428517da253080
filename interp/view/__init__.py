"""`interp view`: a static site (or a 127.0.0.1 server) over a sweep's results and cache.

A view of the files a sweep wrote, never a second computation: every number a page shows is read
from `OUT/results/*.csv` or the cache units; no model, tokenizer or torch is loaded.
"""

from interp.view.server import make_server, serve
from interp.view.site import Site
from interp.view.static import write_site

__all__ = ["Site", "make_server", "serve", "write_site"]
