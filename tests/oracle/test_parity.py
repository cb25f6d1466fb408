"""Replay the parity recordings (tests/data/oracle/cases_parity.json) through the real daemon.

The cases pin where agentd once differed from the reference (Claude Code 2.1.328): Read of
binary bytes and of devices, `~` paths, Write with CRLF, inputs the reference takes
leniently, Glob's order among equal mtimes and its listing of .git, Grep patterns with
a line break, and a large Bash output (`<persisted-output>`). Each call is compared as
in test_oracle.py (is_error always, then the checks listed per call); where agentd
differs on purpose, the call's entry in DIFFERENT says how and why (README.md,
"Differences from the reference", lists the same).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd_client import Client
from tests.oracle.test_smoke import (
    SANDBOX_UID,
    Call,
    _substitute,
    case_workspace,  # noqa: F401 (a fixture)
    exact,
    first_word,
    numbers,
    path,
    quoted,
    reminder_only,
    wrapped,
)
from tests.support.data import ORACLE

CASES = json.loads((ORACLE / "cases_parity.json").read_text())
RESULTS = {c["id"]: c for c in json.loads((ORACLE / "results_parity.json").read_text())["cases"]}


# ---- checks of their own ------------------------------------------------------------


def mentions(*words: str) -> Callable[[Call], None]:
    def check(c: Call) -> None:
        for word in words:
            assert word in c.expected and word in c.got, (word, c.got)

    check.__name__ = f"mentions{words}"
    return check


def body(c: Call) -> None:
    """The numbered lines are the reference's; a bracketed notice follows in both or neither
    (its prose is ours)."""
    want, _, want_note = c.expected.partition("\n\n[")
    got, _, got_note = c.got.partition("\n\n[")
    assert got == want
    assert bool(got_note) == bool(want_note), c.got


def same_data(*keys: str) -> Callable[[Call], None]:
    """Fields of the structured result equal to the reference's (`file.numLines` reaches in)."""

    def check(c: Call) -> None:
        ref = json.loads(json.dumps(c.ref["structured"]).replace("{WS}", c.ws))
        for key in keys:
            want: Any = ref
            got: Any = c.ours.data
            for part in key.split("."):
                want, got = want[part], got[part]
            assert got == want, (key, got, want)

    check.__name__ = f"same_data{keys}"
    return check


def persisted(c: Call) -> None:
    """`<persisted-output>` with the same size and preview; the file is ours and holds it all."""
    saved = re.compile(r"Full output saved to: (\S+)\n")
    assert saved.sub("Full output saved to: PATH\n", c.got) == saved.sub(
        "Full output saved to: PATH\n", c.expected
    )
    m = saved.search(c.got)
    assert m and os.path.getsize(m.group(1)) == c.ours.data["persistedOutputSize"]
    assert c.ours.data["persistedOutputSize"] == c.ref["structured"]["persistedOutputSize"]


def first_line(c: Call) -> None:
    assert c.got.splitlines()[0] == c.expected.splitlines()[0], c.got[:200]


def same_start(c: Call) -> None:
    """The first lines agree (a failed command's long output: see DIFFERENT)."""
    assert c.got.splitlines()[:20] == c.expected.splitlines()[:20], c.got[:200]


def same_start_after(lines: int) -> Callable[[Call], None]:
    """The same text after the first `lines` lines (a signal's exit status is the shell's)."""

    def check(c: Call) -> None:
        assert c.got.splitlines()[lines:] == c.expected.splitlines()[lines:], c.got

    check.__name__ = f"same_start_after({lines})"
    return check


def outside(c: Call) -> None:
    """Refused as a path outside the workspace: agentd never follows a link out of it."""
    assert c.ours.is_error and "outside the session's workspace" in c.got, c.got


def holds(name: str, text: str) -> Callable[[Call], None]:
    """The call left `name` in the workspace holding `text` (its notice is prose)."""

    def check(c: Call) -> None:
        assert Path(c.ws, name).read_text() == text

    check.__name__ = f"holds({name!r})"
    return check


def fifo_refused(c: Call) -> None:
    assert c.ours.is_error and "regular file" in c.got, c.got


def glob_walk(c: Call) -> None:
    """The reference's files, in the reference's order computed here (equal mtimes keep the
    order of `rg --sort modified`, which follows this file system's directory order)."""
    assert sorted(c.got.splitlines()) == sorted(c.expected.splitlines())
    root = c.input.get("path") or c.ws
    listed = (
        subprocess.run(
            ["rg", "--files", "--hidden", "--no-ignore", "--sort", "modified", "--null"]
            + ["--glob", c.input["pattern"] or "*"],
            cwd=root,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")[:-1]
    )
    ordered = sorted(listed, key=lambda p: os.lstat(os.path.join(root, p)).st_mtime_ns)
    shown = [os.path.relpath(os.path.join(root, p), c.ws) for p in ordered]
    assert c.got.splitlines() == shown


Check = Callable[[Call], None]
RD = [reminder_only]
ERR = [wrapped, first_word]

CHECKS: dict[str, list[list[Check]]] = {
    # blob.xyz, noext: shown as text with a NUL notice; latin-1 is decoded (see DIFFERENT).
    "read_binary_unknown_ext": [
        [body, same_data("file.numLines")],
        [body, same_data("file.numLines")],
        [exact],
        [same_data("file.numLines", "file.totalLines")],
        [body],
        [wrapped, mentions("binary", ".zip")],
        [body],
    ],
    "read_devices": [RD, [outside], ERR, ERR, ERR],
    "read_dev_zero": [ERR],
    "read_dev_urandom": [ERR],
    "read_zero_link": [[outside]],
    "read_dev_full": [ERR],
    "read_fifo": [[fifo_refused]],
    "tilde_paths": [[], [], [], []],
    "write_crlf": [
        [path, same_data("type", "content", "structuredPatch")],
        [exact],
        [exact],
        [path, same_data("type", "content", "structuredPatch", "originalFile")],
        [exact],
        [exact],
        [path, same_data("type", "content", "structuredPatch", "originalFile")],
        [exact],
        [exact],
        [path],
        [exact],
        [path],
        [exact],
    ],
    "lenient_bash": [[exact], [exact], [first_line], [exact], [exact], [exact], [exact], [exact]]
    + [[exact]],
    "lenient_glob": [[exact], [exact], [wrapped], [wrapped], [exact], [exact], [exact]]
    + [[exact], [exact], [wrapped, mentions("unclosed character class")]],
    "lenient_grep": [[exact], [wrapped], [exact], [exact], [], [wrapped], [wrapped]]
    + [[wrapped], [wrapped]],
    "lenient_read": [[same_data("file.numLines", "file.totalLines")], [exact], [exact], [exact]]
    + [[wrapped], [exact], [exact], [wrapped, first_word], [exact]],
    "glob_ties_hidden": [[glob_walk]] * 8,
    "glob_mtime_order": [[glob_walk]],
    "grep_newline": [[exact]] * 8,
    "bash_output_sizes": [[exact], [persisted], [persisted], [same_start], [persisted]],
    "grep_vcs_dirs": [[exact]] * 4,
    "glob_tie_dir_mtime": [[exact]],
    "glob_abs_and_empty": [[exact]] * 5,
    "read_device_nodes": [RD],
    "read_zero_node": [[]],
    "lenient_paths": [[exact]] * 3 + [[holds("new", "z\n")]] + [[exact]] * 4,
    "bash_output_forms": [[exact]] * 4
    + [[exact, same_data("stdout")]]
    + [[exact]] * 2
    + [[exact, same_data("stdout")]]
    + [[exact]] * 2,
    "write_encodings": [[exact], [path], [exact], [exact], [path], [exact], [], [], [], [exact]]
    + [[], []],
    "read_variants": [[wrapped, first_word], [exact], [reminder_only, numbers]]
    + [[wrapped, mentions("image extension")]]
    + [[exact]] * 4,
    "grep_more": [[exact]] * 7,
    "edit_loose_matches": [[exact], [path], [exact], [wrapped, quoted], [wrapped, quoted]]
    + [[path], [exact]],
    "bash_exits": [[exact], [exact, same_data("returnCodeInterpretation")]]
    + [[exact, same_data("returnCodeInterpretation")]] * 2
    + [[first_word], [same_start_after(1)], [exact], [exact]],
    "lenient_misc": [[wrapped, mentions("unrecognized file type: nosuchtype")]] + [[exact]] * 7,
}

# Calls where agentd differs on purpose: (case, call) -> (our is_error, why).
DIFFERENT: dict[tuple[str, int], tuple[bool, str]] = {
    ("read_devices", 1): (True, "a link out of the workspace is never followed"),
    ("read_fifo", 0): (True, "the reference blocks on a FIFO; agentd never opens one"),
    ("tilde_paths", 1): (True, "~ is the session user's home, outside the workspace"),
    ("tilde_paths", 2): (True, "Bash's ~ is the sandbox's own home, where Write did not go"),
    # Not errors, their texts differ: see the README's "Differences from the reference".
    ("lenient_bash", 2): (False, "a negative timeout is the default, not an instant background"),
    ("lenient_read", 0): (False, "offset 0 numbers lines from 1, not 0"),
    ("bash_exits", 4): (True, "killed by a signal: 128 + its number, not the reference's shell's"),
    ("bash_exits", 5): (True, "(the same: SIGKILL is 137)"),
    ("bash_output_sizes", 3): (True, "a failed command's large output: head and tail"),
    ("read_binary_unknown_ext", 3): (False, "latin-1 text is decoded, not shown as U+FFFD"),
    ("write_encodings", 6): (False, "latin-1 text is decoded, not shown as U+FFFD"),
    ("write_encodings", 7): (False, "a latin-1 file is written in latin-1, not refused"),
    ("write_encodings", 8): (False, "(so the file holds the new text)"),
    ("write_encodings", 10): (False, "an old_string with CRLF matches a CRLF file's lines"),
    ("write_encodings", 11): (False, "(so the file was edited)"),
}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_parity_case(case: dict[str, Any], client: Client, case_workspace: Path) -> None:  # noqa: F811
    case_id = case["id"]
    ws = str(case_workspace)
    ref_calls = RESULTS[case_id]["calls"]
    setup = case.get("setup") or []
    for cmd in [setup] if isinstance(setup, str) else setup:
        subprocess.run(["bash", "-c", cmd], cwd=ws, check=True)
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{SANDBOX_UID}:{SANDBOX_UID}", ws], check=True)
    sid = client.create_session(ws, permission_mode="bypassPermissions").id
    blocks = [b for turn in case["turns"] for b in turn if "name" in b]
    assert len(blocks) == len(ref_calls) == len(CHECKS[case_id])
    for i, (block, ref, checks) in enumerate(zip(blocks, ref_calls, CHECKS[case_id], strict=True)):
        args = _substitute(block["input"], ws, {})
        c = Call(block["name"], args, ref, client.run_tool(sid, block["name"], args), ws)
        if (case_id, i) in DIFFERENT:
            want_error = DIFFERENT[(case_id, i)][0]
        else:
            want_error = bool(ref["result"]["is_error"])
        assert c.ours.is_error == want_error, f"{case_id} call {i}: {c.got[:300]!r}"
        for check in checks:
            try:
                check(c)
            except AssertionError as exc:
                raise AssertionError(f"{case_id} call {i} ({c.name}) {check.__name__}") from exc
    for t in client.list_tasks(sid, include_finished=False):
        client.run_tool(sid, "TaskStop", {"task_id": t.id})
    client.close_session(sid)


def test_every_parity_case_has_checks() -> None:
    assert {c["id"] for c in CASES} == set(CHECKS) == set(RESULTS)
    assert not {c["id"] for c in CASES} & {
        c["id"] for c in json.loads((ORACLE / "cases_smoke.json").read_text())
    }
