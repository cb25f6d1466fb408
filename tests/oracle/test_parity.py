"""Replay the parity recordings (tests/data/oracle/cases_parity.json) through the real daemon.

The cases pin where agentd once differed from the reference (Claude Code 2.1.328): Read of
binary bytes and of devices, `~` paths, Write with CRLF, inputs the reference takes
leniently, Glob's order among equal mtimes and its listing of .git, Grep patterns with
a line break, a large Bash output (`<persisted-output>`), images past the pixel budget
or undecodable, PDFs as documents and their page limits, the line-end whitespace Write
and Edit trim, TodoWrite's older item fields, WebFetch of a URL answering 4xx or 5xx
(a loopback server, tests/data/oracle/http_status.py; a daemon of this module's allows
127.0.0.1 for WebFetch), Read of notebooks that are not valid notebook JSON, and
NotebookEdit changing a cell's type. Each call is compared as
in test_oracle.py (is_error always, then the checks listed per call); where agentd
differs on purpose, the call's entry in DIFFERENT says how and why (docs/parity.md,
"Differences from the reference", lists the same).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from pypdf import PdfReader

from agentd_client import Client, DocumentBlock, ImageBlock
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
from tests.support.daemon import start_daemon
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


def status_as(c: Call) -> None:
    """A 4xx/5xx answer is a result, not an error: the same status and no body, as the
    reference (its note is prose)."""
    for key in ("code", "codeText", "bytes"):
        assert c.ours.data[key] == c.ref["structured"][key], (key, c.ours.data)
    code, text = c.ref["structured"]["code"], c.ref["structured"]["codeText"]
    assert c.got.splitlines()[0] == f"The server returned HTTP {code} {text}.", c.got
    assert "Status" not in c.got, c.got  # the body was not read


def cells_as(c: Call) -> None:
    """The notebook's cells after the edit, as `json.dumps(..., sort_keys=True)` printed
    them; a cell whose type changed carries the fields of its new type (see DIFFERENT)."""
    want, got = json.loads(c.expected), json.loads(c.got)
    for cell in want:
        if cell["cell_type"] == "markdown":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        else:
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    assert got == want, c.got


def _block(content: Any, kind: str) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


# The reference's notes for scaled images ("[Image: original WxH, displayed at …]"), which
# it sends as a message after the result and agentd sends inside it.
IMAGE_NOTES = {
    block["text"]
    for case in RESULTS.values()
    for m in case.get("interleaved_messages", [])
    for message in m["messages"]
    for block in message["content"]
    if block.get("text", "").startswith("[Image: original ")
}


def image_as(c: Call) -> None:
    """The image sent has the reference's media type and pixel size; a scaled one comes
    with the reference's note on mapping coordinates."""
    (want,) = _block(c.ref_raw, "image")
    summary = want["source"]["data_summary"]
    image = c.ours.content[0]
    assert isinstance(image, ImageBlock), c.ours.content
    assert image.media_type == want["source"]["media_type"]
    with Image.open(io.BytesIO(image.data)) as img:
        assert img.size == (summary["width"], summary["height"]), img.size
    if summary["bytes"] == c.ref["structured"]["file"]["originalSize"]:
        assert len(c.ours.content) == 1  # sent as it is
    else:
        assert c.ours.content[1].text in IMAGE_NOTES, c.ours.content[1].text


def document_as(c: Call) -> None:
    """The text line, then the PDF itself as a document block: the very bytes the
    reference sent (their sha256)."""
    (want,) = _block(c.ref_raw, "document")
    text, document = c.ours.content
    assert text.text == _block(c.ref_raw, "text")[0]["text"].replace("{WS}", c.ws)
    assert isinstance(document, DocumentBlock) and document.media_type == "application/pdf"
    summary = want["source"]["data_summary"]
    assert hashlib.sha256(document.data).hexdigest() == summary["sha256"]


def pages_as(c: Call) -> None:
    """The reference's "PDF pages extracted" line; where it sends one image per page,
    agentd sends one PDF of those pages (see DIFFERENT)."""
    images = _block(c.ref_raw, "image")
    text, document = c.ours.content
    assert text.text == _block(c.ref_raw, "text")[0]["text"].replace("{WS}", c.ws)
    assert isinstance(document, DocumentBlock)
    pages = PdfReader(io.BytesIO(document.data)).pages
    first = c.ref["structured"]["firstPage"]
    assert [p.extract_text() for p in pages] == [
        f"Page {n} of {c.ours.data['file']['numPages']}" for n in range(first, first + len(images))
    ]


def file_shows(name: str) -> Callable[[Call], None]:
    """`cat -A` shows the reference's bytes, after the first line (the reference's Bash
    trims the spaces that lead its output)."""

    def check(c: Call) -> None:
        assert c.got.splitlines()[1:] == c.expected.splitlines()[1:], c.got
        assert c.got.splitlines()[0].strip() == c.expected.splitlines()[0].strip()

    check.__name__ = f"file_shows({name!r})"
    return check


def todos_as(c: Call) -> None:
    """The list the reference kept: the known fields of each item, in order."""
    assert c.ours.data["newTodos"] == c.ref["structured"]["newTodos"]
    assert c.ours.data["oldTodos"] == c.ref["structured"]["oldTodos"]


Check = Callable[[Call], None]
RD = [reminder_only]
ERR = [wrapped, first_word]
ERR_PROSE = [wrapped]  # an error in our words

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
    "image_budget": [[image_as]] * 8,
    "image_undecodable": [ERR_PROSE, [image_as], ERR_PROSE, ERR_PROSE, ERR_PROSE, [image_as]]
    + [ERR_PROSE],
    "pdf_reads": [[document_as], [document_as], [wrapped, mentions("11", "pages")]]
    + [[pages_as], [pages_as], [pages_as], [wrapped, mentions("11")]]
    + [[wrapped, mentions("5-", "20")], [wrapped, mentions("1,3")], [wrapped, mentions('"0"')]]
    + [[wrapped, mentions("1-21", "20")], [pages_as], [wrapped, mentions("20MB")], [pages_as]]
    + [[wrapped, mentions("%PDF-")], [wrapped, mentions("empty")], [wrapped], [document_as]]
    + [[document_as], [pages_as]],
    "edit_trailing_ws": [[exact], [path, same_data("newString")], [exact]] * 10,
    "edit_trailing_ws_more": [[exact], [same_data("newString")], [exact]]
    + [[exact], [same_data("newString")], [exact]]
    + [[same_data("newString")], [exact]]
    + [[path, same_data("content")], [exact]]
    + [[exact], [same_data("newString")], [exact]]
    + [[exact], [same_data("newString")], [file_shows("s.py")]],
    "todo_old_fields": [[todos_as], [todos_as], [wrapped, mentions("todos", "activeForm")]]
    + [[todos_as]],
    "webfetch_http_errors": [[exact]]
    + [[status_as]] * 6
    + [[same_data("code", "bytes")]]
    + [[status_as]],
    "read_notebook_invalid": [[wrapped, mentions("not valid JSON")]] * 2
    + [[wrapped, mentions("cells")]] * 3
    + [[wrapped, mentions("not valid JSON")], [wrapped], [exact]],
    "notebook_cell_type_change": [[exact, same_data("type")], [exact], [cells_as], [exact]]
    + [[cells_as], [exact], [exact], [cells_as], [exact]],
}

# Calls where agentd differs on purpose: (case, call) -> (our is_error, why).
DIFFERENT: dict[tuple[str, int], tuple[bool, str]] = {
    ("read_devices", 1): (True, "a link out of the workspace is never followed"),
    ("read_fifo", 0): (True, "the reference blocks on a FIFO; agentd never opens one"),
    ("tilde_paths", 1): (True, "~ is the session user's home, outside the workspace"),
    ("tilde_paths", 2): (True, "Bash's ~ is the sandbox's own home, where Write did not go"),
    # Not errors, their texts differ: see docs/parity.md, "Differences from the reference".
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
    # Not errors; the content differs: see docs/parity.md, "Differences from the reference".
    ("pdf_reads", 3): (False, "pages: a PDF of those pages, not one JPEG per page"),
    ("pdf_reads", 4): (False, "(the same)"),
    ("pdf_reads", 5): (False, "(the same)"),
    ("pdf_reads", 11): (False, "(the same)"),
    ("pdf_reads", 13): (False, "(the same)"),
    ("pdf_reads", 19): (False, "(the same)"),
    ("pdf_reads", 16): (True, "a PDF pypdf cannot parse is refused: the API would refuse it"),
    # Not errors; the file differs: a cell whose type changes gets its new type's fields
    # (a markdown cell has no outputs, a code cell has them), so the notebook stays valid.
    ("notebook_cell_type_change", 2): (False, "code to markdown: no outputs left behind"),
    ("notebook_cell_type_change", 4): (False, "markdown to code: outputs and a count"),
    ("notebook_cell_type_change", 7): (False, "(the same cells)"),
}

# Cases that fetch from a loopback server: run on a daemon that lets WebFetch reach
# 127.0.0.1, with the server speaking plain HTTP (agentd fetches loopback http as it is).
WEB_CASES = {"webfetch_http_errors"}


@pytest.fixture(scope="module")
def web_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    base = tmp_path_factory.mktemp("agentd-web")
    config = base / "config.toml"
    config.write_text('webfetch_allow_private_hosts = ["127.0.0.1"]\n')
    proc = start_daemon(base, ["--config", str(config)])
    with Client(proc.socket, timeout=60) as c:
        yield c
    assert proc.stop() == 0, proc.log


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_parity_case(
    case: dict[str, Any],
    client: Client,
    case_workspace: Path,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    case_id = case["id"]
    if case_id in WEB_CASES:
        client = request.getfixturevalue("web_client")
    ws = str(case_workspace)
    ref_calls = RESULTS[case_id]["calls"]
    setup = case.get("setup") or []
    # make_media.py makes the images and PDFs, as the recording's setup did.
    env = {**os.environ, "PYTHON": sys.executable, "ORACLE_DATA": str(ORACLE)}
    env["ORACLE_SERVER_MODE"] = "--plain"
    for cmd in [setup] if isinstance(setup, str) else setup:
        subprocess.run(["bash", "-c", cmd], cwd=ws, check=True, env=env)
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{SANDBOX_UID}:{SANDBOX_UID}", ws], check=True)
    sid = client.create_session(ws, permission_mode="bypassPermissions").id
    blocks = [b for turn in case["turns"] for b in turn if "name" in b]
    assert len(blocks) == len(ref_calls) == len(CHECKS[case_id])
    caps: dict[str, str] = {}
    for i, (block, ref, checks) in enumerate(zip(blocks, ref_calls, CHECKS[case_id], strict=True)):
        args = _substitute(block["input"], ws, caps)
        result = client.run_tool(sid, block["name"], args)
        for var, rx in block.get("capture", {}).items():
            m = re.search(rx, result.text)
            assert m, f"{case_id}: capture {var} found nothing in {result.text!r}"
            caps[var] = m.group(1)
        c = Call(block["name"], args, ref, result, ws, dict(caps))
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
