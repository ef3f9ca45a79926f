"""The single-file HTML report (report/html.py, report/html_markdown.py): the README as
HTML with inline diagrams and figures, and a real browser loading it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser import Browser, find_chromium
from helpers import REPO_ROOT

from meshproof.report.html import inline_svg, render_html
from meshproof.report.html_markdown import markdown_to_html

REPORTS = REPO_ROOT / "reports"
SCREENSHOTS = Path(os.environ.get("MESHPROOF_SCREENSHOTS", "")) if \
    os.environ.get("MESHPROOF_SCREENSHOTS") else None


def test_markdown_blocks_and_spans() -> None:
    md = ("# Title *x*\n\nSome `a|b` **bold** and [link](x.md).\n\n"
          "| a | b \\| c |\n|---|---|\n| `1` | **✗** |\n\n- one\n- two <tag>\n")
    out = markdown_to_html(md)
    assert '<h1 id="title-x">Title <em>x</em></h1>' in out
    assert "<code>a|b</code> <strong>bold</strong>" in out and '<a href="x.md">link</a>' in out
    assert "<th>b | c</th>" in out and "<td><strong>✗</strong></td>" in out
    assert "<li>two &lt;tag&gt;</li>" in out


def test_inline_svg_keeps_tooltips_and_makes_ids_unique() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<!-- c -->\n<svg><g id="node1">'
           '<a xlink:title="rank c0p0: 15 ops"><text>c0p0</text></a>'
           '<use xlink:href="#node1"/></g></svg>')
    out = inline_svg(svg, "d-x")
    assert out.startswith("<svg>") and "<!--" not in out
    assert '<a><title>rank c0p0: 15 ops</title>' in out
    assert 'id="d-x-node1"' in out and 'xlink:href="#d-x-node1"' in out


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed report rendered afresh (no re-run of the sweep)."""
    if not (REPORTS / "README.md").is_file():
        pytest.skip("reports/README.md is not present")
    out = tmp_path_factory.mktemp("html") / "report.html"
    out.write_text(render_html((REPORTS / "README.md").read_text(encoding="utf-8"), REPORTS),
                   encoding="utf-8")
    return out


def test_the_page_is_one_offline_file(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((diagrams/[^)]+\.svg)\)",
                            (REPORTS / "README.md").read_text(encoding="utf-8")))
    assert text.count("<svg") == len(linked) > 0  # every linked diagram, inline
    assert "data:image/png;base64," in text
    # nothing to fetch: no http(s) resource, no src/href to a file beside it
    assert not re.search(r'(src|href)="(https?:|//|diagrams/|figures/)', text)
    assert text.count("<title>") > 1000  # the diagrams' tooltips


@pytest.mark.browser
def test_the_page_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run does)")
    shots = SCREENSHOTS or tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    browser = Browser(binary, width=1400, height=1000)
    try:
        browser.open(page.as_uri())
        browser.screenshot(shots / "report_top.png")
        table = browser.evaluate(
            "(() => { const t = document.querySelector('table');"
            " const r = t.getBoundingClientRect();"
            " return {rows: t.rows.length, top: r.top, h: r.height,"
            " visible: getComputedStyle(t).visibility};})()")
        assert table["rows"] > 5 and 0 <= table["top"] < 1000 and table["h"] > 100
        assert table["visible"] == "visible"
        # every table fits the 1,400-pixel window: none scrolls sideways
        overflow = browser.evaluate(
            "Array.from(document.querySelectorAll('div.table'))"
            ".map(d => d.scrollWidth - d.clientWidth)")
        assert overflow and max(overflow) <= 0, overflow
        diagram = browser.evaluate(
            "(() => { const f = document.querySelector('figure.diagram');"
            " f.scrollIntoView(); const s = f.querySelector('svg');"
            " const r = s.getBoundingClientRect();"
            " const hit = document.elementFromPoint(r.left + 40, r.top + 40);"
            " return {w: r.width, h: r.height, top: r.top, inside: s.contains(hit),"
            " texts: s.querySelectorAll('text').length};})()")
        browser.screenshot(shots / "report_diagram.png")
        assert diagram["w"] > 200 and diagram["h"] > 200 and diagram["inside"]
        assert diagram["texts"] > 10 and 0 <= diagram["top"] < 1000
        assert browser.log.console_errors == []
        fetched = [u for u in browser.log.requests
                   if not u.startswith(("file://", "data:"))]
        assert fetched == []
    finally:
        browser.close()
    assert (shots / "report_top.png").stat().st_size > 10_000


def test_long_names_in_table_cells_may_wrap_at_underscores() -> None:
    from meshproof.report.html_markdown import markdown_to_html

    page = markdown_to_html("| case |\n|---|\n| `mesh_mlo_2d_batch_on_cube_mesh` |\n")
    assert "<code>mesh_<wbr>mlo_<wbr>2d_<wbr>batch_<wbr>on_<wbr>cube_<wbr>mesh</code>" in page


def test_a_long_list_in_a_result_is_folded() -> None:
    from meshproof.report.markdown import FOLD_KEEP, fold_list

    listed = ", ".join(f"cube {i} pe 1 E/S" for i in range(56))
    folded = fold_list(f"direction_legality violated: 1344 op(s) use links it lacks: {listed}")
    assert folded.endswith(f", … and {56 - FOLD_KEEP} more (sweep.json lists them all)")
    assert "cube 7 pe 1" in folded and "cube 8 pe 1" not in folded
    assert fold_list("a, b, c") == "a, b, c"



def test_the_culprits_are_shown_beside_a_proved_numeric_verdict() -> None:
    """Idiom proved: a proved numeric_safety shows where its bound comes from (mechanism,
    share, kernel lines) in the README the page is built from."""
    from meshproof.report.html_markdown import markdown_to_html
    from meshproof.report.markdown import numeric_culprits

    lines = ["the rounding of the scores: 37% at mesh_mlo.py:30",
             "the normalisation o / ℓ and the output store: 30% at mesh_mlo.py:61"]
    record = {"name": "mesh_mlo_1d", "verdict": {"properties": [
        {"name": "numeric_safety", "status": "proved", "message": "…", "culprits": lines}]}}
    shown = numeric_culprits([record])
    assert shown == ["- `mesh_mlo_1d`: numeric_safety proved; the rounding bound's shares: "
                     "the rounding of the scores: 37% at mesh_mlo.py:30; the normalisation "
                     "o / ℓ and the output store: 30% at mesh_mlo.py:61"]
    assert "37% at mesh_mlo.py:30" in markdown_to_html("\n".join(shown))


def test_no_culprit_line_for_a_run_without_a_known_bound() -> None:
    """Mistake caught: an empty 'shares:' line for a run whose bound is unknown or whose
    numeric_safety was not checked."""
    from meshproof.report.markdown import numeric_culprits

    record = {"name": "k", "verdict": {"properties": [
        {"name": "numeric_safety", "status": "unknown", "message": "…"},
        {"name": "deadlock_freedom", "status": "proved", "message": "…"}]}}
    assert numeric_culprits([record, {"name": "broken", "error": "boom"}]) == []
