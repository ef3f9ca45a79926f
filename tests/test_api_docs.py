"""`make docs`: the API page of meshproof.testing and the entry points, built offline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT


def _api_modules() -> list[str]:
    text = (REPO_ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"^API_MODULES := (.*)$", text, flags=re.M)
    assert match, "Makefile lists no API_MODULES"
    return match.group(1).split()


def test_the_api_page_builds_offline(tmp_path: Path) -> None:
    modules = _api_modules()
    assert "meshproof.testing" in modules
    subprocess.run([sys.executable, "-m", "pdoc", "--docformat", "markdown",
                    "--no-show-source", "-o", str(tmp_path), *modules],
                   check=True, capture_output=True, timeout=120)
    page = (tmp_path / "meshproof" / "testing.html").read_text(encoding="utf-8")
    assert "assert_verified" in page and "assert_violates" in page
    for html in tmp_path.rglob("*.html"):
        # nothing is loaded from elsewhere (links in the footer are fine)
        fetched = re.findall(r'<(?:script|img|link)[^>]*(?:src|href)="(https?:[^"]*)"',
                             html.read_text(encoding="utf-8"))
        assert fetched == [], (html, fetched)
