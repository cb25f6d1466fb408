"""One-time tokens for the terminal socket: each names what its connection carries (one
task's terminal, or a forward to one session's port), the uid that may present it, and
what the connection may do; good once, for a few seconds.

A token is 32 random bytes, kept by its sha256 (a lookup compares digests, so its time
says nothing about a token). Presenting one spends it, whether or not the connection's
uid is the one it was made for.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

# Seconds a token is good for: OpenTerminal's caller connects at once.
TOKEN_SECONDS = 10.0
# Tokens outstanding at most; the oldest are dropped past it.
MAX_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class Grant:
    """What a redeemed token allows: one task's terminal, as its OpenTerminal asked."""

    session_id: str
    task_id: str
    uid: int
    offset: int
    input: bool
    hangup_on_drop: bool
    by: str  # who asked (the gRPC caller's identity), for the task's events
    expires: float


@dataclass(frozen=True, slots=True)
class ForwardGrant:
    """What a redeemed token allows: a multiplexed forward to one port of a session's
    sandbox, as its OpenForward asked (checked then: the session, the port, the host)."""

    session_id: str
    port: int
    host: str
    forward_id: str
    namespace: str  # the session's network namespace, where its connections are made
    uid: int
    by: str  # who asked (the gRPC caller's identity): its caps and journal rows
    expires: float


class Refused(Exception):
    """The token is unknown, spent, expired, or the connection's uid is not its own."""


class TerminalTokens:
    def __init__(self, seconds: float = TOKEN_SECONDS) -> None:
        self._seconds = seconds
        self._grants: dict[bytes, Grant | ForwardGrant] = {}

    def issue(
        self,
        session_id: str,
        task_id: str,
        uid: int,
        *,
        offset: int,
        input: bool,
        hangup_on_drop: bool,
        by: str,
    ) -> bytes:
        now = time.monotonic()
        return self._keep(
            Grant(session_id, task_id, uid, offset, input, hangup_on_drop, by, now + self._seconds),
            now,
        )

    def issue_forward(
        self,
        session_id: str,
        uid: int,
        *,
        port: int,
        host: str,
        forward_id: str,
        namespace: str,
        by: str,
    ) -> bytes:
        now = time.monotonic()
        grant = ForwardGrant(
            session_id, port, host, forward_id, namespace, uid, by, now + self._seconds
        )
        return self._keep(grant, now)

    def _keep(self, grant: Grant | ForwardGrant, now: float) -> bytes:
        self._expire(now)
        token = secrets.token_bytes(32)
        self._grants[_digest(token)] = grant
        while len(self._grants) > MAX_TOKENS:
            del self._grants[next(iter(self._grants))]
        return token

    def redeem(self, token: bytes, uid: int) -> Grant | ForwardGrant:
        """The grant of `token`, spent now; Refused unless it is live and for `uid`."""
        grant = self._grants.pop(_digest(token), None)
        if grant is None:
            raise Refused(
                "unknown or already used token: ask OpenTerminal (or OpenForward) for another"
            )
        if time.monotonic() > grant.expires:
            raise Refused("expired token: ask OpenTerminal (or OpenForward) for another")
        if grant.uid != uid:
            raise Refused(f"this token is for uid {grant.uid}, not {uid}")
        return grant

    def _expire(self, now: float) -> None:
        for key in [k for k, g in self._grants.items() if g.expires < now]:
            del self._grants[key]


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()
