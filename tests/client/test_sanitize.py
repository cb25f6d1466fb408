"""agentd_client.terminal.sanitize and terminal: what a terminal would act on is shown as text.

The attacks themselves run on real ptys through the daemon (tests/security/
test_screen.py); here, the class is checked whole: every character Python's Unicode
database calls a control, a format character or a separator, every C1 byte, and the rule
that nothing in agentctl writes to the terminal around the safe streams.
"""

from __future__ import annotations

import ast
import io
import sys
import unicodedata
from pathlib import Path

from agentd_client.terminal import sanitize
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.bursts import Budget, Outputs
from agentd_client.terminal.keys import LineEditor
from agentd_client.terminal.screen import wrap

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
CLIENT = Path(sanitize.__file__).parent


def test_every_control_format_and_separator_character_is_shown_escaped() -> None:
    missed = [
        f"U+{c:04X}"
        for c in range(0x110000)
        if unicodedata.category(chr(c)) in UNSAFE
        and (len(shown := sanitize.line(chr(c))) == 1 or not shown.isprintable())
    ]
    assert not missed, missed[:20]


def test_the_forms() -> None:
    assert sanitize.line("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert sanitize.line("one\ntwo\tthree\r") == "one\\ntwo\\tthree\\r"
    assert sanitize.line("\x9b31m \u202eevil \u200b \ufeff \U000e0041") == (
        "\\x9b31m \\u202eevil \\u200b \\ufeff \\U000e0041"
    )
    assert sanitize.text("out\r\nput\n\tindented\x07") == "out\nput\n\tindented\\x07"
    # Invalid UTF-8 and raw C1 bytes as their bytes; valid text as it is.
    assert sanitize.output(b"\x9b2J \xff caf\xc3\xa9 \xe2\x80\xae") == "\\x9b2J \\xff café \\u202e"
    # Nothing printable changes: backslashes, wide characters, combining marks.
    for fine in ("C:\\path\\x1b", "日本語", "e\u0301", "❤️", "│ ╰ …"):
        assert sanitize.line(fine) == fine
    hostile = "\x1b]52;c;aGk=\x07\u202e\n"
    assert sanitize.line(sanitize.line(hostile)) == sanitize.line(hostile)
    assert sanitize.hidden_count("a\x1b[1A\nb\u202e") == 2


def test_a_safe_stream_shows_escapes_whole_characters_and_all() -> None:
    raw = io.StringIO()
    stream = terminal.SafeStream(raw)  # type: ignore[arg-type]
    stream.write("title\x1b]0;x\x07\n")
    data = "é\x1b[2J\n".encode()
    for i in range(len(data)):  # a character split across writes is not mangled
        stream.buffer.write(data[i : i + 1])
    stream.buffer.write(b"\xff\n")
    stream.flush()
    assert raw.getvalue() == "title\\x1b]0;x\\x07\né\\x1b[2J\n\\xff\n"


def test_nothing_in_agentctl_writes_to_the_terminal_around_the_safe_streams() -> None:
    """Every print and write goes through sys.stdout/sys.stderr as terminal.install()
    leaves them; only terminal.py (the raw bytes a person asked for), screen.py (its own
    sequences around safe text) and keys.py (reading) touch a file descriptor, and no
    module keeps a stream from before install() (at import time)."""
    allowed = {"terminal.py", "screen.py", "keys.py"}
    found = []
    for path in sorted(CLIENT.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = ast.unparse(node) if isinstance(node, ast.Attribute) else ""
            if name in ("sys.__stdout__", "sys.__stderr__") or (
                name == "os.write" and path.name not in allowed
            ):
                found.append(f"{path.name}:{node.lineno} {name}")
        for stmt in tree.body:  # module level: runs at import, before install()
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(stmt):
                name = ast.unparse(node) if isinstance(node, ast.Attribute) else ""
                if name in ("sys.stdout", "sys.stderr") and not _in_function(stmt, node):
                    found.append(f"{path.name}:{node.lineno} module-level {name}")
    assert not found, found


def _in_function(root: ast.AST, target: ast.AST) -> bool:
    """Whether `target` sits inside a function (a method) below `root`."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    return any(
        isinstance(node, functions) and any(child is target for child in ast.walk(node))
        for node in ast.walk(root)
    )


def test_install_wraps_stderr_and_leaves_json_stdout_exact(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    terminal.install(stdout=False)
    print('{"k": "\\u001b"}')
    print("\x1b[2J", file=sys.stderr)
    assert out.getvalue() == '{"k": "\\u001b"}\n'
    assert err.getvalue() == "\\x1b[2J\n"


def test_a_burst_is_shown_whole_up_to_the_budget_then_skipped_to_its_latest_lines() -> None:
    outputs = Outputs("agentctl logs {id}")
    outputs.feed("t1", b"".join(b"line-%d\n" % i for i in range(1, 501)) + b"partial")
    shown = outputs.take(Budget(burst=2000, rate=0), prefix=False)
    assert shown == [f"line-{i}" for i in range(1, 501)]
    outputs.feed("t1", b" line\n" + b"".join(b"x-%d\n" % i for i in range(1, 300_001)))
    shown = outputs.take(Budget(burst=2000, rate=0), prefix=False, tail=20)
    assert shown[0] == "… 299,981 lines, see `agentctl logs t1`"
    assert shown[1:] == [f"x-{i}" for i in range(299_981, 300_001)]
    # Out of budget: only the count, until the budget refills.
    empty = Budget(burst=2000, rate=0)
    empty.spend(2000)
    outputs.feed("t1", b"y\n" * 10)
    assert outputs.take(empty, prefix=False) == ["… 10 lines, see `agentctl logs t1`"]
    outputs.feed("t1", b"\x1b[2Jend")
    outputs.end("t1")
    assert outputs.take(Budget(), prefix=True) == ["t1│ \\x1b[2Jend"]


def test_typed_answers_take_printable_keys_only() -> None:
    editor = LineEditor()
    assert editor.feed(b"y\x1b[A\x1b[Bes\x7f\x7fes\x15n") == []
    assert editor.text == "n"
    assert editor.feed("\u202eo\r".encode()) == ["no"]
    assert editor.feed(b"a\nb\n") == ["a", "b"]


def test_wrap_counts_columns() -> None:
    assert wrap("abcdef", 4) == ["abcd", "ef"]
    assert wrap("日本語日本", 4) == ["日本", "語日", "本"]
    assert wrap("", 4) == [""]


def test_width_counts_what_a_terminal_draws() -> None:
    assert sanitize.width("abc") == 3
    assert sanitize.width("日本") == 4
    assert sanitize.width("e\u0301") == 1  # a combining accent adds nothing
    # An emoji with a skin-tone modifier is one wide character, not two.
    assert sanitize.width("\U0001f44d\U0001f3fd") == 2
    # Conjoining Hangul jamo (choseong, jungseong, jongseong) make one wide syllable.
    assert sanitize.width("\u1100\u1161\u11a8") == 2
    assert sanitize.width("\U0001f1eb\U0001f1f7") == 2  # a flag: two regional indicators


def test_wrap_never_cuts_a_character_a_terminal_draws_as_one() -> None:
    thumbs = "\U0001f44d\U0001f3fd"
    assert wrap(thumbs * 3, 4) == [thumbs * 2, thumbs]
    syllable = "\u1100\u1161\u11a8"
    assert wrap("a" + syllable * 2, 3) == ["a" + syllable, syllable]
