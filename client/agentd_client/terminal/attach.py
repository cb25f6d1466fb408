"""`agentctl attach`: a session's events, its commands' output, and its prompts.

One thread reads the event stream, one per followed output reads its bytes (ReadOutput),
one reads the person's keys; everything they get goes through one queue to the main
thread, which alone draws. It draws in frames (screen.Screen): what arrived since the
last frame goes above in one write, then the bottom again — the status lines of running
calls and the pending prompt, always last. So:
- every string shown is safe text (agentd_client.terminal.sanitize): no byte a command printed
  moves the cursor, clears the screen, sets the title or the clipboard;
- output comes in coalesced chunks, and a burst faster than the terminal is skipped to
  "… N lines, see `agentctl logs …`" (bursts.py), so a prompt shows at once;
- history (events up to the session's last seq when we attached) is shown, never
  prompted, with each finished Bash call's output replayed from its file before its end;
  a request still open then is prompted once we have caught up;
- a request answered anywhere is withdrawn here at once, and what comes next starts on
  a line of its own;
- when the daemon goes away (a restart), attach says so, reconnects with back-off and
  goes on after the last event it showed, and each output from the byte it reached.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from agentd_client.core import structs
from agentd_client.core.client import Client
from agentd_client.terminal import bursts, keys, sanitize, status
from agentd_client.terminal import streams as terminal
from agentd_client.terminal.asking import Asking
from agentd_client.terminal.attach_link import END, EventLink
from agentd_client.terminal.display import (
    AgentStream,
    as_dict,
    describe_event,
    input_of,
    outcome,
    print_json_line,
)
from agentd_client.terminal.follow import Follower
from agentd_client.terminal.screen import PlainScreen, Row, Screen
from agentd_client.v1 import agentd_pb2 as pb

# Collect what arrives for this long before drawing it (one write, not one per chunk).
FRAME_SECONDS = 0.02
# Redraw the status lines this often while nothing else happens (elapsed times).
TICK_SECONDS = 0.5


class AttachView:
    def __init__(
        self,
        c: Client,
        session_id: str,
        after_seq: int,
        *,
        as_json: bool,
        interactive: bool,
        connect: Callable[[], Client] | None = None,
        raw: bool = False,
    ) -> None:
        self.c = c
        self._first_client = c  # the caller's, closed by the caller
        self.connect = connect
        self.session_id = session_id
        self.after_seq = after_seq
        self.as_json = as_json
        self.raw = raw and not as_json
        # --raw shows command bytes as they are: they could draw anything, so it never asks.
        self.interactive = interactive and not as_json and not self.raw
        self.tty = sys.stdout.isatty() and not as_json
        self.screen: Screen | PlainScreen | None = None
        if not as_json:
            self.screen = Screen() if self.tty and not self.raw else PlainScreen()
        self.q: queue.Queue[Any] = queue.Queue()
        self.follower = self._follower(c)
        self.outputs = bursts.Outputs(f"agentctl logs -s {session_id} --from-start {{id}}")
        self.budget = bursts.Budget() if self.tty else bursts.Budget(1 << 60, 1e18)
        self.running: dict[str, status.Running] = {}
        self.asking = Asking(
            self._say,
            lambda rid, d, scope, rule: self.c.resolve_permission(session_id, rid, d, scope, rule),
        )
        self.offsets: dict[str, int] = {}
        self.call_outputs: dict[str, str] = {}  # tool_use_id -> output id
        self.history_tasks: list[str] = []  # started before we attached, maybe running
        self.ended: set[str] = set()  # outputs followed to their end
        # events held until an output is all shown: its call's end, and in history
        # everything after it (so a replay reads in order)
        self.deferred: dict[str, pb.Event] = {}
        self.held: list[tuple[pb.Event, bool]] = []
        self.lost_outputs: dict[str, int] = {}
        self.agent = AgentStream()
        self.above: list[str] = []
        self.notice = ""  # a status row of our own: reconnecting…
        self.urgent = False
        self.caught_up = True
        self.caught_up_at = 0
        self.stopping = threading.Event()
        self.link = EventLink(session_id, connect, self.q.put, self.stopping, after_seq)

    def _follower(self, c: Client) -> Follower:
        return Follower(
            c,
            self.session_id,
            lambda oid, data: self.q.put(("out", oid, data)),
            lost=lambda oid, at: self.q.put(("out_lost", oid, at)),
        )

    # threads
    def _read_keys(self) -> None:
        keys.read_keys(sys.stdin.fileno(), lambda data: self.q.put(("keys", data)))

    # what goes on the screen
    def _say(self, text: str) -> None:
        """A line (or lines) of ours above the bottom, after the output shown so far."""
        if self.as_json:
            return
        self._take_output()
        self.above.append(text)

    def _take_output(self) -> None:
        if self.outputs.waiting():
            rows = self.screen.size()[0] if isinstance(self.screen, Screen) else 0
            prefix = len(self._active()) > 1
            self.above += self.outputs.take(self.budget, prefix, tail=rows // 2)

    def _active(self) -> list[str]:
        return [oid for oid in self.follower.followed() if oid not in self.ended]

    def _frame(self) -> None:
        self._take_output()
        above = "\n".join(self.above)
        self.above = []
        self.urgent = self.asking.changed = False
        rows = self.asking.rows()
        if isinstance(self.screen, Screen):
            notice = [Row(self.notice, "bold")] if self.notice else []
            self.screen.frame(above, status.rows(self.running.values()) + notice + rows)
        elif isinstance(self.screen, PlainScreen):
            self.screen.frame(above, rows, (self.asking.current, self.asking.asked))

    # output
    def _output(self, output_id: str, data: bytes) -> None:
        if not data:
            self.ended.add(output_id)
            self.outputs.end(output_id)
            if (e := self.deferred.pop(output_id, None)) is not None:
                self._event(e, history=e.seq <= self.caught_up_at)
                self._release_held()
            return
        if self.as_json:
            offset = self.offsets.get(output_id, 0)
            self.offsets[output_id] = offset + len(data)
            text = data.decode(errors="replace")
            print_json_line({"output": {"id": output_id, "offset": offset, "data": text}})
            return
        if self.raw:
            self._frame()
            out = terminal.raw_stdout()  # the bytes a person asked for, as they are
            out.write(data)
            out.flush()
            return
        self.outputs.feed(output_id, data)

    def _release_held(self) -> None:
        while self.held and not self.deferred:
            e, history = self.held.pop(0)
            self._event(e, history)

    # prompts
    def _prompt(self) -> None:
        if self.interactive and self.caught_up:
            self.asking.ask_next()

    # events
    def _replay_output(self, output_id: str, e: pb.Event) -> bool:
        """In history: a finished call's or task's output, from its file, before its end
        is shown. False if there is none to follow."""
        if self.as_json or output_id in self.ended:
            return False
        self.deferred[output_id] = e
        self.follower.follow(output_id)
        return True

    def _event(self, e: pb.Event, history: bool) -> None:
        if self.deferred and history:
            self.held.append((e, history))  # a replay reads in order
            return
        kind = e.WhichOneof("kind")
        if kind == "agent" and not self.as_json:
            for line in self.agent.lines(e):
                self._say(line)
            return
        if kind == "call_finished" and not self.as_json:
            x = e.call_finished
            tool_use_id = x.result.tool_use_id
            oid = self.call_outputs.get(tool_use_id)
            if oid is not None and oid not in self.ended and oid not in self.deferred:
                # Its output first: the end of a call is shown after everything it printed.
                self.deferred[oid] = e
                if (r := self.running.get(tool_use_id)) is not None:
                    r.ended = f"{'✗' if x.result.is_error else '✓'} {outcome(x.name, x.result)}"
                return
            if history and oid is None and _ran_in_foreground(x.result):
                self.call_outputs[tool_use_id] = tool_use_id
                if self._replay_output(tool_use_id, e):
                    return
        if kind == "task_finished" and history and not self.as_json:
            t = e.task_finished.task
            following = t.id in self.ended or self.follower.following(t.id)
            if not following and self._replay_output(t.id, e):
                return
        if self.as_json:
            print_json_line(as_dict(e))
        elif kind != "progress":
            self._say(describe_event(e))
        match kind:
            case "call_started":
                started = e.call_started
                inp = input_of(started)
                what = inp.get("command") or inp.get("file_path") or inp.get("pattern") or ""
                if not history:
                    self.running[started.tool_use_id] = status.Running(
                        sanitize.line(started.name), sanitize.line(what), e.time_ms
                    )
            case "progress":
                progress = e.progress
                r = self.running.get(progress.tool_use_id)
                if r is not None:
                    r.size, r.last_line = progress.output_size, sanitize.line(progress.last_line)
                if progress.output_id and not self.follower.following(progress.output_id):
                    self.call_outputs[progress.tool_use_id] = progress.output_id
                    self.follower.follow(progress.output_id)
            case "call_finished":
                self.running.pop(e.call_finished.result.tool_use_id, None)
            case "task_started":
                t = e.task_started.task
                if history:
                    self.history_tasks.append(t.id)
                else:
                    self.follower.follow(t.id)
            case "task_finished":
                t = e.task_finished.task
                if t.id in self.history_tasks:
                    self.history_tasks.remove(t.id)
            case "permission_requested":
                self.asking.add(e.permission_requested)
                self._prompt()
            case "permission_resolved":
                if self.asking.resolved(e.permission_resolved, e.time_ms):
                    self._prompt()

    def _catch_up(self) -> None:
        self.caught_up = True
        for task_id in self.history_tasks:  # still running: in full
            self.follower.follow(task_id)
        self._prompt()

    def _check_caught_up(self) -> None:
        """Idle before the replay reached the session's last seq: that seq may be an event
        the journal does not keep (progress). Caught up if the journal holds nothing after
        the last event received (the queue is empty, so all of it is shown)."""
        try:
            after = self.c.attach(self.session_id, self.link.last_seq, follow=False, timeout=10)
            more = next(iter(after), None)
            after.cancel()
        except grpc.RpcError:
            return
        if more is None:
            self._catch_up()

    # connection
    def _lost(self, why: str) -> None:
        self._say(f"(agentctl: lost the daemon: {why}; reconnecting, Ctrl-C stops)")
        self.notice = f"⚠ reconnecting to the daemon ({why})"
        self.asking.withdraw_all("the daemon went away before it was answered")
        self.urgent = True

    def _reconnected(self, c: Client, status: pb.Status, session: pb.Session) -> None:
        old = self.c
        self.follower.stop()
        self.c = c
        self.follower = self._follower(c)
        for oid, at in self.lost_outputs.items():
            self.follower.follow(oid, at)
        self.lost_outputs.clear()
        self.notice = ""
        self._say(
            f"(reconnected to agentd {sanitize.line(status.version)} pid {status.pid}; "
            f"going on after event {self.link.last_seq})"
        )
        self.caught_up_at = session.last_seq
        self.caught_up = self.link.last_seq >= self.caught_up_at
        if self.caught_up:
            self._catch_up()
        self.urgent = True
        if old is not c and old is not self._first_client:
            old.close()

    def _handle(self, item: Any) -> bool:
        """One thing from the queue; False once the session's stream is over."""
        match item:
            case ("event", e):
                history = not self.caught_up and 0 < e.seq <= self.caught_up_at
                self._event(e, history)
                if not self.caught_up and e.seq >= self.caught_up_at:
                    self._catch_up()
            case ("out", output_id, data):
                self._output(output_id, data)
            case ("out_lost", output_id, at):
                self.lost_outputs[output_id] = at
            case ("keys", data):
                self.asking.keys(data)
            case ("lost", why):
                self._lost(why)
            case ("retry", attempt, delay, why):
                self.notice = (
                    f"⚠ the daemon is not back ({why}); tried {attempt} times, again in "
                    f"{delay:.1f}s (Ctrl-C stops)"
                )
                self.urgent = True
            case ("reconnected", c, status, session):
                self._reconnected(c, status, session)
            case ("error", exc):
                raise exc
        return True

    def run(self) -> int:
        self._first_client = self.c
        self.caught_up_at = self.c.get_session(self.session_id).last_seq
        stream = self.c.attach(self.session_id, self.after_seq)
        threading.Thread(target=self.link.run, args=(self.c, stream), daemon=True).start()
        use_keys = self.interactive and sys.stdin.isatty()
        self.caught_up = self.after_seq >= self.caught_up_at
        if self.caught_up:
            self._prompt()
        mode = keys.cbreak(sys.stdin.fileno()) if use_keys and self.tty else None
        with mode or contextlib.nullcontext():
            if self.interactive:
                threading.Thread(target=self._read_keys, daemon=True).start()
            try:
                return self._loop()
            except KeyboardInterrupt:
                return 130
            finally:
                self.stopping.set()
                stream.cancel()
                self.follower.stop()
                if self.screen is not None:
                    self._frame_final()

    def _frame_final(self) -> None:
        """What remains on the screen is history: the bottom region goes."""
        self.running.clear()
        self.notice = ""
        self.asking.current = None
        self._frame()
        if self.screen is not None:
            self.screen.clear()

    def _loop(self) -> int:
        ending_by = 0.0
        self._frame()
        while True:
            if ending_by and all(oid in self.ended for oid in self.follower.followed()):
                return 0
            timeout = TICK_SECONDS
            if ending_by:
                timeout = max(0.01, min(timeout, ending_by - time.monotonic()))
            try:
                item = self.q.get(timeout=timeout)
            except queue.Empty:
                if ending_by and time.monotonic() >= ending_by:
                    return 0  # the stream ended and an output did not finish in time
                if not self.caught_up and not self.held and not self.deferred:
                    self._check_caught_up()  # (held events are not shown yet)
                self._frame()
                continue
            if item is END:
                # The session's stream ended: show the rest of what it printed first.
                ending_by = time.monotonic() + 10
                continue
            self._handle(item)
            # Gather what else comes within a frame's time, then draw it all at once.
            until = time.monotonic() + FRAME_SECONDS
            while not (self.urgent or self.asking.changed):
                left = until - time.monotonic()
                if left <= 0:
                    break
                try:
                    item = self.q.get(timeout=left)
                except queue.Empty:
                    break
                if item is END:
                    self.q.put(item)
                    break
                self._handle(item)
            self._frame()


def _ran_in_foreground(result: pb.ToolResult) -> bool:
    """A Bash call whose command ran to its end in the call: its output file is the
    call's (a background one's is its task's, replayed at the task's end)."""
    if not result.HasField("data"):
        return False
    data = structs.from_value(result.data, "data")
    return isinstance(data, dict) and "exitCode" in data and "backgroundTaskId" not in data
