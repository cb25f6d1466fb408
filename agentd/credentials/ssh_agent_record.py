"""What the sandbox's ssh-agent leaves behind: each signature and refusal journaled as a
`permission_decided` event (tool "SshAgent"), and each key's use per host and session
for `agentctl credentials`; both bounded, whatever a sandbox sends."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from agentd.credentials.ssh_agent_rules import Host
from agentd.sessions.event_types import PermissionDecided
from agentd.sessions.session import SessionManager

log = logging.getLogger(__name__)

# Refusal reasons journaled per session (one event each; the rest only logged), and
# sessions whose use is remembered.
_JOURNALED = 256
_SESSIONS_KEPT = 256


@dataclass
class Use:
    """One key's use for one host in one session."""

    signatures: int = 0
    refused: int = 0
    allowed_by: str = ""


class Record:
    """The journal's events and the uses, of every session's agent."""

    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions
        self.usage: dict[str, dict[tuple[str, str], Use]] = {}
        self._journaled: dict[str, set[str]] = {}

    def use(self, session_id: str, host: Host, fp: str) -> Use:
        uses = self.usage.setdefault(session_id, {})
        while len(self.usage) > _SESSIONS_KEPT:
            self.usage.pop(next(iter(self.usage)))
        return uses.setdefault((host.shown, fp), Use())

    def refused(self, session_id: str, reason: str) -> None:
        """A refusal, journaled once per reason and session (a loop of the same bad
        request is one event)."""
        seen = self._journaled.setdefault(session_id, set())
        while len(self._journaled) > _SESSIONS_KEPT:
            self._journaled.pop(next(iter(self._journaled)))
        if reason in seen or len(seen) >= _JOURNALED:
            log.info("session %s: ssh-agent refused: %s", session_id, reason)
            return
        seen.add(reason)
        self.journal(session_id, "deny", "ssh-agent", reason)

    def journal(self, session_id: str, behavior: str, decided_by: str, reason: str) -> None:
        log.info("session %s: ssh-agent %s: %s (%s)", session_id, behavior, reason, decided_by)
        with contextlib.suppress(Exception):  # a closed session has no journal to write
            self.sessions.log(session_id).emit(
                PermissionDecided(
                    tool_use_id="",
                    tool_name="SshAgent",
                    behavior=behavior,
                    decided_by=decided_by,
                    reason=reason,
                )
            )

    def closed(self, session_id: str) -> None:
        self._journaled.pop(session_id, None)

    def sessions_used(self) -> dict[str, list[dict[str, Any]]]:
        return {
            sid: [
                {
                    "host": host,
                    "key": fp,
                    "signatures": use.signatures,
                    "refused": use.refused,
                    "allowed_by": use.allowed_by,
                }
                for (host, fp), use in uses.items()
            ]
            for sid, uses in self.usage.items()
        }
