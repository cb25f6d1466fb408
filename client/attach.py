"""`agentctl attach`: a session's events, its commands' output in full, and its prompts.

One thread reads the event stream, one per followed output reads its bytes (ReadOutput),
one reads the person's answers; everything they get goes through one queue to the main
thread, which alone prints and prompts. So:
- history (events up to the session's last seq when we attached) is shown, never
  prompted; a request still open then is prompted once we have caught up;
- a request answered anywhere is withdrawn here at once ("answered by … at …");
- on a terminal, running calls are status lines updated in place (elapsed, bytes, last
  line) under their output; progress events change them and print nothing.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import grpc
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from agentd_client._client import Client
from agentd_client.display import (
    as_dict,
    clean,
    describe_event,
    event_head,
    input_of,
    input_text,
    print_json_line,
)
from agentd_client.follow import Follower
from agentd_client.v1 import agentd_pb2 as pb

_END = object()


@dataclass
class _Running:
    name: str
    what: str
    started_ms: int
    size: int = 0
    last_line: str = ""


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


class _Status:
    """The status lines of running calls, as rich renders them (re-evaluated each refresh)."""

    def __init__(self) -> None:
        self.running: dict[str, _Running] = {}

    def __rich__(self) -> Group:
        now = time.time() * 1000
        lines = []
        for r in self.running.values():
            elapsed = max(0.0, (now - r.started_ms) / 1000)
            line = Text(f"⏵ {r.name} {r.what[:60]}  {elapsed:.0f}s", style="bold")
            if r.size:
                line.append(f"  {_size(r.size)}", style="cyan")
            if r.last_line:
                line.append(f"  {r.last_line[:80]}", style="dim")
            lines.append(line)
        return Group(*lines)


class AttachView:
    def __init__(
        self, c: Client, session_id: str, after_seq: int, *, as_json: bool, interactive: bool
    ) -> None:
        self.c = c
        self.session_id = session_id
        self.after_seq = after_seq
        self.as_json = as_json
        self.interactive = interactive and not as_json
        self.tty = sys.stdout.isatty() and not as_json
        self.console = Console(highlight=False, soft_wrap=True)
        self.q: queue.Queue[Any] = queue.Queue()
        self.follower = Follower(c, session_id, lambda oid, data: self.q.put(("out", oid, data)))
        self.status = _Status()
        self.live: Live | None = None
        # open permission requests, oldest first; the one on screen
        self.pending: OrderedDict[str, pb.PermissionRequested] = OrderedDict()
        self.current: str | None = None
        self.partial: dict[str, bytes] = {}
        self.offsets: dict[str, int] = {}
        self.call_outputs: dict[str, str] = {}  # tool_use_id -> output id
        self.history_tasks: list[str] = []  # started before we attached, maybe running
        self.ended: set[str] = set()  # outputs followed to their end
        # call_finished events held until their output is all shown
        self.deferred: dict[str, pb.Event] = {}
        # An agent's streamed text: the line not yet ended, and the turns shown so.
        self.agent_partial = ""
        self.agent_streamed: set[tuple[str, int]] = set()

    # threads
    def _read_events(self, stream: Any) -> None:
        try:
            for event in stream:
                self.q.put(("event", event))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.q.put(("error", exc))
        self.q.put(_END)

    def _read_answers(self) -> None:
        while True:
            try:
                line = sys.stdin.readline()
            except (OSError, ValueError):
                return
            if not line:
                return
            self.q.put(("line", line.strip()))

    # output
    def _print(self, text: str) -> None:
        if self.as_json:
            return
        if self.live is not None:
            self.live.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def _output(self, output_id: str, data: bytes) -> None:
        if not data:
            self.ended.add(output_id)
            if (e := self.deferred.pop(output_id, None)) is not None:
                self._flush_output(output_id)
                self._event(e, False)
                return
        if self.as_json:
            if data:
                offset = self.offsets.get(output_id, 0)
                self.offsets[output_id] = offset + len(data)
                print_json_line(
                    {
                        "output": {
                            "id": output_id,
                            "offset": offset,
                            "data": data.decode(errors="replace"),
                        }
                    }
                )
            return
        buf = self.partial.pop(output_id, b"") + data
        if not data and buf:
            buf += b"\n"  # the output ended without a newline
        lines = buf.split(b"\n")
        if lines[-1]:
            self.partial[output_id] = lines[-1]
        for line in lines[:-1]:
            text = line.decode(errors="replace")
            self._print(f"{output_id}│ {text}" if len(self.follower_ids()) > 1 else text)

    def _flush_output(self, output_id: str) -> None:
        if rest := self.partial.pop(output_id, b""):
            self._print(rest.decode(errors="replace"))

    def _all_followed_ended(self) -> bool:
        return all(oid in self.ended for oid in self.follower.followed())

    def follower_ids(self) -> list[str]:
        return [oid for oid in self.partial] + [
            oid for oid in self.call_outputs.values() if oid not in self.partial
        ]

    # prompts
    def _prompt(self) -> None:
        if not self.interactive or self.current is not None:
            return
        now = time.time() * 1000
        while self.pending:
            rid, x = next(iter(self.pending.items()))
            if x.expires_ms and x.expires_ms < now:
                self.pending.pop(rid)
                continue
            self.current = rid
            self._pause_live()
            print(_prompt_text(x), end="", flush=True)
            return

    def _answer(self, line: str) -> None:
        if self.current is None:
            return
        x = self.pending[self.current]
        choice = _parse_answer(line, list(x.rule_choices) or [x.suggested_rule])
        if choice is None:
            n = len(x.rule_choices) - 1
            more = f", or 1-{n} for a narrower rule" if n > 0 else ""
            print(f"answer y, n (the default) or a{more}")
            print(_prompt_text(x), end="", flush=True)
            return
        decision, scope, rule = choice
        try:
            reply = self.c.resolve_permission(self.session_id, x.request_id, decision, scope, rule)
            if not reply.accepted:
                print(f"(not applied: {reply.message})", file=sys.stderr)
        except grpc.RpcError as exc:
            print(f"(not applied: {exc.details()})", file=sys.stderr)
        # The resolved event (ours or another's) closes it; do not ask it again.
        self.pending.pop(self.current, None)
        self.current = None
        self._resume_live()
        self._prompt()

    def _pause_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _resume_live(self) -> None:
        if self.tty and self.live is None and self.current is None:
            self.live = Live(
                self.status, console=self.console, refresh_per_second=4, transient=True
            )
            self.live.start()

    # events
    def _agent(self, e: pb.Event) -> None:
        """An agent's text as it streams, a line at a time under the turn's head; its whole
        message then shows only what the stream did not (its tool calls)."""
        x = e.agent
        match x.WhichOneof("kind"):
            case "text_delta":
                turn = (x.conversation_id, x.text_delta.turn)
                if turn not in self.agent_streamed:
                    self.agent_streamed.add(turn)
                    self._print(f"{event_head(e)} ◆ turn {x.text_delta.turn}:")
                lines = (self.agent_partial + clean(x.text_delta.text)).split("\n")
                self.agent_partial = lines.pop()
                for line in lines:
                    self._print(line)
            case "message" if (x.conversation_id, x.message.turn) in self.agent_streamed:
                if self.agent_partial:
                    self._print(self.agent_partial)
                    self.agent_partial = ""
                for b in x.message.content:
                    if b.type == "tool_use":
                        self._print(clean(f"  wants {b.name} ({b.id})"))
            case _:
                self._print(describe_event(e))

    def _event(self, e: pb.Event, history: bool) -> None:
        kind = e.WhichOneof("kind")
        if kind == "agent" and not self.as_json:
            self._agent(e)
            return
        if kind == "call_finished" and not self.as_json:
            # Its output first: the end of a call is shown after everything it printed.
            oid = self.call_outputs.get(e.call_finished.result.tool_use_id)
            if oid is not None and oid not in self.ended and oid not in self.deferred:
                self.deferred[oid] = e
                return
        if self.as_json:
            print_json_line(as_dict(e))
        elif kind != "progress":
            self._print(describe_event(e))
        match kind:
            case "call_started":
                x = e.call_started
                inp = input_of(x)
                what = inp.get("command") or inp.get("file_path") or inp.get("pattern") or ""
                if not history:
                    self.status.running[x.tool_use_id] = _Running(x.name, str(what), e.time_ms)
            case "progress":
                progress = e.progress
                r = self.status.running.get(progress.tool_use_id)
                if r is not None:
                    r.size, r.last_line = progress.output_size, progress.last_line
                output_id = progress.output_id
                if output_id and not self.follower.following(output_id):
                    self.call_outputs[progress.tool_use_id] = output_id
                    self.follower.follow(output_id)
            case "call_finished":
                tool_use_id = e.call_finished.result.tool_use_id
                self.status.running.pop(tool_use_id, None)
            case "task_started":
                t = e.task_started.task
                if history:
                    self.history_tasks.append(t.id)
                else:
                    self.follower.follow(t.id)
            case "task_finished":
                t = e.task_finished.task
                if history and t.id in self.history_tasks:
                    self.history_tasks.remove(t.id)
            case "permission_requested":
                self.pending[e.permission_requested.request_id] = e.permission_requested
                if not history:
                    self._prompt()
            case "permission_resolved":
                resolved = e.permission_resolved
                self.pending.pop(resolved.request_id, None)
                if self.current == resolved.request_id:
                    self.current = None
                    stamp = time.strftime("%H:%M:%S", time.localtime(e.time_ms / 1000))
                    print(
                        f"\n(withdrawn: answered {resolved.decision} ({resolved.scope}) "
                        f"by {resolved.decided_by} at {stamp})",
                        flush=True,
                    )
                    self._resume_live()
                    self._prompt()

    def run(self) -> int:
        caught_up_at = self.c.get_session(self.session_id).last_seq
        stream = self.c.attach(self.session_id, self.after_seq)
        threading.Thread(target=self._read_events, args=(stream,), daemon=True).start()
        if self.interactive:
            threading.Thread(target=self._read_answers, daemon=True).start()
        caught_up = self.after_seq >= caught_up_at
        self._resume_live()
        if caught_up:
            self._prompt()
        ending_by = 0.0
        try:
            while True:
                if ending_by and self._all_followed_ended():
                    break
                try:
                    item = self.q.get(
                        timeout=max(0.01, ending_by - time.monotonic()) if ending_by else None
                    )
                except queue.Empty:
                    break  # the stream ended and an output did not finish in time
                if item is _END:
                    # The session's stream ended: show the rest of what it printed first.
                    ending_by = time.monotonic() + 10
                    continue
                match item:
                    case ("event", e):
                        history = not caught_up and 0 < e.seq <= caught_up_at
                        self._event(e, history)
                        if not caught_up and e.seq >= caught_up_at:
                            caught_up = True
                            for task_id in self.history_tasks:  # still running: in full
                                self.follower.follow(task_id)
                            self._prompt()
                    case ("out", output_id, data):
                        self._output(output_id, data)
                    case ("line", line):
                        self._answer(line)
                    case ("error", exc):
                        raise exc
        except KeyboardInterrupt:
            stream.cancel()
            self.follower.stop()
            self._pause_live()
            return 130
        finally:
            self._pause_live()
        self.follower.stop()
        return 0


# Lines of a prompt's diff shown on a terminal (the daemon sends at most 240).
DIFF_LINES = 240


def _prompt_text(x: pb.PermissionRequested) -> str:
    inp = input_of(x)
    what = inp.get("command") or inp.get("file_path") or inp.get("url") or input_text(x)
    lines = [f"? {x.tool_name} wants: {what}"]
    if x.reasons:
        lines.append(f"  because: {'; '.join(x.reasons)}")
    if isinstance(diff := inp.get("diff"), str) and diff:
        # Held changes (KeepChanges): what a yes would put in place.
        lines += [f"  | {clean(line)}" for line in diff.splitlines()[:DIFF_LINES]]
    choices = list(x.rule_choices) or ([x.suggested_rule] if x.suggested_rule else [])
    if choices:
        lines.append(f"  [a]lways adds the rule {choices[0]}")
        for i, rule in enumerate(choices[1:], 1):
            lines.append(f"  [{i}] always, narrower: {rule}")
    keys = "y/N" + ("/a" if choices else "") + "".join(f"/{i}" for i in range(1, len(choices)))
    lines.append(f"Allow? [y]es once / [N]o / [a]lways [{keys}]: ")
    return "\n".join(lines)


def _parse_answer(line: str, choices: list[str]) -> tuple[str, str, str] | None:
    """(decision, scope, rule) for an answer; None when it is not one."""
    answer = line.strip().lower()
    if answer in ("", "n", "no"):
        return "deny", "once", ""
    if answer in ("y", "yes"):
        return "allow", "once", ""
    if answer in ("a", "always") and choices and choices[0]:
        return "allow", "always", choices[0]
    if answer.isdigit() and 1 <= int(answer) < len(choices):
        return "allow", "always", choices[int(answer)]
    return None
