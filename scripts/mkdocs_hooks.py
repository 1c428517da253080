"""MkDocs hook (mkdocs.yml `hooks:`): include a top-level Markdown file into a guide page, unchanged.

BENCHMARKS.md, SCALE.md and VALIDATION.md are written at the repository root by their own
generators and owners; a guide page holds the line `<!-- include-root: NAME.md -->` and gets that
file's text at build time, so their changes reach the site without a copy. Links in the included
text are written relative to the repository root; they are rewritten relative to the page: a file
under docs/ becomes a link into the site, a top-level document becomes its guide page, and any
other path (a source file) becomes code text, since the site does not carry it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r"^<!-- include-root: (?P<name>[\w.-]+\.md) -->$", re.M)
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
# top-level documents and the guide page that shows each
GUIDE_PAGE = {
    "README.md": "index.md",
    "BENCHMARKS.md": "benchmarks.md",
    "SCALE.md": "scale.md",
    "VALIDATION.md": "known-answers.md",
}


def rewrite_links(text: str, page_path: str) -> str:
    """Links of a root-level file, made relative to the guide page at docs/`page_path`."""
    page_dir = posixpath.dirname(page_path)

    def one(m: re.Match) -> str:
        target = m["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m[0]  # a URL or an anchor on the same page
        path, _, anchor = target.partition("#")
        if path.startswith("docs/"):
            new = posixpath.relpath(path[len("docs/") :], page_dir or ".")
        elif path in GUIDE_PAGE:
            new = posixpath.relpath(GUIDE_PAGE[path], page_dir or ".")
        else:
            return f"{m['text']} (`{path}`)"
        return f"{m['bang']}[{m['text']}]({new}{'#' + anchor if anchor else ''})"

    return LINK.sub(one, text)


def shift_headings(text: str, levels: int) -> str:
    """Every ATX heading `levels` deeper (outside code fences), so an included document's `#`
    title sits under the heading that introduces it."""
    if levels <= 0:
        return text
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def include_root(markdown: str, page_path: str) -> str:
    def one(m: re.Match) -> str:
        source = ROOT / m["name"]
        if not source.is_file():
            raise FileNotFoundError(f"docs/{page_path}: includes {m['name']}, which is not at the repository root")
        before = re.findall(r"^(#{1,6}) ", markdown[: m.start()], re.M)
        text = shift_headings(source.read_text(encoding="utf-8"), len(before[-1]) if before else 0)
        return rewrite_links(text, page_path)

    return INCLUDE.sub(one, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:  # the MkDocs hook signature
    return include_root(markdown, page.file.src_uri)
