"""Trust as people meet it: the "trust these settings?" prompt, the reports of what is
left out, and listing, approving and revoking trusted content (`agentctl trust`).

The engine calls `settle` for every call whose settings leave something out: each
untrusted file is reported once per session and content (a `settings_ignored` event,
and the daemon's log) and, when a person is attached and the session is not in
dontAsk, offered once for trust as a permission request whose tool_name is
`TrustSettings`. Allowing it trusts that content (path + sha256) in the state DB.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from agentd.foundation.errors import InvalidRequest, NotFound
from agentd.permissions.asker import Answer, Asker, waiting
from agentd.permissions.decision import Behavior
from agentd.permissions.settings import MergedSettings, SettingsLoader, UntrustedFile
from agentd.permissions.trust import (
    Trust,
    describe_widening,
    read_settings,
    split_settings_path,
)
from agentd.sessions.event_types import SettingsIgnored
from agentd.sessions.session import Session, SessionManager
from agentd.tools.base import ToolContext

log = logging.getLogger(__name__)

# The tool_name of a PermissionRequested that asks a person to trust a settings file.
TRUST_PROMPT = "TrustSettings"


def untrusted_reason(file: UntrustedFile) -> str:
    """What is left out of an untrusted file, and the one command that applies it."""
    return (
        f"the widening parts of {file.path} are not applied: its content (sha256 "
        f"{file.sha256}) is not trusted. Its deny and ask rules apply. To apply the rest "
        f"({'; '.join(describe_widening(file.widens))}), review it and run "
        f"`agentctl trust approve {file.path} --sha256 {file.sha256}`"
    )


def unreadable_reason(path: str, error: str) -> str:
    return (
        f"{path} was {error}, so none of it applies (deny and ask rules included); "
        "make it a regular file"
    )


@dataclass(frozen=True, slots=True)
class TrustEntry:
    """A row of `agentctl trust ls`: a trusted content, or a settings file as it is now."""

    path: str
    sha256: str
    state: str  # "trusted", "untrusted" or "unreadable"
    source: str = ""
    approved_by: str = ""
    approved_ms: int = 0
    widens: dict[str, Any] | None = None
    current: bool = False
    error: str = ""


class Approvals:
    """Reports, prompts and approvals of workspace settings content."""

    def __init__(self, sessions: SessionManager, asker: Asker, settings: SettingsLoader) -> None:
        self.sessions = sessions
        self.asker = asker
        self.settings = settings
        # (session id, path, sha256 or error) already reported, and already offered.
        self._reported: set[tuple[str, str, str]] = set()
        self._offered: set[tuple[str, str, str]] = set()

    async def settle(
        self, session: Session, ctx: ToolContext, settings: MergedSettings
    ) -> MergedSettings:
        """Report what is left out (once per content); offer it for trust to a person."""
        events = self.sessions.log(session.id)
        for path, error in settings.unreadable:
            if (session.id, path, error) not in self._reported:
                self._reported.add((session.id, path, error))
                events.emit(
                    SettingsIgnored(
                        path=path, sha256="", widens=None, reason=unreadable_reason(path, error)
                    )
                )
        approved = False
        for file in settings.untrusted:
            key = (session.id, file.path, file.sha256)
            if key not in self._reported:
                self._reported.add(key)
                self._report(session, file)
            if key in self._offered or "dontAsk" in (
                session.permission_mode,
                settings.default_mode,
            ):
                continue
            if not self.asker.has_listeners(session.id):
                continue
            self._offered.add(key)
            answer = await self._offer(session, ctx, file)
            if answer.decision is Behavior.ALLOW:
                self.settings.trust.approve(file.path, file.sha256, answer.decided_by)
                approved = True
        return await self.settings.for_session(session) if approved else settings

    def _report(self, session: Session, file: UntrustedFile) -> None:
        reason = untrusted_reason(file)
        self.sessions.log(session.id).emit(
            SettingsIgnored(path=file.path, sha256=file.sha256, widens=file.widens, reason=reason)
        )
        log.warning("session %s: %s", session.id, reason)

    async def _offer(self, session: Session, ctx: ToolContext, file: UntrustedFile) -> Answer:
        return await self.asker.ask(
            session.id,
            tool_use_id=ctx.tool_use_id,
            tool_name=TRUST_PROMPT,
            tool_input={"path": file.path, "sha256": file.sha256, "widens": file.widens},
            reasons=[
                f"trust these settings? {file.path} (sha256 {file.sha256}) widens what runs "
                "unasked; trusting applies exactly this content, until it changes:",
                *describe_widening(file.widens),
            ],
            cancelled=ctx.cancelled,
            announce=waiting(ctx, "waiting for a person to trust the workspace settings"),
        )

    async def ignored(self, session: Session) -> list[tuple[str, str, dict[str, Any], str]]:
        """(path, sha256, widens, reason) of every file or part not applied to `session` now."""
        merged = await self.settings.for_session(session)
        out = [(f.path, f.sha256, f.widens, untrusted_reason(f)) for f in merged.untrusted]
        out += [(path, "", {}, unreadable_reason(path, err)) for path, err in merged.unreadable]
        return out

    async def trust_entries(self, path: str) -> list[TrustEntry]:
        """The trusted contents and the settings files as they are now: of `path` only, or
        of every file under the workspace roots of the open sessions."""
        roots = [r for s in self.sessions.list() for r in s.workspace_roots]
        if path:
            root, name = split_settings_path(path)
            path = os.path.join(root, name)
            reads = [await read_settings(root, name)]
            trusts = [t for t in self.settings.trust.all() if t.path == path]
        else:
            reads = await self.settings.files(list(dict.fromkeys(roots)))
            trusts = self.settings.trust.all()
        now = {r.path: r for r in reads}
        entries: list[TrustEntry] = []
        listed: set[tuple[str, str]] = set()
        for t in trusts:
            read = now.get(t.path)
            current = read is not None and read.sha256 == t.sha256
            widens = self.settings.parsed(read).widens if current and read is not None else None
            entries.append(_trusted_entry(t, widens, current))
            listed.add((t.path, t.sha256))
        for read in reads:
            if read.error:
                entries.append(TrustEntry(read.path, "", "unreadable", error=read.error))
            elif read.sha256 and (read.path, read.sha256) not in listed:
                widens = self.settings.parsed(read).widens
                if widens:
                    entries.append(
                        TrustEntry(read.path, read.sha256, "untrusted", widens=widens, current=True)
                    )
        return entries

    async def approve(self, path: str, sha256: str, by: str) -> TrustEntry:
        """Trust `sha256` for `path`, which must hold exactly that content now: a person
        approves what they were shown, not what the file says by the time they answer."""
        root, name = split_settings_path(path)
        read = await read_settings(root, name)
        if read.error:
            raise InvalidRequest(f"{read.path} was {read.error}; nothing to trust")
        if not read.sha256:
            raise NotFound(f"{read.path} does not exist")
        if read.sha256 != sha256:
            raise InvalidRequest(
                f"{read.path} holds other content now (sha256 {read.sha256}, not {sha256}); "
                f"review it with `agentctl trust ls --path {read.path}` and approve that"
            )
        trust = self.settings.trust.approve(read.path, sha256, by)
        return _trusted_entry(trust, self.settings.parsed(read).widens, True)

    def revoke(self, path: str, sha256: str) -> list[TrustEntry]:
        root, name = split_settings_path(path)
        path = os.path.join(root, name)
        gone = self.settings.trust.revoke(path, sha256)
        if not gone and self.settings.trust.in_config(path, sha256):
            raise InvalidRequest(
                f"{path} is trusted by the daemon's config (trusted_settings); remove it there "
                "and restart the daemon"
            )
        return [_trusted_entry(t, None, False) for t in gone]


def _trusted_entry(t: Trust, widens: dict[str, Any] | None, current: bool) -> TrustEntry:
    return TrustEntry(
        t.path,
        t.sha256,
        "trusted",
        t.source,
        t.approved_by,
        t.approved_ms,
        widens,
        current,
    )
