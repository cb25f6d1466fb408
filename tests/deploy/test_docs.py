"""The pages that map the code name files that exist: every path docs/ARCHITECTURE.md
and tests/README.md name (in backticks, or first on a line of a code block) is found in
the checkout. A path written short (`api/service.py`, `trust.py`) is looked up beneath
the packages and beneath the folders named before it in the same section, the latest
first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import data

ROOT = data.ROOT
PAGES = ["docs/ARCHITECTURE.md", "tests/README.md"]
# Where a short path is read from, besides the folders named before it.
BASES = ["", "agentd", "agentd_sandbox", "client", "client/agentd_client", "tests"]
_EXTENSIONS = ("py", "toml", "md", "json", "proto", "c", "yaml", "yml", "txt", "sh", "cfg")
_TOKEN = re.compile(r"^\.?[\w][\w.\-/<>*]*$")
_FILE = re.compile(rf"\.({'|'.join(_EXTENSIONS)})$")


def _is_path(token: str) -> bool:
    if not _TOKEN.match(token) or token.startswith(("/", "~")):
        return False
    if token.endswith("/") or _FILE.search(token):
        return "://" not in token and not re.fullmatch(r"[\w]+\.[\w]+\.[\w.]+", token)
    return False


def _blocks(text: str) -> list[list[str]]:
    """Each section's path-like names, in order: in backticks, and the first word of
    each line of a code block."""
    blocks: list[list[str]] = []
    current: list[str] = []
    in_code = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            words = line.split()
            current += [w for w in words[:1] if _is_path(w)]
            continue
        if line.startswith("#"):
            blocks.append(current)
            current = []
        current += [t for t in re.findall(r"`([^`\s]+)`", line) if _is_path(t)]
    blocks.append(current)
    return [b for b in blocks if b]


def _found(name: str, context: list[str]) -> str | None:
    pattern = re.sub(r"<[^>]+>", "*", name.rstrip("/"))
    for base in [*context, *BASES]:
        for hit in sorted(ROOT.glob(str(Path(base) / pattern) if base else pattern)):
            if hit.is_dir() == name.endswith("/") or "*" in pattern:
                return str(hit.relative_to(ROOT))
    return None


def missing(page: str) -> list[str]:
    lost = []
    for block in _blocks((ROOT / page).read_text()):
        context: list[str] = []
        for name in block:
            hit = _found(name, context)
            if hit is None:
                lost.append(name)
                continue
            folder = hit if (ROOT / hit).is_dir() else str(Path(hit).parent)
            if folder not in context and folder != ".":
                context.insert(0, folder)
    return lost


@pytest.mark.parametrize("page", PAGES)
def test_every_path_the_page_names_exists(page: str) -> None:
    assert missing(page) == [], f"{page} names files that are not in the checkout"


def test_the_check_sees_a_path_that_is_not_there(tmp_path: Path) -> None:
    blocks = _blocks("See `agentd/shim/` and `agentd/runs/launch.py`, then `plan.py`.\n")
    assert blocks == [["agentd/shim/", "agentd/runs/launch.py", "plan.py"]]
    assert _found("agentd/shim/", []) is None
    assert _found("launch.py", ["agentd/runs"]) == "agentd/runs/launch.py"
