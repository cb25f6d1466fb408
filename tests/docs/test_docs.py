"""The documentation: its generated reference pages match the code, and every repository
path a page names exists (a page that names a moved file misleads its reader)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.data import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP = (
    "agentd",
    "agentd_sandbox",
    "bench",
    "client",
    "deploy",
    "docs",
    "protos",
    "scripts",
    "systemd",
    "tests",
)
# A path: one of the checkout's top-level directories, then slash-separated parts.
PATH = re.compile(rf"(?<![\w./~-])((?:{'|'.join(TOP)})/[\w.+-]+(?:/[\w.+-]+)*/?)")
# Places that name paths of other machines or examples, not of this checkout.
NOT_OURS = re.compile(r"(?:\.\.\.|…|\*|<|\{|\$)")


def named_paths(text: str) -> set[str]:
    found = set()
    for m in PATH.finditer(text):
        path = m.group(1).rstrip(".,:;)")
        after = text[m.end() : m.end() + 1]
        if NOT_OURS.search(after):
            continue  # agentd/…, tests/*.py: a pattern, not a path
        found.add(path)
    return found


def test_the_generated_reference_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_every_path_a_page_names_exists() -> None:
    missing = {
        f"{page.relative_to(ROOT)}: {path}"
        for page in PAGES
        for path in named_paths(page.read_text())
        if not (ROOT / path).exists()
    }
    assert not missing, "\n".join(sorted(missing))


def test_the_paths_check_sees_paths() -> None:
    assert named_paths("see `agentd/tools/read.py`, and tests/e2e/.") == {
        "agentd/tools/read.py",
        "tests/e2e/",
    }
    assert named_paths("a pattern: tests/*.py, agentd/…") == set()


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_page_is_in_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(ROOT / "docs")) for p in Path(ROOT / "docs").rglob("*.md")}
    assert {p for p in pages if f": {p}\n" not in nav} == set()
