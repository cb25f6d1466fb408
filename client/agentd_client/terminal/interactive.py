"""A terminal linked to a task in the sandbox: its output shown, the person's keys sent,
the terminal's size followed; for `agentctl exec` and `agentctl attach-task`.

Where the daemon offers its terminal socket (core/terminal_channel.py: a daemon on
this machine), keys and output go over it, off gRPC: the main thread reads the person's
keys (and a wake-up pipe: SIGWINCH, the output's end) and sends them at once, one
thread follows the output; a slow daemon holds the keys back through the socket.
Otherwise three threads, each blocking on one thing: the main one as above, one follows
the task's output (ReadOutput), one carries the keys to the daemon (a WriteInput stream
fed from a queue, so a slow daemon holds the keys back through gRPC's flow control,
never this process's memory beyond the queue's bound). However it ends, the link says
how (Outcome), the threads stop, and the terminal is given back (rawterm.raw_mode).

Ends: the task ended (its exit code); the person detached (the task runs on); the
connection was lost (a daemon restart: the task runs on under its shim, re-attach); the
person pressed Ctrl-C without a raw terminal (sent on as SIGINT for `exec`, once; a
second leaves); agentctl killed (the daemon sees the stream drop: a task `exec` started
is hung up, one `attach-task` joined runs on).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc

from agentd_client.core.errors import from_grpc
from agentd_client.core.terminal_channel import TerminalChannel, open_channel
from agentd_client.terminal import hangup, rawterm
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.ttyfilter import TerminalFilter
from agentd_client.v1 import agentd_pb2 as pb

READ_SIZE = 65536
# Keys read and not yet taken by the daemon: past this the person's terminal waits.
MAX_QUEUED = 64
# In the key queue (where keys are never empty): close the task's stdin here.
CLOSE = b""


@dataclass
class Outcome:
    how: str  # "ended", "detached", "lost", "interrupted"
    exit_code: int | None = None
    status: str = ""
    error: str = ""


class TaskLink:
    """One task's output on this terminal, and this terminal's keys to the task."""

    def __init__(
        self,
        client: Any,
        session_id: str,
        task_id: str,
        *,
        raw: bool,
        send_input: bool,
        own: bool,
        detach_keys: bytes,
        offset: int = 0,
        close_at_eof: bool = False,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.task_id = task_id
        self.raw = raw
        self.send_input = send_input
        self.own = own
        self.close_at_eof = close_at_eof
        self.offset = offset
        self.matcher = rawterm.DetachMatcher(detach_keys)
        self.keys: queue.Queue[bytes | None] = queue.Queue(MAX_QUEUED)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._output_end: str | None = None
        self._output_error = ""
        self._detached = False
        self._interrupts = 0
        self._end_line = EndLine()
        self._input_gone = False
        # A raw link's output to a terminal: through the allow-list, its modes undone.
        self.screen_filter = TerminalFilter()
        # The daemon's terminal socket, when it offers it (else gRPC's streams).
        self.channel: TerminalChannel | None = None

    def _open_channel(self) -> None:
        try:
            self.channel = open_channel(
                self.client,
                self.session_id,
                self.task_id,
                offset=self.offset,
                input=self.send_input,
                hangup_on_drop=self.own,
            )
        except grpc.RpcError:
            self.channel = None  # the gRPC streams say what is wrong, as before

    def _chunks(self) -> Any:
        """The output as (data, done) pairs, from the terminal socket or ReadOutput."""
        if self.channel is not None:
            for out in self.channel.outputs():
                yield out.data, out.done
            return
        for chunk in self.client.stub.ReadOutput(
            pb.ReadOutputRequest(
                session_id=self.session_id, id=self.task_id, offset=self.offset, follow=True
            )
        ):
            yield chunk.data, chunk.done

    # the threads
    def _follow(self) -> None:
        # On a terminal the bytes go through the sanitiser unless it is raw (a person
        # asked for the task's terminal: then through the terminal filter); to a pipe or
        # file, as printed (docker exec's way).
        on_tty = terminal.is_tty()
        raw = self.raw or not on_tty
        filtered = self.raw and on_tty
        out = terminal.raw_stdout() if raw else sys.stdout.buffer
        try:
            for data, done in self._chunks():
                shown = self._end_line.feed(data, done)
                if shown and filtered:
                    shown = self.screen_filter.feed(shown)
                if shown:
                    out.write(shown)  # sanitized unless raw (terminal.py)
                    out.flush()
                if done:
                    self._output_end = "ended"
                    break
            else:
                self._output_end = "ended"
        except grpc.RpcError as exc:
            self._output_end = "lost" if exc.code() != grpc.StatusCode.CANCELLED else "cancelled"
            self._output_error = str(from_grpc(exc))
        except ConnectionError as exc:  # the terminal socket: the daemon went away
            self._output_end = "lost"
            self._output_error = str(exc) or "the connection to agentd was lost"
        except OSError:
            self._output_end = "lost"  # our own output went away (a hang-up)
        finally:
            self._wake(b"e")

    def _requests(self) -> Any:
        yield pb.TaskInput(
            session_id=self.session_id, task_id=self.task_id, hangup_on_drop=self.own
        )
        while (data := self.keys.get()) is not None:
            if not data:  # CLOSE
                yield pb.TaskInput(close_stdin=True)
            else:
                yield pb.TaskInput(data=data)
        if self._detached:
            yield pb.TaskInput(detach=True)

    def _write(self) -> None:
        try:
            self.client.stub.WriteInput(self._requests())
        except grpc.RpcError:
            pass
        finally:
            self._input_gone = True  # keys typed from now on go nowhere: drop them

    def _wake(self, why: bytes) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(why)

    # the person's side
    def _resize(self) -> None:
        now = rawterm.size(0)
        if now is None:
            return
        if self.channel is not None:
            with contextlib.suppress(OSError):
                self.channel.resize(*now)
            return
        with contextlib.suppress(grpc.RpcError):
            self.client.stub.ResizeTask(
                pb.ResizeTaskRequest(
                    session_id=self.session_id,
                    task_id=self.task_id,
                    size=pb.TerminalSize(rows=now[0], cols=now[1]),
                )
            )

    def _typed(self, data: bytes) -> bool:
        """Keys read from the person's terminal; True once they detached."""
        if self.raw:
            data, detached = self.matcher.feed(data)
        else:
            detached = False
        if data and self.send_input and self.channel is not None and not self._input_gone:
            try:  # blocks while the daemon is behind: the person's keys wait, not memory
                self.channel.send(data)
            except OSError:
                self._input_gone = True  # the task ended or the daemon went: drop them
            return detached
        while data and self.send_input and not self._input_gone:
            try:  # waits while the daemon is behind: the person's keys wait, not memory
                self.keys.put(data, timeout=0.5)
                break
            except queue.Full:
                continue
        return detached

    def _stdin_ended(self) -> None:
        if self.close_at_eof and self.channel is not None:
            with contextlib.suppress(OSError):
                self.channel.close_stdin()
        elif self.close_at_eof:
            self.keys.put(CLOSE)  # after the keys before it, on the same stream

    def _loop(self) -> str:
        reading = self.send_input or self.raw
        while True:
            fds: list[Any] = [self._wake_r, *([0] if reading else [])]
            try:
                ready, _, _ = select.select(fds, [], [])
            except InterruptedError:
                continue
            if self._wake_r in ready:
                woke = self._wake_r.recv(64)
                if b"w" in woke:
                    self._resize()
                if self._output_end is not None:
                    return self._output_end
            if 0 in ready:
                data = os.read(0, READ_SIZE)
                if not data:
                    reading = False
                    self._stdin_ended()
                elif self._typed(data):
                    self._detached = True
                    return "detached"

    def _interrupted(self) -> bool:
        """Ctrl-C on a terminal that is not raw: SIGINT to a task this client started
        (once; a second Ctrl-C leaves); for one it joined, leave. True: leave."""
        self._interrupts += 1
        if not self.own or self._interrupts > 1:
            return True
        with contextlib.suppress(grpc.RpcError):
            self.client.stub.SignalTask(
                pb.SignalTaskRequest(session_id=self.session_id, task_id=self.task_id, signal="INT")
            )
        return False

    def run(self) -> Outcome:
        self._open_channel()
        follower = threading.Thread(target=self._follow, name="task-output", daemon=True)
        writer = threading.Thread(target=self._write, name="task-input", daemon=True)
        old_winch = signal.signal(signal.SIGWINCH, lambda *_: self._wake(b"w"))
        follower.start()
        # An exec's stream (or terminal socket) holds the task to it.
        if self.channel is None and (self.send_input or self.own):
            writer.start()
        how = "interrupted"
        try:
            if self.raw:
                self._resize()  # this terminal's size, if another had it before
                with rawterm.raw_mode(0, self.screen_filter.restore):
                    how = self._loop()
            else:
                while True:
                    try:
                        how = self._loop()
                        break
                    except hangup.Hangup:
                        raise  # SIGTERM, SIGHUP: agentctl's caller is gone; so are we
                    except KeyboardInterrupt:
                        if self._interrupted():
                            how = "interrupted"
                            break
        finally:
            signal.signal(signal.SIGWINCH, old_winch)
            if self.channel is not None:
                self._close_channel(self.channel)
            else:
                with contextlib.suppress(queue.Full):
                    self.keys.put(None, timeout=1)
                if how in ("detached", "ended"):
                    writer.join(timeout=5)  # the detach reaches the daemon before we go
        return self._outcome(how)

    def _close_channel(self, channel: TerminalChannel) -> None:
        if self._detached:
            with contextlib.suppress(OSError):
                channel.detach()  # before the close: the daemon lets the task run on
        channel.close()

    def _outcome(self, how: str) -> Outcome:
        if how != "ended":
            return Outcome(how, error=self._output_error)
        # The output's end can reach us a moment before the task's record of it.
        for _ in range(100):
            try:
                term = self.client.stub.GetTaskTerminal(
                    pb.TaskRef(session_id=self.session_id, task_id=self.task_id)
                )
            except grpc.RpcError as exc:
                return Outcome("lost", error=str(from_grpc(exc)))
            if term.status != "running":
                code = term.exit_code if term.has_exit_code else None
                return Outcome("ended", code, term.status)
            time.sleep(0.02)
        return Outcome("ended", None, "running")


class EndLine:
    """Keeps the daemon's end line ("\n[exited with code N]\n", which a task's output
    file ends with) off the person's screen and out of a pipe: bytes that may be its start
    are held until the next ones (or the end) show whether they are."""

    MARK = b"\n[exited with code "

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes, done: bool) -> bytes:
        buf = self._held + data
        self._held = b""
        if done:
            return buf[: -len(m.group(0))] if (m := _END.search(buf)) else buf
        # The end line is short: only a newline near the end can start it.
        start = buf.find(b"\n", max(0, len(buf) - len(self.MARK) - 24))
        while start >= 0:
            if _could_end(buf[start:]):
                self._held = buf[start:]
                return buf[:start]
            start = buf.find(b"\n", start + 1)
        return buf


_END = re.compile(rb"\n\[exited with code -?\d+\]\n\Z")


def _could_end(tail: bytes) -> bool:
    """`tail` is the end line, or the start of one."""
    mark = EndLine.MARK
    if len(tail) <= len(mark):
        return mark.startswith(tail)
    rest = tail[len(mark) :]
    return tail.startswith(mark) and re.fullmatch(rb"-?\d*(\]\n?)?", rest) is not None
