"""The recordings still say what the reference does: a few parity cases, run live.

`make test` installs the reference CLI (Claude Code 2.1.328) outside the repo; this runs
some cases of cases_parity.json through it with the recording harness (offline, through
the fake Messages API) and compares each call's is_error and text, harness reminders
dropped, with results_parity.json. Skipped without the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle.test_smoke import ref_text
from tests.support.data import ORACLE, claude_code_bin

CLAUDE = claude_code_bin()
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="Claude Code CLI not installed")
# Cheap cases whose results do not depend on the machine (no readdir order, no devices).
# (lenient_bash is not: a negative timeout races the reference's move to the background.)
LIVE = ("grep_newline", "lenient_grep", "write_crlf", "glob_tie_dir_mtime")


def test_recorded_parity_cases_match_the_live_reference(tmp_path: Path) -> None:
    assert CLAUDE is not None
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, str(ORACLE / "run_oracle.py"), str(ORACLE / "cases_parity.json")]
        + ["-o", str(out), "--only", ",".join(LIVE), "--model", "claude-sonnet-4-5"]
        + ["-j", "2", "--tmp", str(tmp_path), "--claude", CLAUDE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    recorded = {
        c["id"]: c for c in json.loads((ORACLE / "results_parity.json").read_text())["cases"]
    }
    live = {c["id"]: c for c in json.loads(out.read_text())["cases"]}
    assert set(live) == set(LIVE)
    for case_id, case in live.items():
        want = recorded[case_id]["calls"]
        assert len(case["calls"]) == len(want), case_id
        for i, (got, ref) in enumerate(zip(case["calls"], want, strict=True)):
            where = f"{case_id} call {i}"
            assert got["result"]["is_error"] == ref["result"]["is_error"], where
            assert ref_text(got["result"]["content"]) == ref_text(ref["result"]["content"]), where
