"""`agentctl exec`'s own permission ask, answered on the person's terminal.

The command exec runs is a Bash call of the session, so it may need a person's approval
(the session's mode and rules say). The person who typed `agentctl exec` is at a
terminal: they are asked there, before the task starts, as any attached terminal would
ask (the ask also reaches every other attached client; the first answer counts). Only
the ask of exec's own call is answered here (matched by its tool_use_id), never another.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

from agentd_client.core import structs
from agentd_client.core.errors import AgentdError
from agentd_client.terminal.sanitize import line as one


class OwnAsk:
    def __init__(self, client: Any, session_id: str, tool_use_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.tool_use_id = tool_use_id
        self._stream: Any = None

    def __enter__(self) -> OwnAsk:
        last = self.client.get_session(self.session_id).last_seq
        self._stream = self.client.attach(self.session_id, last)
        threading.Thread(target=self._follow, name="own-ask", daemon=True).start()
        self._stream.wait_attached()  # counted as attached: the ask will reach us
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stream is not None:
            self._stream.cancel()

    def _follow(self) -> None:
        with contextlib.suppress(AgentdError):
            for event in self._stream:
                if (
                    event.HasField("permission_requested")
                    and event.permission_requested.tool_use_id == self.tool_use_id
                ):
                    self._ask(event.permission_requested)

    def _ask(self, x: Any) -> None:
        command = str(structs.from_struct(x.input, "input").get("command", ""))
        rule = f" (adds {one(x.suggested_rule)})" if x.suggested_rule else ""
        print(
            f"agentd asks before running in the sandbox: {one(command)}\n"
            f"  why: {one('; '.join(x.reasons) or 'the session asks for commands like it')}\n"
            f"  allow? [y]es, [a]lways{rule}, [N]o: ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        answer = sys.stdin.readline().strip().lower()
        allow = answer in ("y", "yes", "a", "always")
        scope = "always" if answer in ("a", "always") else "once"
        with contextlib.suppress(AgentdError):
            self.client.resolve_permission(
                self.session_id, x.request_id, "allow" if allow else "deny", scope
            )
