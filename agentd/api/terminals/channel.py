"""One connection of the terminal socket: a task's terminal, both ways, off gRPC (or,
when its token is an OpenForward's, a forward stream: handed to forward.py at READY).

Nothing the peer sends is taken before its first frame, a HELLO with a token, is
checked against the connection's peer credentials (tokens.py); a refused connection
is told why and closed. Then:
- input: INPUT frames go to the task's shim as they arrive, straight from the
  socket's callback while the shim's input window has room (a keystroke waits for no
  task), else in order through a copier that waits for the shim's acknowledgements; past
  INPUT_HIGH bytes queued the socket is not read (the client waits, as gRPC's flow
  control makes a WriteInput stream wait);
- output: the output from the token's offset, as ReadOutput serves it (replay from the
  file, then the live bytes the shim relayed), as OUTPUT frames with their offsets;
  once caught up with a live terminal, the shim's bytes are sent from the callback that
  reads them (ShimOutput.relays), no task woken per echo;
  a client that does not read holds at most OUTPUT_HIGH bytes in the socket's buffer
  and the chunk being sent: the task and other terminals go on, and it catches up from
  the file when it reads again;
- RESIZE, CLOSE_STDIN and DETACH as the gRPC calls do; the task's events are recorded
  with the identity that asked for the token.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
import os
import socket
import sys
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, cast

from agentd.api.terminals.forward import ForwardConnection, Streams
from agentd.api.terminals.tokens import ForwardGrant, Grant, Refused, TerminalTokens
from agentd.runs.output.registry import Outputs
from agentd.runs.shim.client import ShimRun
from agentd.runs.tasks import Task
from agentd_client.core import terminal_wire as wire

log = logging.getLogger(__name__)

# Seconds a connection has to present its token.
HELLO_SECONDS = 10.0
# The longest HELLO payload (a token is 32 bytes).
MAX_HELLO = 256
# Input bytes queued for the shim past which the socket is no longer read, and below
# which it is read again.
INPUT_HIGH = 256 * 1024
INPUT_LOW = 64 * 1024
# Output bytes the socket's buffer may hold for a client before its output waits.
OUTPUT_HIGH = 256 * 1024
# Seconds after the shim handed a client back before it is handed over again.
RELINK_SECONDS = 1.0
_LINK_IDS = itertools.count(1)


class TaskControl(Protocol):
    """What a terminal connection asks of the task handlers (api/handlers/task_io.py)."""

    def running(self, session_id: str, task_id: str) -> tuple[Task, ShimRun]: ...

    def resize(self, task: Task, run: ShimRun, rows: int, cols: int, by: str) -> None: ...

    def record(self, task: Task, action: str, by: str, **fields: Any) -> None: ...

    def hang_up(self, task: Task, run: ShimRun) -> None: ...


class TerminalConnection(asyncio.Protocol):
    def __init__(
        self,
        tokens: TerminalTokens,
        outputs: Outputs,
        control: TaskControl,
        forwards: Streams | None = None,
    ) -> None:
        self._tokens = tokens
        self._forwards = forwards
        self._handed: ForwardConnection | None = None
        self._outputs = outputs
        self._control = control
        self._transport: asyncio.Transport | None = None
        self._reader = wire.FrameReader(MAX_HELLO)
        self._uid = -1
        self._grant: Grant | None = None
        self._task: Task | None = None
        self._run: ShimRun | None = None
        self._hello_timer: asyncio.TimerHandle | None = None
        # Input not yet taken by the shim: bytes, or None for "close its stdin".
        self._queued: deque[bytes | None] = deque()
        self._queued_bytes = 0
        self._wake_copier: asyncio.Event = asyncio.Event()
        self._copying: asyncio.Task[None] | None = None
        self._jobs: list[asyncio.Task[Any]] = []
        self._writable: asyncio.Future[None] | None = None
        self._written = 0
        self._back_at = -RELINK_SECONDS  # when the shim last handed the client back
        self._reason = ""  # why input ended: detached, ended (else closed or dropped)
        self._closed = False

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=OUTPUT_HIGH)
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            self._uid = int.from_bytes(creds[4:8], sys.byteorder)
        self._hello_timer = asyncio.get_running_loop().call_later(
            HELLO_SECONDS, self._refuse, "no token within the time allowed"
        )

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            frames = self._reader.feed(data)
        except wire.FrameError as exc:
            self._refuse(str(exc)) if self._grant is None else self._close()
            return
        for i, (kind, payload) in enumerate(frames):
            if self._closed:
                return
            if self._grant is None:
                if not self._hello(kind, payload):
                    if self._handed is not None:  # what came behind the HELLO is the forward's
                        rest = b"".join(wire.frame(k, p) for k, p in frames[i + 1 :])
                        rest += self._reader.take_pending()
                        if rest:
                            self._handed.data_received(rest)
                    return
                continue
            self._frame(kind, payload)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def eof_received(self) -> bool | None:
        return None  # closes the connection: the client is done with this terminal

    def connection_lost(self, exc: Exception | None) -> None:
        closed_before = self._closed
        self._closed = True
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        for job in self._jobs:
            job.cancel()
        self.resume_writing()
        grant, task, run = self._grant, self._task, self._run
        # Nothing of the task kept past the connection (its output file is closed when
        # the run is dropped).
        self._task = self._run = None
        self._jobs.clear()
        self._copying = None
        if grant is None or task is None or run is None:
            return
        if not (grant.input or grant.hangup_on_drop):
            return
        reason = self._reason or ("dropped" if exc is not None and not closed_before else "closed")
        if run.done.done() and not self._reason:
            reason = "ended"
        self._control.record(task, "input", grant.by, bytes=self._written, reason=reason)
        if grant.hangup_on_drop and reason in ("dropped", "closed"):
            self._control.hang_up(task, run)

    # the token
    def _hello(self, kind: int, payload: bytes) -> bool:
        if kind != wire.HELLO:
            self._refuse("the first frame must be HELLO with a token from OpenTerminal")
            return False
        try:
            grant = self._tokens.redeem(payload, self._uid)
        except Refused as exc:
            self._refuse(str(exc))
            return False
        if isinstance(grant, ForwardGrant):
            return self._forward(grant)
        try:
            if grant.input or grant.hangup_on_drop:
                self._task, self._run = self._control.running(grant.session_id, grant.task_id)
                if grant.input and not self._run.stdin_open:
                    raise Refused(f"task {grant.task_id} takes no input now")
        except Exception as exc:  # noqa: BLE001 - gone meanwhile: said to the client
            self._refuse(str(exc)[:300])
            return False
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        self._grant = grant
        self._reader.limit = wire.MAX_CLIENT_PAYLOAD
        log.info(
            "terminal socket: task %s linked for %s (uid %d, input %s)",
            grant.task_id,
            grant.by,
            self._uid,
            "yes" if grant.input else "no",
        )
        self._send(wire.frame(wire.READY))
        self._jobs.append(asyncio.ensure_future(self._output(grant)))
        if self._run is not None:
            self._jobs.append(asyncio.ensure_future(self._watch_end(self._run)))
        return True

    def _forward(self, grant: ForwardGrant) -> bool:
        """The connection becomes the grant's forward stream (forward.py), READY once its
        caps allowed it; this protocol is done with it."""
        transport = self._transport
        if self._forwards is None or transport is None:
            self._refuse("this daemon carries no forwards on its terminal socket: use ForwardMux")
            return False
        try:
            forward = ForwardConnection(self._forwards, grant)
        except Exception as exc:  # noqa: BLE001 - a cap, the session gone: said to the client
            self._refuse(str(exc)[:300])
            return False
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        self._send(wire.frame(wire.READY))
        self._closed = True  # the connection is the forward's from here
        self._handed = forward
        transport.set_protocol(forward)
        forward.connection_made(transport)
        return False

    def _refuse(self, why: str) -> None:
        if self._closed:
            return
        log.info("terminal socket: refused a connection (uid %d): %s", self._uid, why)
        self._send(wire.frame(wire.REFUSED, why.encode()[:300]))
        self._close()

    def _close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    def _send(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    # input
    def _frame(self, kind: int, payload: bytes) -> None:
        grant, run = self._grant, self._run
        assert grant is not None
        if kind == wire.INPUT and grant.input and run is not None:
            if payload:
                self._input(run, payload)
        elif kind == wire.CLOSE_STDIN and grant.input:
            self._enqueue(None)
        elif kind == wire.RESIZE and len(payload) == wire.SIZE.size and run is not None:
            rows, cols = wire.SIZE.unpack(payload)
            assert self._task is not None
            with contextlib.suppress(Exception):  # a bad size or no PTY: ignored, as before
                self._control.resize(self._task, run, rows, cols, grant.by)
        elif kind == wire.DETACH:
            self._reason = "detached"
            self._close()

    def _input(self, run: ShimRun, data: bytes) -> None:
        if not self._queued and run.write_now(data):
            self._written += len(data)
            return
        self._enqueue(data)

    def _enqueue(self, item: bytes | None) -> None:
        self._queued.append(item)
        self._queued_bytes += len(item) if item else 0
        if self._queued_bytes > INPUT_HIGH and self._transport is not None:
            self._transport.pause_reading()
        if len(self._queued) == 1:
            self._wake_copier.set()
            if self._copying is None and self._run is not None:
                self._copying = asyncio.ensure_future(self._copier(self._run))
                self._jobs.append(self._copying)

    async def _copier(self, run: ShimRun) -> None:
        """Queued input to the shim, in order, waiting for its acknowledgements."""
        while True:
            while self._queued:
                item = self._queued[0]
                if item is None:
                    run.close_input()
                elif not await run.write(item):
                    self._reason = "ended"
                    self._close()
                    return
                else:
                    self._written += len(item)
                self._queued.popleft()
                self._queued_bytes -= len(item) if item else 0
                if self._queued_bytes < INPUT_LOW and self._transport is not None:
                    with contextlib.suppress(RuntimeError):
                        self._transport.resume_reading()
            self._wake_copier.clear()
            await self._wake_copier.wait()

    async def _watch_end(self, run: ShimRun) -> None:
        await asyncio.shield(run.done)
        if not self._reason:
            self._reason = "ended"

    # output
    async def _output(self, grant: Grant) -> None:
        """The output from the token's offset to its end, then END; the connection is
        closed after (input to an ended task goes nowhere). Caught up with a live
        terminal, it takes the shim's bytes as they come (_relay); behind, from the
        file as ReadOutput does (_replay)."""
        offset = grant.offset
        try:
            while not self._closed:
                offset, done = await self._replay(grant, offset)
                if done:
                    break
                while self._caught_up(offset):
                    if self._linkable():
                        linked = await self._link(offset)
                        if linked is None:
                            return  # the client went while the shim had it
                        offset = linked
                    else:
                        offset = await self._relay(offset)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the output is gone: said to the client
            self._refuse(str(exc)[:300])
            return
        if self._run is not None and not self._run.done.done():
            await asyncio.shield(self._run.done)
        self._reason = self._reason or "ended"
        if self._transport is not None:
            self._transport.close()

    async def _replay(self, grant: Grant, offset: int) -> tuple[int, bool]:
        """Chunks from `offset` until caught up with a live terminal (its offset, False)
        or the output's end (True)."""
        live = self._run.output if self._run is not None else None
        chunks = self._outputs.read(grant.session_id, grant.task_id, offset, follow=True)
        try:
            async for chunk in chunks:
                if self._closed:
                    return chunk.offset, True
                offset = chunk.offset + len(chunk.data)
                if chunk.data:
                    self._send(wire.output(chunk.offset, chunk.data))
                    if self._writable is not None and not self._writable.done():
                        await self._writable  # a client that does not read: it waits
                        continue
                if chunk.done:
                    self._send(wire.frame(wire.END, wire.OFFSET.pack(chunk.offset)))
                    return offset, True
                if live is not None and not live.done and live.size == offset:
                    return offset, False
        finally:
            await chunks.aclose()
        return offset, True

    def _caught_up(self, offset: int) -> bool:
        """At the live end of a running terminal, with room to send: no replay needed."""
        run = self._run
        return (
            not self._closed
            and run is not None
            and not run.output.done
            and run.output.size == offset
            and (self._writable is None or self._writable.done())
        )

    def _linkable(self) -> bool:
        """Whether the client may go to the shim now: it sends input, is caught up with
        nothing of it queued, half-read or unsent here, and was not handed back lately."""
        run, transport, grant = self._run, self._transport, self._grant
        return (
            grant is not None
            and grant.input
            and run is not None
            and run.can_link
            and not run.done.done()
            and transport is not None
            and not transport.is_closing()
            and transport.get_write_buffer_size() == 0
            and not self._queued
            and self._reader.pending == 0
            and asyncio.get_running_loop().time() - self._back_at >= RELINK_SECONDS
        )

    async def _link(self, offset: int) -> int | None:
        """The client handed to the task's shim from `offset` (agentd/runs/shim/links.py):
        its keys and echo then skip this process. Back when the shim hands it back (the
        offset reached; what it did not take or send is taken and sent here first); None
        when the client went meanwhile (the connection is closed here too)."""
        run, transport = self._run, self._transport
        assert run is not None and transport is not None
        loop = asyncio.get_running_loop()
        link_id = next(_LINK_IDS)
        back: asyncio.Future[tuple[dict[str, Any], int | None]] = loop.create_future()

        def told(msg: dict[str, Any], fd: int | None) -> None:
            if back.done():
                if fd is not None:
                    os.close(fd)
            else:
                back.set_result((msg, fd))

        transport.pause_reading()
        copy = os.dup(transport.get_extra_info("socket").fileno())
        try:
            handed = run.link(link_id, copy, offset, told)
        finally:
            os.close(copy)
        if not handed:
            self._back_at = loop.time()
            transport.resume_reading()
            return offset
        ended: asyncio.Future[Any] = asyncio.ensure_future(asyncio.shield(run.done))
        waiting: set[asyncio.Future[Any]] = {back, ended}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            run.unlink(link_id)
            raise
        finally:
            ended.cancel()
        if not back.done():  # the shim ended holding it: where the client is, unknown
            run.unlink(link_id)
            self._close()
            return None
        msg, fd = back.result()
        if fd is not None:
            os.close(fd)  # the same connection as this transport's
        self._written += _int(msg.get("bytes"))
        reason = msg.get("reason")
        if reason in ("closed", "dropped"):
            self._reason = str(reason)
            self._close()
            return None
        self._back_at = loop.time()
        unsent, rest = _b64(msg.get("unsent")), _b64(msg.get("rest"))
        if unsent:
            transport.write(unsent)
        transport.resume_reading()
        if rest:
            self.data_received(rest)
        return _int(msg.get("offset"), offset)

    async def _relay(self, offset: int) -> int:
        """The shim's live bytes from `offset`, sent from its callback as they come,
        until they skip (a frame the shim could not send: the file has it), the client
        stops reading or the task ends; the offset reached."""
        assert self._run is not None
        live = self._run.output
        at = [offset]
        lost = asyncio.get_running_loop().create_future()

        def relay(offset: int, data: bytes) -> bool:
            if offset != at[0] or self._closed or lost.done():
                if not lost.done():
                    lost.set_result(None)
                return False
            if data:
                self._send(wire.output(offset, data))
                at[0] += len(data)
                if self._writable is not None and not self._writable.done():
                    lost.set_result(None)
                    return False
            return True

        live.relays.append(relay)
        ended = asyncio.ensure_future(asyncio.shield(self._run.done))
        # One that may go to the shim again wakes to see whether it may: RELINK_SECONDS
        # after it came back, then every RELINK_SECONDS (input queued here waits).
        grant, run = self._grant, self._run
        wait: float | None = None
        if grant is not None and grant.input and run.can_link:
            since = asyncio.get_running_loop().time() - self._back_at
            wait = RELINK_SECONDS - since if since < RELINK_SECONDS else RELINK_SECONDS
        try:
            await asyncio.wait({lost, ended}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            with contextlib.suppress(ValueError):
                live.relays.remove(relay)
        if self._writable is not None and not self._writable.done():
            await self._writable
        return at[0]


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and value >= 0 else default


def _b64(value: object) -> bytes:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except ValueError:
        return b""


def factory(
    tokens: TerminalTokens,
    outputs: Outputs,
    control: TaskControl,
    forwards: Streams | None = None,
) -> Callable[[], TerminalConnection]:
    return lambda: TerminalConnection(tokens, outputs, control, forwards)
