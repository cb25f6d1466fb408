"""One session's heavy calls slow that session, not the others (issue 18, item 1).

The property is an ordering, not a timing: while session A's Write of a file whose
patch is costly runs, session B's Reads keep completing. When the patch was made on
the event loop, no other call could complete until it ended (B got a few Reads in
before and after, none during); made in a worker process, B reads all along.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agentd_client import Client
from tests.conftest import SANDBOX_UID
from tests.support.daemon import DaemonProcess

# Reads of B that must complete while A's Write runs (on main: 0 to 3).
READS_DURING = 20


def _repetitive(lines: int, tag: str) -> str:
    """Short repeated lines: the input on which an exact line diff is slowest."""
    shapes = ["def f@():", "    x = 1", "    return x", "", "}", "    pass", "# " + tag, ""]
    return "".join(shapes[i % 8].replace("@", str(i)) + "\n" for i in range(lines))


def _give_to_sandbox(path: Path) -> None:
    """Files the session's sandbox identity may write (the daemon runs as root here)."""
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)


def _apply(old: str, hunks: list[dict]) -> str:
    """The new text a structured patch makes of `old` (it must be exact, coarse or not)."""
    a = old.split("\n")[:-1] if old.endswith("\n") else old.split("\n")
    out: list[str] = []
    at = 0
    for h in hunks:
        start = h["oldStart"] - 1
        out.extend(a[at:start])
        at = start
        for line in h["lines"]:
            if line.startswith((" ", "-")):
                assert a[at] == line[1:]
                at += 1
            if line.startswith((" ", "+")):
                out.append(line[1:])
    out.extend(a[at:])
    return "".join(line + "\n" for line in out)


def test_other_sessions_read_while_one_writes_a_costly_file(
    daemon: DaemonProcess, client: Client, workspace: Path
) -> None:
    (workspace / "a").mkdir()
    (workspace / "b").mkdir()
    big = workspace / "a" / "big.py"
    old, new = _repetitive(1500, "old"), _repetitive(1500, "new")
    big.write_text(old)
    small = workspace / "b" / "small.txt"
    small.write_text("".join(f"line {i}\n" for i in range(20)))
    for path in (workspace / "a", workspace / "b", big, small):
        _give_to_sandbox(path)
    a = client.create_session(str(workspace / "a"), permission_mode="bypassPermissions").id
    b = client.create_session(str(workspace / "b"), permission_mode="bypassPermissions").id
    assert not client.run_tool(a, "Read", {"file_path": str(big)}).is_error

    results: dict[str, object] = {}
    write_done = threading.Event()

    def write() -> None:
        with Client(daemon.socket, timeout=600) as own:
            results["write"] = own.run_tool(a, "Write", {"file_path": str(big), "content": new})
        write_done.set()

    writer = threading.Thread(target=write)
    writer.start()
    during = 0
    with Client(daemon.socket, timeout=600) as reader:
        while not write_done.is_set():
            got = reader.run_tool(b, "Read", {"file_path": str(small)})
            assert not got.is_error, got.text
            if not write_done.is_set():
                during += 1
    writer.join()
    result = results["write"]
    assert not result.is_error, result.text  # type: ignore[attr-defined]
    assert big.read_text() == new
    # The patch is right, whether exact or (past its CPU deadline) one coarse hunk.
    assert _apply(old, result.data["structuredPatch"]) == new  # type: ignore[attr-defined]
    assert during >= READS_DURING, f"only {during} Reads of another session during the Write"
