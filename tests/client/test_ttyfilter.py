"""The allow-list a task's output passes to a person's terminal (terminal/ttyfilter.py):
what reaches past the screen is dropped whole however the bytes are split, what draws
passes as written, and restore() undoes exactly what the task set."""

from __future__ import annotations

import pytest

from agentd_client.terminal.ttyfilter import TerminalFilter

# What must never reach the person's terminal, each in a line of ordinary output.
HOSTILE = {
    "clipboard write": b"\x1b]52;c;ZXZpbCBwYXN0ZQ==\x07",
    "clipboard write (ST)": b"\x1b]52;c;ZXZpbA==\x1b\\",
    "title": b"\x1b]0;owned\x07",
    "icon title": b"\x1b]1;owned\x1b\\",
    "window title": b"\x1b]2;owned\x07",
    "cwd report": b"\x1b]7;file://host/etc\x07",
    "colour change": b"\x1b]11;#ff0000\x07",
    "iterm file": b"\x1b]1337;File=inline=1:AAAA\x07",
    "notification": b"\x1b]777;notify;a;b\x07",
    "dcs": b'\x1bP$q"p\x1b\\',
    "dcs sixel": b"\x1bPq#0;2;0;0;0#1!10~\x1b\\",
    "apc": b"\x1b_Gf=100;AAAA\x1b\\",
    "pm": b"\x1b^private\x1b\\",
    "sos": b"\x1bXstring\x1b\\",
    "title report": b"\x1b[21t",
    "window ops": b"\x1b[8;100;300t",
    "keyboard lock": b"\x1b[2h",
    "full reset": b"\x1bc",
    "identify": b"\x1bZ",
    "8-bit controls": b"\x1b G",
    "utf-8 off": b"\x1b%@",
    "scrollback erase": b"\x1b[3J",
    "enq": b"\x05",
    "hyperlink to a script": b"\x1b]8;;javascript:alert(1)\x1b\\",
    "xtsave/restore": b"\x1b[?1049s\x1b[?1049r",
}
DRAWS = (
    b"\x1b[1;31mred\x1b[0m \x1b[38;5;208mx\x1b[m\x1b[2J\x1b[H\x1b[10;5H\x1b[K\x1b[2A"
    b"\x1b[?25l\x1b[?25h\x1b[?2004h\x1b[?2004l\x1b(0qq\x1b(B\r\n"
)


def _through(data: bytes, split: int | None = None) -> bytes:
    f = TerminalFilter()
    if split is None:
        return f.feed(data)
    return b"".join(f.feed(data[i : i + split]) for i in range(0, len(data), split))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_what_reaches_past_the_screen_is_dropped_however_it_is_split(name: str) -> None:
    data = b"before " + HOSTILE[name] + b" after\r\n"
    for split in (None, 1, 2, 3, 5, 7):
        assert _through(data, split) == b"before  after\r\n", (name, split)


def test_8_bit_controls_are_never_run_and_what_follows_is_text() -> None:
    r = "\ufffd\ufffd"  # each byte of the UTF-8 C1 control, shown as what it is
    data = "a\u009b31mb\u009d52;c;QQ==\u009cc \u00e9\u4e2d\U0001f600".encode()
    for split in (None, 1, 2, 3):
        want = f"a{r}31mb{r}52;c;QQ=={r}c \u00e9\u4e2d\U0001f600".encode()
        assert _through(data, split) == want, split


def test_a_raw_8_bit_control_is_not_passed_to_an_8_bit_terminal() -> None:
    # Not UTF-8: a terminal in an 8-bit locale would read 0x9b as CSI, 0x9d as OSC.
    out = _through(b"x\x9b31m\x9d0;t\x07 \xff")
    assert not any(0x80 <= b <= 0x9F for b in out.replace("\ufffd".encode(), b"")), out


def test_what_draws_passes_as_written() -> None:
    for split in (None, 1, 4):
        assert _through(DRAWS, split) == DRAWS


def test_hyperlinks_pass_and_are_closed() -> None:
    f = TerminalFilter()
    link = b"\x1b]8;;https://example.com/a\x1b\\text"
    assert f.feed(link + b"\x07") == link + b"\x07"
    assert f.restore().startswith(b"\x1b]8;;\x1b\\")


def test_an_unfinished_sequence_is_never_passed() -> None:
    f = TerminalFilter()
    assert f.feed(b"ok\x1b]52;c;QUFB") == b"ok"
    assert f.feed(b"\x1b[?10") == b""  # ESC ends the string; a new sequence starts, unfinished
    assert f.restore() == b"\r\n"  # nothing was set; only a fresh line


def test_restore_undoes_exactly_what_was_set() -> None:
    f = TerminalFilter()
    f.feed(b"\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b[4h\x1b[?25l\x1b[1m\x1b=\x1b[?1h\x1b[3 q")
    f.feed(b"\x1b[5;20r\x0e")
    undo = f.restore()
    for wanted in (
        b"\x1b[?1000l", b"\x1b[?1006l", b"\x1b[?2004l", b"\x1b[4l", b"\x1b[?25h",
        b"\x1b[0m", b"\x1b[?66l", b"\x1b[?1l", b"\x1b[0 q", b"\x1b7\x1b[r\x1b8", b"\x0f",
    ):  # fmt: skip
        assert wanted in undo, (wanted, undo)
    for unwanted in (b"\x1b[?1049l", b"\x1b[?47l", b"\x1b[?7h", b"\x1b[?6l", b"\x1b[?1003l"):
        assert unwanted not in undo, (unwanted, undo)
    assert f.feed(b"\x1b[?25l late") == b""  # after the restore nothing of the task passes


def test_a_mode_set_then_cleared_is_not_reset() -> None:
    f = TerminalFilter()
    f.feed(b"\x1b[?1049h\x1b[?25l\x1b[1mX\x1b[0m\x1b[?25h\x1b[?1049l")
    assert f.restore() == b""  # the main screen's cursor was at a line's start


def test_the_alternate_screen_is_left_first_and_the_line_is_the_main_screens() -> None:
    f = TerminalFilter()
    f.feed(b"$ vim\r\n\x1b[?1049h\x1b[?1000h\x1b[5;1Hediting")
    undo = f.restore()
    assert undo.startswith(b"\x1b[?1049l") and not undo.endswith(b"\r\n"), undo
    f = TerminalFilter()
    f.feed(b"$ half a line")
    assert f.restore() == b"\r\n"


def test_ansi_mode_lists_keep_only_the_allowed() -> None:
    assert _through(b"\x1b[2;4h") == b"\x1b[4h"
    assert _through(b"\x1b[?3;25;1049h") == b"\x1b[?25;1049h"
