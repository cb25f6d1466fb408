"""A burst of output on an attached terminal, and a prompt raised in the middle of it
(issue 19.1): this checkout's `agentctl attach` beside a baseline's, in the same run.

    .venv/bin/python bench/attach_burst.py [--baseline-ref main] [--lines 50000,300000]
                                           [--terminal fast|emulator] [--limit 180]

A background task (read-only, so it runs unasked) prints LINES lines; once the first of
them is on the terminal, a Write asks for permission. Measured, for each client:
- prompt: from the Write's start until its question ("Allow? ") reaches the terminal;
- caught up: from the task's start until its last line reaches the terminal;
- on screen (emulator only): whether the prompt is still on the screen then, or was
  scrolled away by the output after it;
- bytes: how much the client wrote to the terminal.
The prompt is answered once the burst is caught up (a person answers what they see); the
daemon denies an ask nobody answers in 60 s, so a late one is "not answered". The
terminal is a real pty; `fast` drains it as fast as it can (the best terminal there is),
`emulator` also renders every byte with
a terminal emulator (pyte), as a real one parses everything it is sent. Both clients talk
to the same daemon (this checkout's). A figure past --limit seconds is reported as such
(the baseline can take minutes).

The baseline is the client of another git ref, unpacked with `git archive` into a temp
dir that shadows this checkout's agentd_client on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import ROOT, daemon, workspace

from agentd_client import Client

ROWS, COLS = 40, 160


def baseline_client(ref: str) -> str:
    """A directory whose agentd_client is `ref`'s client/."""
    out = tempfile.mkdtemp(prefix="agentd-bench-baseline-")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "client"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", out], input=archive, check=True)
    os.symlink(os.path.join(out, "client"), os.path.join(out, "agentd_client"))
    return out


class Pty:
    """agentctl attach on a pty of ROWS x COLS; bytes read as a terminal would."""

    def __init__(self, argv: list[str], env: dict[str, str], emulator: bool) -> None:
        import fcntl
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            ["setsid", "--ctty", *argv], stdin=slave, stdout=slave, stderr=slave, env=env
        )
        os.close(slave)
        self.raw = bytearray()
        self.stream: Any = None
        if emulator:
            import pyte

            self.stream = pyte.ByteStream(pyte.Screen(COLS, ROWS))

    def read_until(self, needle: bytes, start: int, deadline: float) -> float | None:
        """Read until `needle` is in what was read from offset `start`; when, or None."""
        while True:
            at = self.raw.find(needle, max(0, start - len(needle)))
            if at >= 0:
                return time.monotonic()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            start = len(self.raw)
            self.raw += chunk
            if self.stream is not None:
                self.stream.feed(chunk)

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


def one_run(
    socket: str, argv: list[str], env: dict[str, str], lines: int, emulator: bool, limit: float
) -> dict[str, Any]:
    ws = workspace()
    try:
        with Client(socket) as c:
            sid = c.create_session(ws, permission_mode="default").id
            term = Pty([*argv, "--socket", socket, "attach", sid], env, emulator)
            try:
                c.run_tool(sid, "Glob", {"pattern": "bench-ready"})
                if term.read_until(b"bench-ready", 0, time.monotonic() + 30) is None:
                    raise RuntimeError(f"attach did not start: {bytes(term.raw[-500:])!r}")
                mark = len(term.raw)
                started = time.monotonic()
                command = f"seq -f 'burst-line-%.0f' 1 {lines}"  # done in well under a second
                r = c.run_tool(sid, "Bash", {"command": command, "run_in_background": True})
                assert not r.is_error, r.text
                deadline = started + limit
                term.read_until(b"burst-line-", mark, deadline)
                mark = len(term.raw)
                asked_at = time.monotonic()
                out: dict[str, Any] = {}
                writer = threading.Thread(
                    target=lambda: out.update(
                        r=c.run_tool(sid, "Write", {"file_path": "w.txt", "content": "w"})
                    )
                )
                writer.start()
                shown = term.read_until(b"Allow? ", mark, asked_at + limit)
                last = f"burst-line-{lines}\r\n".encode()
                caught_up = term.read_until(last, 0, started + limit)
                # Is the prompt still there once the burst is shown, or scrolled away?
                on_screen = None
                if term.stream is not None:
                    display = term.stream.listener.display
                    on_screen = any("Allow? " in line for line in display)
                if shown is not None:
                    term.send(b"y\n")
                writer.join(limit)
                return {
                    "prompt": None if shown is None else shown - asked_at,
                    "caught_up": None if caught_up is None else caught_up - started,
                    "on_screen": on_screen,
                    "bytes": len(term.raw),
                    "answered": "r" in out and not out["r"].is_error,
                }
            finally:
                term.close()
                c.close_session(sid)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def fmt(seconds: float | None, limit: float) -> str:
    return f"> {limit:.0f} s" if seconds is None else f"{seconds:.2f} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline-ref", default="main", help="the git ref whose client to compare")
    p.add_argument("--lines", default="50000,300000")
    p.add_argument("--terminal", choices=["fast", "emulator"], default="fast")
    p.add_argument("--limit", type=float, default=180.0, help="seconds to wait at most")
    args = p.parse_args()
    base_dir = baseline_client(args.baseline_ref)
    agentctl = str(Path(sys.executable).parent / "agentctl")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    plain.update(TERM="xterm-256color")
    clients = {
        f"baseline ({args.baseline_ref})": (
            [
                sys.executable,
                "-c",
                "import sys; from agentd_client.cli.main import main; sys.exit(main())",
            ],
            {**plain, "PYTHONPATH": base_dir},
        ),
        "this checkout": ([agentctl], plain),
    }
    emulator = args.terminal == "emulator"
    print(f"terminal: {args.terminal} ({ROWS}x{COLS} pty); limit {args.limit:.0f} s")
    print(
        f"{'lines':>8}  {'client':24} {'prompt shows':>13} {'caught up':>11} "
        f"{'on screen':>10} {'bytes':>12}"
    )
    try:
        with daemon() as d:
            for lines in [int(n) for n in args.lines.split(",")]:
                results = {}
                for name, (argv, env) in clients.items():
                    results[name] = r = one_run(d.socket, argv, env, lines, emulator, args.limit)
                    seen = {None: "-", True: "yes", False: "NO"}[r["on_screen"]]
                    print(
                        f"{lines:>8}  {name:24} {fmt(r['prompt'], args.limit):>13} "
                        f"{fmt(r['caught_up'], args.limit):>11} {seen:>10} {r['bytes']:>12,}"
                        + ("" if r["answered"] else "  (prompt not answered in time)"),
                        flush=True,
                    )
                before, after = results.values()
                for key in ("prompt", "caught_up"):
                    b = before[key] if before[key] is not None else args.limit
                    if after[key]:
                        more = ">" if before[key] is None else ""
                        print(f"{'':10}{key}: baseline / this = {more}{b / after[key]:.2g}")
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
