"""A person's terminal after `agentctl exec -it`, on a real pty rendered by pyte, through
the real daemon: what a task writes that reaches past the screen never arrives, what it
set is undone (only that), and detaching leaves the screen as it was with the detach line
on a fresh line below, as docker and tmux do."""

from __future__ import annotations

import pyte

from tests.support.daemon import DaemonProcess
from tests.support.screen import Terminal

PROMPT = "sbx$ "
BASH = ["bash", "--norc", "--noprofile", "-i"]

# The task: a clipboard write split across two writes (and so two reads), a title, a cwd
# report, a device control string, an APC; then modes a program sets and dies with.
HOSTILE = (
    r"printf '\033]52;c;ZXZpbA=='; sleep 0.3; printf '\007';"
    r" printf '\033]0;owned-title\007\033]7;file:///etc\007\033P+q544e\033\\\033_apc-data\033\\';"
    r" printf '\033[4h\033[?1000h\033[?2004h\033[?25l\033[1m'; echo task-done"
)


def test_a_task_cannot_reach_past_the_screen_and_its_modes_are_undone(
    daemon: DaemonProcess, session_id: str
) -> None:
    with Terminal(
        "exec", "-it", "--socket", daemon.socket, session_id, "--", "sh", "-c", HOSTILE,
        rows=24, cols=100,
    ) as term:  # fmt: skip
        assert term.wait_exit() == 0
        term.wait_for("task-done")
        raw = term.raw
        for never in (b"]52", b"ZXZpbA", b"owned-title", b"]7;", b"\x1bP", b"544e", b"\x1b_"):
            assert never not in raw, (never, raw)
        assert term.screen.title == ""
        # What the task set is undone: insert mode, mouse, bracketed paste, cursor, bold.
        assert pyte.modes.IRM not in term.screen.mode
        assert pyte.modes.DECTCEM in term.screen.mode
        tail = raw[raw.rindex(b"task-done") :]
        for undo in (b"\x1b[4l", b"\x1b[?1000l", b"\x1b[?2004l", b"\x1b[?25h", b"\x1b[0m"):
            assert undo in tail, (undo, tail)
        # ... and only that: no reset of what it never touched (these move the cursor home).
        for untouched in (b"\x1b[?1049l", b"\x1b[r", b"\x1b[?6l", b"\x1b[?1003l"):
            assert untouched not in tail, (untouched, tail)


def test_detach_leaves_the_screen_and_says_so_on_a_fresh_line(
    daemon: DaemonProcess, session_id: str
) -> None:
    with Terminal(
        "exec", "-it", "--socket", daemon.socket, session_id, "--", *BASH, rows=24, cols=100
    ) as term:
        term.send("PS1='sbx$ '\r")
        term.wait_for(lambda t: t.last_line() == PROMPT.strip(), what="the shell's prompt")
        for n in range(1, 4):
            term.send(f"echo line-{n}\r")
            term.wait_for(lambda t, n=n: t.text().count(f"line-{n}") >= 2, what=f"line-{n}")
        term.send("echo half-typed")
        term.wait_for(f"{PROMPT}echo half-typed", what="the half-typed command")
        before = term.lines()
        typed_row = next(i for i, line in enumerate(before) if line.endswith("echo half-typed"))
        term.send("\x10\x11")  # Ctrl-P Ctrl-Q
        assert term.wait_exit() == 0
        after = term.lines()
        # Nothing above was overwritten; the detach line is the next line, the cursor below.
        assert after[: typed_row + 1] == before[: typed_row + 1], term.text()
        assert after[typed_row + 1].startswith("agentctl: detached from task"), term.text()
        assert (term.screen.cursor.y, term.screen.cursor.x) == (typed_row + 2, 0)
