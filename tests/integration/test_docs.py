"""The user guide: `mkdocs build --strict` passes (and fails on a broken link), the root-file
include hook rewrites links and headings, and every code block marked `<!-- quickstart -->` in
the README and the guide runs as written on a tiny random model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from mkdocs_hooks import include_root, rewrite_links, shift_headings  # noqa: E402

MARKED = re.compile(r"<!-- quickstart -->\n```(?P<lang>bash|python)\n(?P<code>.*?)```", re.S)


def _mkdocs() -> str:
    tool = Path(sys.executable).parent / "mkdocs"
    if not tool.exists():
        pytest.fail("mkdocs is not installed (pip install -e '.[test]' -c constraints.txt)")
    return str(tool)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [_mkdocs(), "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_guide_builds_strict(tmp_path: Path) -> None:
    proc = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    site = tmp_path / "site"
    # the three root documents arrive through the hook, unchanged
    for page, source in (("benchmarks", "BENCHMARKS.md"), ("scale", "SCALE.md"), ("known-answers", "VALIDATION.md")):
        title = (ROOT / source).read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        words = title.split()[:3]
        html = (site / f"{page}.html").read_text(encoding="utf-8")
        assert all(w.strip("`") in html for w in words), (page, title)
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "run_sweep" in api and "score_options" in api  # the reference is rendered from the code


def test_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Negative control: the same configuration on a page with a dangling link must fail."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    cfg = tmp_path / "mkdocs.yml"
    cfg.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nnav:\n  - Home: index.md\nnot_in_nav: ''\n"
        f"hooks:\n  - {ROOT / 'scripts' / 'mkdocs_hooks.py'}\nplugins:\n  - search\n"
    )
    proc = _build(cfg, tmp_path / "site")
    assert proc.returncode != 0
    assert "missing.md" in proc.stderr


def test_include_rewrites_links_for_the_page() -> None:
    text = "![fig](docs/organism/a.png) [v](VALIDATION.md#checks) [src](bench/report.py) [w](https://x.org) [h](#top)"
    at_root = rewrite_links(text, "known-answers.md")
    assert "![fig](organism/a.png)" in at_root and "[v](known-answers.md#checks)" in at_root
    assert "src (`bench/report.py`)" in at_root and "[w](https://x.org)" in at_root and "[h](#top)" in at_root
    nested = rewrite_links(text, "studies/p.md")
    assert "![fig](../organism/a.png)" in nested and "[v](../known-answers.md#checks)" in nested


def test_include_shifts_headings_under_the_page_heading() -> None:
    doc = "# Title\n\n```bash\n# a comment, not a heading\n```\n\n## Part\n"
    assert shift_headings(doc, 2) == "### Title\n\n```bash\n# a comment, not a heading\n```\n\n#### Part\n"
    page = "# Page\n\n## Record\n\n<!-- include-root: SCALE.md -->\n"
    out = include_root(page, "scale.md")
    first = (ROOT / "SCALE.md").read_text(encoding="utf-8").splitlines()[0]
    assert "\n### " + first.lstrip("# ") in out and "include-root" not in out
    with pytest.raises(FileNotFoundError, match="NOPE.md"):
        include_root("<!-- include-root: NOPE.md -->", "x.md")


def _marked(path: Path) -> list[tuple[str, str]]:
    return [(m["lang"], m["code"]) for m in MARKED.finditer(path.read_text(encoding="utf-8"))]


def test_quickstart_blocks_match_between_readme_and_guide() -> None:
    readme, guide = _marked(ROOT / "README.md"), _marked(ROOT / "docs" / "quickstart.md")
    assert [lang for lang, _ in readme] == ["bash", "python"]
    assert readme == guide  # one quick start, shown twice: the test below runs it once


def test_quickstart_runs_as_written(tiny_models, tmp_path: Path) -> None:
    """The marked blocks of every page, in order, in a fresh directory whose models/ holds a tiny
    random model under the default model's name (what scripts/quickstart.sh does with real ones)."""
    blocks = [b for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] for b in _marked(p)]
    seen, unique = set(), []
    for b in blocks:
        if b not in seen:
            seen.add(b)
            unique.append(b)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "smollm2-135m-instruct").symlink_to(tiny_models["gpt2"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "interp"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m interp.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
    )
    for lang, code in unique:
        cmd = ["bash", "-c", "set -euo pipefail\n" + code] if lang == "bash" else [sys.executable, "-c", code]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, f"{lang} block failed:\n{code}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "qs" / "results" / "pressure_summary.csv").is_file()
    assert (tmp_path / "qs" / "results" / "probes.csv").is_file()


def _broken_links(text: str) -> list[str]:
    """Relative links of a root-level Markdown text whose file, or heading, does not exist."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        if not (ROOT / path).is_file():
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(encoding="utf-8"), re.M)
            # Python-Markdown's toc slugify: drop punctuation, then one "-" for each run of spaces and dashes
            slugs = {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h).strip().lower()) for h in headings}
            if anchor not in slugs:
                broken.append(target)
    return broken


def test_readme_links_resolve() -> None:
    """The README is not part of the site, so its links into the guide are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(re.findall(r"\]\(docs/", text)) >= 10
    assert _broken_links(text) == []
    # negative control: a missing page and a missing heading are both caught
    planted = (
        "[a](docs/nope.md) [b](docs/probes.md#no-such-heading) [c](docs/probes.md) [d](https://x.org) "
        "[e](docs/commands.md#precision-dtype-and-what-it-costs) [f](docs/commands.md#precision---dtype-and-what-it-costs)"
    )
    # the heading "Precision: `--dtype` and what it costs" has MkDocs' anchor (e), not a literal one (f)
    assert _broken_links(planted) == [
        "docs/nope.md",
        "docs/probes.md#no-such-heading",
        "docs/commands.md#precision---dtype-and-what-it-costs",
    ]


def test_figures_page_shows_the_reports_captions() -> None:
    from sweeps.report import FIGURE_CAPTIONS

    page = (ROOT / "docs" / "figures.md").read_text(encoding="utf-8")
    for pattern, caption in FIGURE_CAPTIONS:
        assert f"| `{pattern}.png` | {caption} |" in page, pattern
