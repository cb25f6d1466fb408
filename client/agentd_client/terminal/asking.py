"""The permission requests a terminal answers: the open ones, oldest first, the one it
asks now, and what the person types.

One is asked at a time, and only once the terminal has caught up with the session (what
a replay shows is history, never asked). An answer goes to the request that was on the
screen when Enter was pressed, or at once for a one-key answer (y, n, a, or the digit of
a narrower rule, typed first); keys typed while nothing is asked answer nothing, a new
request starts with an empty answer, and an Enter right after a one-key answer (the
habit of lines) is dropped, so a `y` meant for one never answers another (nor does its
Enter deny the next: the rest of a "yes" typed out is no answer, and asks again).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import grpc

from agentd_client.terminal import keys, prompt, sanitize
from agentd_client.terminal.display import request_code
from agentd_client.terminal.screen import Row
from agentd_client.v1 import agentd_pb2 as pb

# (request_id, decision, scope, rule) -> the daemon's ResolvePermissionResponse
Resolve = Callable[[str, str, str, str], Any]
# An Enter typed within this many seconds of a one-key answer, as the next key, is its.
ENTER_AFTER_S = 1.5


class Asking:
    def __init__(self, say: Callable[[str], None], resolve: Resolve) -> None:
        self.say = say
        self.resolve = resolve
        self.pending: OrderedDict[str, pb.PermissionRequested] = OrderedDict()
        self.current: str | None = None
        self.editor = keys.LineEditor()
        self.changed = False  # the prompt on the screen must be drawn again
        self.asked = 0  # times a reply was no answer: a plain terminal asks again
        self.one_key = True  # a single y/n/a/digit answers without Enter (a key-at-a-time tty)
        self._enter_until = 0.0  # an Enter before this (as the next key) ends a one-key answer

    def add(self, x: pb.PermissionRequested) -> None:
        self.pending[x.request_id] = x

    def ask_next(self) -> None:
        """Ask the oldest open request, if none is asked now (expired ones dropped)."""
        if self.current is not None:
            return
        now = time.time() * 1000
        while self.pending:
            rid, x = next(iter(self.pending.items()))
            if x.expires_ms and x.expires_ms < now:
                self.pending.pop(rid)
                continue
            self.current = rid
            self.editor.clear()
            self.changed = True
            return

    def resolved(self, x: pb.PermissionResolved, time_ms: int) -> bool:
        """A request answered (here or anywhere); True if it was the one asked here."""
        self.pending.pop(x.request_id, None)
        if self.current != x.request_id:
            return False
        self._done()
        stamp = time.strftime("%H:%M:%S", time.localtime(time_ms / 1000))
        self.say(
            f"(withdrawn: request {request_code(x.request_id)} answered "
            f"{sanitize.line(x.decision)} ({sanitize.line(x.scope)}) by "
            f"{sanitize.line(x.decided_by)} at {stamp})"
        )
        return True

    def withdraw_all(self, why: str) -> None:
        if self.current is not None:
            self.say(f"(request {request_code(self.current)} withdrawn: {why})")
        self.pending.clear()
        self._done()

    def keys(self, data: bytes) -> bool:
        """Keys typed; False if they were no answer to anything (nothing asked)."""
        if self.current is None:
            self.editor.feed(data)
            self.editor.clear()  # typed with no question asked: answers nothing
            return False
        if data[:1] in (b"\r", b"\n") and time.monotonic() < self._enter_until:
            data = data[1:]  # the Enter of the one-key answer before
        self._enter_until = 0.0
        if self.one_key and not self.editor.text and (key := self._one_key(data)):
            self._answer(key)
            self._enter_until = time.monotonic() + ENTER_AFTER_S
            data = data[1:]
            if data[:1] in (b"\r", b"\n"):
                data = data[1:]
                self._enter_until = 0.0
            self.changed = True
            if not data or self.current is None:
                return True
        for line in self.editor.feed(data):
            self._answer(line)
            if self.current is None:
                break
        self.changed = True
        return True

    def _one_key(self, data: bytes) -> str:
        """The answer a first key gives alone, or "" (then it is typed as a line)."""
        key = data[:1].decode("ascii", errors="ignore").lower()
        if not key:
            return ""
        assert self.current is not None
        rules = prompt.choices(self.pending[self.current])
        if key in "yn" or (key == "a" and rules and rules[0]):
            return key
        if key.isdigit() and 1 <= int(key) < len(rules) <= 10:
            return key
        return ""

    def rows(self) -> list[Row]:
        if self.current is None:
            return []
        x = self.pending[self.current]
        return prompt.rows(x, len(self.pending) - 1, self.editor.text)

    def _done(self) -> None:
        self.current = None
        self.editor.clear()
        self.changed = True

    def _answer(self, line: str) -> None:
        assert self.current is not None
        x = self.pending[self.current]
        choice = prompt.parse_answer(line, prompt.choices(x))
        if choice is None:
            self.say(f"({prompt.not_an_answer(x)})")
            self.asked += 1
            self.changed = True
            return
        decision, scope, rule = choice
        try:
            reply = self.resolve(x.request_id, decision, scope, rule)
            if not reply.accepted:
                self.say(f"(not applied: {sanitize.line(reply.message)})")
            else:
                shown = sanitize.line(f"{decision} ({scope}{', ' + rule if rule else ''})")
                self.say(f"(answered {shown} to request {request_code(x.request_id)})")
        except grpc.RpcError as exc:
            self.say(f"(not applied: {sanitize.line(exc.details() or '')})")
        # The resolved event (ours or another's) closes it; do not ask it again.
        self.pending.pop(x.request_id, None)
        self._done()
        self.ask_next()
