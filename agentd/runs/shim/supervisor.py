"""The shim: a small supervisor per sandboxed run, which owns the process, its output file
and its exit status, so that a background task outlives the daemon (containerd's shim).

    daemon --(SEQPACKET + SCM_RIGHTS)--> shim (setsid) --posix_spawn--> setpriv ->
    unshare -> prlimit -> bwrap (the chain of agentd_sandbox.runner); each shim forked,
    before it is needed, by a forkserver (agentd/runs/shim/forkserver.py: `python -m
    agentd.runs.shim FD`, warm, single-threaded, started once per daemon)

The shim is the sandbox chain's parent: it holds bwrap's lifeline (the info pipe) and is
what setpriv's parent-death signal watches, so the sandbox dies with the shim and no
orphan survives its spawner; and it waits for the exit status itself. It
copies the command's output into the bounded output file (head, marker, tail: tasks.
OutputFile) out of the daemon's process, and tells the daemon over its control
connection how far the file is written (coalesced), and the end; a terminal's output
it also sends as it reads it (LIVE, agentd/runs/shim/protocol.py), so a keystroke's
echo reaches its followers without a read of the file.

A plain run dies with its daemon: when its last control connection closes the shim
kills the sandbox. A run the daemon made a task ("task" op, with a directory in the
daemon's private state dir) lives on: the shim listens on `ctl.sock` there for the
next daemon, and at the end writes `status.json` (exit code, end time) there before it
exits. Nothing in that directory is reachable from the sandbox; the output the shim
copies is treated as bytes only.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from agentd.changes import fanotify, reader
from agentd.runs.output.file import OutputFile
from agentd.runs.shim import links, terminal
from agentd.runs.shim.protocol import (
    INPUT,
    LINK,
    LINK_HEADER,
    LIVE,
    LIVE_HEADER,
    LIVE_MAX,
    MAX_MESSAGE,
    SHIM_NAME,
    SOCKET_NAME,
    STATUS_NAME,
    start_time,
    write_json,
)

_READ_SIZE = 1 << 20
# A PTY gives a few KiB a read: a smaller buffer comes from the heap, where a 1 MiB one
# is a fresh mapping (mmap, page faults, mremap) on every keystroke's echo.
_PTY_READ_SIZE = 1 << 16
_F_SETPIPE_SZ = 1031
# Seconds between output updates sent to the daemon while output flows.
UPDATE_INTERVAL = 0.01
# How long the end waits for a busy daemon to take it.
EXIT_SEND_SECONDS = 60.0
# Seconds between the state updates of a terminal whose output went out live (they
# only carry its last line then); when a live send could not go, the fast interval.
LIVE_STATE_INTERVAL = 0.05
# Python ignores SIGPIPE (and the forkserver SIGINT, SIGCHLD): the command gets the
# defaults, as subprocess's restore_signals gives them.
_DEFAULTED = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    return found


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Shim:
    """One run: spawn, copy output, answer control connections, record the end."""

    def __init__(self, req: dict[str, Any], fds: list[int]) -> None:
        ctrl, out_fd, self.pipe_r, pipe_w, self.lifeline, *rest = fds
        hold = int(req.get("hold", 0))
        watch = int(req.get("watch", 0))
        self.held, watch_fds, pass_fds = (
            rest[:hold],
            rest[hold : hold + watch],
            rest[hold + watch :],
        )
        self.req = req
        self.out = OutputFile(req["path"], req["limit"], tail=req["tail"], fd=out_fd)
        self.sel = selectors.DefaultSelector()
        self.controllers: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.dir_fd = -1
        self.task = False
        self.killed = False
        self.pid = -1
        self.pidfd = -1
        self.code: int | None = None
        self.eof = False
        self.deadline = time.monotonic() + req["wall"] if req.get("wall") else None
        self.dirty = False
        self.sent_at = 0.0
        self.reader: reader.Reader | None = None
        size = req.get("pty")
        pty_size = (size[0], size[1]) if isinstance(size, list) and len(size) == 2 else None
        self.input = terminal.Input(pty_size, bool(req.get("stdin")))
        self.unacked = 0  # input written and not yet acknowledged (under ACK_BYTES)
        self.interval = terminal.UPDATE_INTERVAL if self.input.pty else UPDATE_INTERVAL
        # A terminal's output is sent as it is read (LIVE); `lagging`: some could not be,
        # so the next state update is due at the fast interval.
        self.live = self.input.pty
        self.lagging = False
        # Terminal clients the daemon handed over (links.py).
        self.links = links.Links(
            register=lambda sock, link: self.sel.register(sock, selectors.EVENT_READ, link),
            unregister=self.sel.unregister,
            write_input=self._link_input,
            pending=lambda: len(self.input.pending),
            file_bytes=self.out.read_back,
        )
        self._add_controller(socket.socket(fileno=ctrl))
        if len(watch_fds) == 2:
            cap = req.get("watch_cap")
            group, log = watch_fds
            self._watch(group, log, cap if isinstance(cap, int) and cap > 0 else reader.LOG_CAP)
        self._spawn(req["argv"], pipe_w, pass_fds, req["targets"])

    def _watch(self, group: int, log: int, cap: int) -> None:
        """Start the run's change reader (agentd/changes/reader.py): the chain spawned next
        lands in its pid namespace. If it cannot start, the log says events were lost,
        and the daemon scans instead."""
        try:
            self.reader = reader.start(group, log, cap)
        except OSError:
            with contextlib.suppress(OSError):
                os.write(log, fanotify.marker(fanotify.MARK_LOST))
        finally:
            os.close(group)
            os.close(log)

    def _spawn(self, argv: list[str], pipe_w: int, pass_fds: list[int], targets: list[int]) -> None:
        """posix_spawn the chain with the daemon's fds at the numbers its argv names."""
        high = max([2, *targets]) + 1
        moved = []
        for fd in (pipe_w, *pass_fds):
            moved.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, high))
            os.close(fd)
        inp = self.input
        out = inp.child_fd if inp.pty else moved[0]
        stdin: tuple[Any, ...] = (
            (os.POSIX_SPAWN_DUP2, inp.child_fd, 0)
            if inp.wanted
            else (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)
        )
        actions: list[tuple[Any, ...]] = [
            stdin,
            (os.POSIX_SPAWN_DUP2, out, 1),
            (os.POSIX_SPAWN_DUP2, out, 2),
            *((os.POSIX_SPAWN_DUP2, m, t) for m, t in zip(moved[1:], targets, strict=True)),
        ]
        with contextlib.suppress(OSError):  # a bigger pipe is an optimisation only
            fcntl.fcntl(self.pipe_r, _F_SETPIPE_SZ, _READ_SIZE)
        try:
            self.pid = os.posix_spawn(
                argv[0], argv, {}, file_actions=actions, setsid=True, setsigdef=_DEFAULTED
            )
            self.pidfd = os.pidfd_open(self.pid)
        except OSError as exc:
            self.out.write(f"cannot start bwrap: {exc}\n".encode())
            self.code, self.eof = 127, True
        finally:
            for fd in moved:
                os.close(fd)
            inp.spawned()
        if inp.pty:
            # Output comes from the PTY (one stream); the daemon's pipe has no writer.
            os.close(self.pipe_r)
            self.pipe_r = inp.out_fd
        if self.pidfd >= 0:
            self.sel.register(self.pidfd, selectors.EVENT_READ, "exit")
            self.sel.register(self.pipe_r, selectors.EVENT_READ, "out")
        else:
            inp.finish()
        if self.req.get("dir"):
            self._become_task(self.req["dir"])

    # control connections
    def _add_controller(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        self.controllers.append(conn)
        self.sel.register(conn, selectors.EVENT_READ, "ctrl")

    def _drop_controller(self, conn: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn)
            self.controllers.remove(conn)
        self.links.controller_gone(conn)
        conn.close()
        if not self.controllers and not self.task:
            self.kill()  # a plain run dies with its daemon

    def _send(self, conn: socket.socket, body: dict[str, Any], wait: float = 0) -> None:
        """`wait`: seconds to wait for room (a daemon reads at most ~10 messages behind)."""
        data = json.dumps(body).encode()
        try:
            if wait:
                conn.settimeout(wait)
            conn.send(data)
        except (BlockingIOError, TimeoutError):
            pass  # a busy daemon gets the next update, which carries everything
        except OSError:
            self._drop_controller(conn)
        finally:
            if wait:
                with contextlib.suppress(OSError):
                    conn.setblocking(False)

    def _send_all(self, body: dict[str, Any], wait: float = 0) -> None:
        for conn in list(self.controllers):
            self._send(conn, body, wait)

    def _state(self) -> dict[str, Any]:
        out = self.out
        return {"size": out.size, "total": out.total, "line": out.last_line, **self.input.state()}

    def _on_ctrl(self, conn: socket.socket) -> None:
        try:
            data, ancillary, _, _ = conn.recvmsg(
                MAX_MESSAGE, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
            )
        except BlockingIOError:
            return
        except OSError:
            data, ancillary = b"", []
        fds = links.receive_fds(ancillary) if ancillary else []
        if not data:
            links.close_all(fds)
            self._drop_controller(conn)
            return
        if data[0] == INPUT:
            links.close_all(fds)
            self._on_input(data[1:])
            return
        if data[0] == LINK:
            self._on_link(conn, data, fds)
            return
        links.close_all(fds)
        try:
            msg = json.loads(data)
            op = msg["op"]
        except (ValueError, KeyError, TypeError):
            return
        if op == "kill":
            self.kill()
        elif op in ("input", "close_input", "signal", "resize"):
            self._on_input_op(op, msg)
        elif op == "task":
            self._become_task(str(msg["dir"]))
        elif op == "unlink" and isinstance(msg.get("link"), int):
            self.links.unlink(msg["link"])
        elif op == "hello":
            state = {"ev": "state", "pid": self.pid, "binary_input": True, **self._state()}
            state["link"] = bool(self.input.pty)
            self._send(conn, state, wait=5)

    def _on_input_op(self, op: str, msg: dict[str, Any]) -> None:
        """A person's input, signal or size (agentd/runs/shim/terminal.py); each answered."""
        inp = self.input
        if op == "input":
            try:
                data = base64.b64decode(str(msg["data"]), validate=True)
            except (ValueError, KeyError):
                data = b""
            self._on_input(data)
        elif op == "close_input":
            inp.close()
            self._write_input()
            self._send_all({"ev": "input", **inp.state()})
        elif op == "signal":
            sig = terminal.SIGNALS.get(str(msg.get("sig")))
            if sig == signal.SIGKILL:
                self.kill()
            elif sig is not None and self.code is None and self.pid > 0:
                terminal.signal_tree(self.pid, sig)
        elif op == "resize":
            inp.resize(msg.get("rows"), msg.get("cols"))
            self._send_all({"ev": "input", **inp.state()})

    def _on_link(self, conn: socket.socket, data: bytes, fds: list[int]) -> None:
        """A terminal client handed over by the daemon; refused (closed: the daemon hands
        over a copy and keeps its own) unless this is a live terminal."""
        if len(fds) != 1 or len(data) != LINK_HEADER.size:
            links.close_all(fds)
            return
        _, link_id, offset = LINK_HEADER.unpack(data)
        if not self.live or self.code is not None or offset > self.out.size:
            os.close(fds[0])
            body = {"ev": "unlinked", "link": link_id, "offset": offset, "bytes": 0}
            self._send(conn, {**body, "reason": "refused"}, wait=5)
            return
        self.links.add(conn, link_id, fds[0], offset, self.out.size)

    def _link_input(self, data: bytes) -> int:
        """Input from a linked client: as the daemon's, but acknowledged to nobody (the
        daemon did not send it, so its window does not count it)."""
        taken = self.input.add(data) if self.code is None else 0
        self.unacked -= taken
        self._write_input()
        return taken

    def _on_input(self, data: bytes) -> None:
        """Input bytes: queued and written through at once (as much as the terminal takes)."""
        if self.code is None and self.input.add(data) < len(data):
            self._send_all({"ev": "wrote", "n": len(data)})  # refused: not held here
        self._write_input()

    def _write_input(self) -> None:
        inp = self.input
        fd = inp.fd
        self.unacked += inp.flush()
        if self.unacked >= terminal.ACK_BYTES:
            self._send_all({"ev": "wrote", "n": self.unacked})
            self.unacked = 0
        want = bool(inp.pending) and inp.fd >= 0
        registered = self.sel.get_map().get(fd) is not None if fd >= 0 else False
        if want and not registered:
            self.sel.register(inp.fd, selectors.EVENT_WRITE, "in")
        elif registered and (not want or inp.fd != fd):
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(fd)
        if fd >= 0 and inp.fd < 0:
            self._send_all({"ev": "input", **inp.state()})

    def _become_task(self, path: str) -> None:
        if self.task:
            return
        self.task = True
        self.dir_fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Through the directory's fd: a state dir's path may be past sun_path's 108 bytes.
        listener.bind(f"/proc/self/fd/{self.dir_fd}/{SOCKET_NAME}")
        listener.listen(8)
        listener.setblocking(False)
        self.listener = listener
        self.sel.register(listener, selectors.EVENT_READ, "listen")
        write_json(self.dir_fd, SHIM_NAME, {"pid": os.getpid(), "start": start_time(os.getpid())})

    def _on_accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        uid = int.from_bytes(creds[4:8], sys.byteorder)
        if uid != os.geteuid():  # only the daemon's own uid steers a task
            conn.close()
            return
        self._add_controller(conn)

    # the run
    def kill(self) -> None:
        if self.code is not None or self.pid < 0:
            return
        self.killed = True
        for pid in (*_children(self.pid), self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _on_output(self) -> None:
        try:
            chunk = os.read(self.pipe_r, _PTY_READ_SIZE if self.live else _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # a PTY whose every slave end closed: EIO
            chunk = b""
        if not chunk:
            self.eof = True
            self.sel.unregister(self.pipe_r)
            return
        out = self.out
        at = out.size
        if self.links.links:
            if out.fits(len(chunk)):
                self.links.output(at, chunk)  # a linked client's echo first
            else:
                self.links.hand_all_back()  # past the file's head: the daemon reads on
        out.write(chunk)
        self.dirty = True
        if self.live and self.controllers:
            if out.size - at == len(chunk) and self._send_live(at, chunk):
                return
            self.lagging = True

    def _send_live(self, at: int, chunk: bytes) -> bool:
        """`chunk`, written to the file at `at`, to every controller now, in frames of at
        most LIVE_MAX; False when one could not take it (a busy daemon: the file and
        the next state update carry it)."""
        sent = True
        view = memoryview(chunk)
        for conn in list(self.controllers):
            for start in range(0, len(chunk), LIVE_MAX):
                part = view[start : start + LIVE_MAX]
                header = LIVE_HEADER.pack(LIVE, at + start, self.out.total)
                try:
                    conn.sendmsg([header, part])
                except BlockingIOError:
                    sent = False
                    break
                except OSError:
                    self._drop_controller(conn)
                    break
        return sent

    def _on_exit(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self.code = _exit_code(status)
        self.sel.unregister(self.pidfd)
        os.close(self.pidfd)
        for fd in (self.lifeline, *self.held):
            os.close(fd)
        if self.input.fd >= 0 and self.sel.get_map().get(self.input.fd) is not None:
            self.sel.unregister(self.input.fd)
        self.input.finish()

    def run(self) -> int:
        while self.code is None or not self.eof:
            timeout = None
            now = time.monotonic()
            interval = self._interval()
            if self.dirty:
                timeout = max(0.0, self.sent_at + interval - now)
            if self.deadline is not None:
                left = max(0.0, self.deadline - now)
                timeout = left if timeout is None else min(timeout, left)
            for key, _ in self.sel.select(timeout):
                what = key.data
                if what == "out":
                    self._on_output()
                elif what == "exit":
                    self._on_exit()
                elif what == "ctrl" and isinstance(key.fileobj, socket.socket):
                    self._on_ctrl(key.fileobj)
                elif what == "listen":
                    self._on_accept()
                elif what == "in":
                    self._write_input()
                elif isinstance(what, links.Link):
                    self.links.readable(what)
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline and self.code is None:
                self.deadline = None
                self.kill()
            if self.dirty and now - self.sent_at >= self._interval():
                self.dirty, self.lagging, self.sent_at = False, False, now
                self._send_all({"ev": "out", **self._state()})
        return self._finish()

    def _interval(self) -> float:
        return LIVE_STATE_INTERVAL if self.live and not self.lagging else self.interval

    def _finish(self) -> int:
        """The end: the file completed, the status recorded (a task's on disk), told."""
        assert self.code is not None
        self.links.hand_all_back()  # the daemon sends the rest and the end
        if self.reader is not None:
            self.reader.finish()  # the change log is complete before the end is told
        out = self.out
        out.finish(self.code if self.task else None)
        end = {
            "ev": "exit",
            "code": self.code,
            "killed": self.killed,
            "ended_ms": int(time.time() * 1000),
            "task": self.task,
            "size": out.size,
            "total": out.total,
            "written": out.written,
            "tail_at": out.tail_at,
            "tail_len": out.tail_len,
            "line": out.last_line,
        }
        if self.task:
            if self.listener is not None:
                self.listener.close()
                with contextlib.suppress(OSError):
                    os.unlink(SOCKET_NAME, dir_fd=self.dir_fd)
            write_json(self.dir_fd, STATUS_NAME, end)
        # The end must reach a daemon that is alive, however loaded (a lost one reads as
        # the shim vanished, 137); a gone daemon fails the send at once.
        self._send_all(end, wait=EXIT_SEND_SECONDS)
        return 0
